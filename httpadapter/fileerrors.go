package httpadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync/atomic"
	"unicode/utf8"
)

// This file words the decoders' errors for the person who wrote the rules
// file: where the error is (line, and column when known) and what a field
// wants, in the file's terms, never a Go type's name.

// wants says, for each Go type of the file's shape (as the decoders name
// it in their errors), what the file must hold there.
var wants = map[string]string{
	"httpadapter.fileRules":       `a mapping with a "rules" key`,
	"[]httpadapter.fileRule":      "a list of rules",
	"httpadapter.fileRule":        "a rule (a mapping of name:, policy:, ...)",
	"[]httpadapter.fileCondition": "a list of conditions",
	"httpadapter.fileCondition":   "a condition (a mapping such as {method: [GET]})",
	"httpadapter.filePolicy":      "a policy (a mapping such as {limit: 5, period: 1m})",
	"*httpadapter.filePolicy":     "a policy (a mapping such as {limit: 5, period: 1m})",
	"httpadapter.filePath":        "a mapping with one of exact:, prefix:, glob: (such as {prefix: /login})",
	"*httpadapter.filePath":       "a mapping with one of exact:, prefix:, glob: (such as {prefix: /login})",
	"httpadapter.fileHeader":      "a mapping with name: and one of equals:, present: true, regex:",
	"*httpadapter.fileHeader":     "a mapping with name: and one of equals:, present: true, regex:",
	"[]string":                    "a list of strings (such as [GET, POST])",
	"string":                      "a string",
	"*string":                     "a string",
	"int64":                       "a whole number",
	"*int64":                      "a whole number",
	"int":                         "a whole number",
	"bool":                        "true or false",
}

// wanted says what the file must hold where the decoder wanted goType.
func wanted(goType string) string {
	if w, ok := wants[goType]; ok {
		return w
	}
	return "a value of another kind" // a type added without words: never a Go name
}

// yamlKinds names the YAML tags of the values a decoder could not take.
var yamlKinds = map[string]string{
	"!!str":   "a string",
	"!!int":   "a number",
	"!!float": "a number",
	"!!bool":  "a boolean",
	"!!null":  "null",
	"!!seq":   "a list",
	"!!map":   "a mapping",
}

// yamlTypeMessage rewords yaml.v3's "cannot unmarshal !!str `x` into T"
// as `"x" is a string where ... is wanted`; other messages pass.
func yamlTypeMessage(msg string) string {
	rest, ok := strings.CutPrefix(msg, "cannot unmarshal ")
	if !ok {
		return msg
	}
	what, goType, ok := strings.Cut(rest, " into ")
	if !ok {
		return msg
	}
	tag, val, quoted := strings.Cut(what, " `")
	kind, ok := yamlKinds[tag]
	if !ok {
		kind = "a value"
	}
	if quoted {
		return fmt.Sprintf("%q is %s where %s is wanted", strings.TrimSuffix(val, "`"), kind, wanted(goType))
	}
	return fmt.Sprintf("%s where %s is wanted", kind, wanted(goType))
}

// yamlParses counts the parses of YAML rules files, for tests.
var yamlParses atomic.Int64

// byteReader reads data one byte a call, and counts the bytes read: the
// YAML parser reads only as far as it needs, so when it fails, the count
// says where it stopped.
type byteReader struct {
	data []byte
	n    int
}

func (r *byteReader) Read(p []byte) (int, error) {
	if r.n >= len(r.data) {
		return 0, io.EOF
	}
	if len(p) == 0 {
		return 0, nil
	}
	p[0] = r.data[r.n]
	r.n++
	return 1, nil
}

// yamlParserErrors are the messages of yaml.v3's parser (its scanner has
// the others): the parser names its construct's line counted from 0, the
// scanner from 1.
var yamlParserErrors = []string{
	"did not find expected <stream-start>",
	"did not find expected <document start>",
	"did not find expected node content",
	"did not find expected key",
	"did not find expected '-' indicator",
	"did not find expected ',' or ']'",
	"did not find expected ',' or '}'",
	"found duplicate %YAML directive",
	"found incompatible YAML document",
	"found duplicate %TAG directive",
	"found undefined tag handle",
}

// yamlSyntaxError words a YAML syntax error of data, whose parse stopped
// after reading its first read bytes. No second parse: the place is what
// that one says. The bytes it read say where the parser gave up: at or
// after the mistake, by at most two tokens; the error names that place
// (the last character read that is not a space). yaml.v3 names the line
// of the construct the error is in (the mapping, list or quoted string
// that starts there): when it is an earlier line, the error names it too.
func yamlSyntaxError(data []byte, read int, file string, err error) error {
	msg := strings.TrimPrefix(err.Error(), "yaml: ")
	construct := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, m, ok := strings.Cut(rest, ": "); ok {
			msg = m
			_, _ = fmt.Sscan(n, &construct)
			if slices.Contains(yamlParserErrors, m) {
				construct++
			}
		}
	}
	msg = "YAML syntax: " + msg
	stop := len(bytes.TrimRight(data[:min(read, len(data))], " \t\r\n")) - 1
	if stop < 0 {
		return fileError(file, construct, errors.New(msg))
	}
	line, col := position(data, int64(stop))
	if construct > 0 && construct < line {
		msg += fmt.Sprintf(" (in what starts at line %d)", construct)
	}
	return fmt.Errorf("%w: %s column %d: %s", ErrInvalidConfig, where(file, line), col, msg)
}

// position returns the line and column (both from 1; the column in
// characters) of the byte at off in data.
func position(data []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(data)))
	before := data[:off]
	start := bytes.LastIndexByte(before, '\n') + 1
	return 1 + bytes.Count(before, []byte{'\n'}), 1 + utf8.RuneCount(before[start:])
}

// jsonSyntaxError words a JSON syntax error of data, or an end of data in
// the middle of the JSON. The streaming decoder's offsets count from the
// value it was reading, so the whole file is scanned again for the offset
// of the byte that broke the syntax.
func jsonSyntaxError(data []byte, file string, err error) error {
	var v any
	if e := json.Unmarshal(data, &v); e != nil {
		err = e
	}
	var se *json.SyntaxError
	if !errors.As(err, &se) {
		return fileError(file, 0, err)
	}
	off, msg := se.Offset-1, se.Error() // Offset counts the byte that broke the syntax
	if off >= int64(len(data))-1 && strings.HasPrefix(msg, "unexpected end") {
		off = int64(len(bytes.TrimRight(data, " \t\r\n")))
		msg = "the file ends before the JSON does (a { or [ is not closed)"
	}
	line, col := position(data, off)
	return fmt.Errorf("%w: %s column %d: JSON syntax: %s", ErrInvalidConfig, where(file, line), col, msg)
}

// jsonKinds names the JSON values a decoder could not take, as
// json.UnmarshalTypeError.Value does.
var jsonKinds = map[string]string{
	"string": "a string",
	"number": "a number",
	"bool":   "a boolean",
	"array":  "a list",
	"object": "a mapping",
}

// jsonField rewords a JSON decoding error to name the field and what it
// wants.
func jsonField(err error) error {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		kind, val, _ := strings.Cut(te.Value, " ") // "number 1.5"
		if k, ok := jsonKinds[kind]; ok {
			kind = k
		}
		if val != "" {
			kind = val + " is " + kind
		}
		return fmt.Errorf("%s: %s where %s is wanted", te.Field, kind, wanted(te.Type.String()))
	}
	if s, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		return fmt.Errorf("%s: unknown field", s)
	}
	return err
}
