package httpadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
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

// yamlSyntaxError words a YAML syntax error of data. yaml.v3 reports the
// line of the construct the error is in, zero-based for some errors and
// one-based for others, and no column; so the place is found again here:
// the shortest prefix of data that fails with the same message as the
// whole file ends where the parser meets the problem. Its line is at or
// after the reported one, usually on it or the next: those are tried
// first, then a binary search over the lines after them (a prefix that
// holds the problem fails as the whole file does). A binary search over
// that line's characters then finds the column, for files of up to
// yamlColumnLimit bytes (each try parses the prefix again, and yaml.v3
// takes about a second a megabyte).
func yamlSyntaxError(data []byte, file string, err error) error {
	full := err.Error()
	msg := strings.TrimPrefix(full, "yaml: ")
	hint := 0
	if rest, ok := strings.CutPrefix(msg, "line "); ok {
		if n, m, ok := strings.Cut(rest, ": "); ok {
			msg = m
			_, _ = fmt.Sscan(n, &hint)
		}
	}
	msg = "YAML syntax: " + msg
	same := func(n int) bool {
		var node yaml.Node
		e := yaml.Unmarshal(data[:n], &node)
		return e != nil && e.Error() == full
	}
	ends := lineEnds(data)
	if len(ends) == 0 {
		return fileError(file, 0, errors.New(msg))
	}
	first := min(max(hint, 1), len(ends)) // the line, counted from 1, is at least this
	line := 0
	for k := first; k <= min(first+2, len(ends)) && line == 0; k++ {
		if same(ends[k-1]) {
			line = k
		}
	}
	if line == 0 {
		from := min(first+3, len(ends))
		if !same(ends[len(ends)-1]) {
			return fileError(file, 0, errors.New(msg))
		}
		line = from + firstTrue(len(ends)-from, func(i int) bool { return same(ends[from-1+i]) })
	}
	if len(data) > yamlColumnLimit {
		return fileError(file, line, errors.New(msg))
	}
	start := 0
	if line > 1 {
		start = ends[line-2]
	}
	// The shortest prefix ending on the line; its last character is where
	// the parser stopped.
	n := start + 1 + firstTrue(ends[line-1]-start, func(i int) bool { return same(start + i + 1) })
	col := utf8.RuneCount(data[start:n])
	if col < 1 || n > ends[line-1] {
		return fileError(file, line, errors.New(msg))
	}
	return fmt.Errorf("%w: %s column %d: %s", ErrInvalidConfig, where(file, line), col, msg)
}

// yamlColumnLimit is the largest rules file whose YAML syntax errors get a
// column; tests lower it.
var yamlColumnLimit = 256 << 10

// firstTrue returns the least i in [0, n) for which f holds, f being false
// and then true (n when it never holds).
func firstTrue(n int, f func(int) bool) int {
	lo, hi := 0, n
	for lo < hi {
		mid := (lo + hi) / 2
		if f(mid) {
			hi = mid
		} else {
			lo = mid + 1
		}
	}
	return lo
}

// lineEnds returns the offset just past each line of data, the last line
// included even without a final newline.
func lineEnds(data []byte) []int {
	var ends []int
	for off := 0; off < len(data); {
		i := bytes.IndexByte(data[off:], '\n')
		if i < 0 {
			ends = append(ends, len(data))
			break
		}
		off += i + 1
		ends = append(ends, off)
	}
	return ends
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
