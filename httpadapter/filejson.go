package httpadapter

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

func parseJSON(data []byte, file string) ([]Rule, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	syntax := func(err error) error { return jsonSyntaxError(data, file, err) }
	if _, err := dec.Token(); err != nil { // '{', as parseRules saw
		return nil, syntax(err)
	}
	var (
		frs   []fileRule
		lines []int
		found bool
	)
	for dec.More() {
		off := dec.InputOffset()
		tok, err := dec.Token()
		if err != nil {
			return nil, syntax(err)
		}
		key, _ := tok.(string)
		switch {
		case key != "rules":
			return nil, fileError(file, lineAt(data, off), fmt.Errorf("%q: unknown field", key))
		case found:
			return nil, fileError(file, lineAt(data, off), errors.New(`"rules" given twice`))
		}
		found = true
		if frs, lines, err = jsonRules(dec, data, file); err != nil {
			return nil, err
		}
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, syntax(err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, fileError(file, lineAt(data, dec.InputOffset()), errors.New("data after the rules object"))
	}
	if !found {
		return nil, fileError(file, 0, errNoRulesKey)
	}
	return convert(file, frs, lines)
}

// jsonRules decodes the value of "rules", null or a list of rules, and the
// line of each rule.
func jsonRules(dec *json.Decoder, data []byte, file string) ([]fileRule, []int, error) {
	off := dec.InputOffset()
	tok, err := dec.Token()
	if err != nil {
		return nil, nil, jsonSyntaxError(data, file, err)
	}
	if tok == nil {
		return nil, nil, nil
	}
	if d, ok := tok.(json.Delim); !ok || d != '[' {
		return nil, nil, fileError(file, lineAt(data, off), errors.New(`"rules" is not a list`))
	}
	var (
		frs   []fileRule
		lines []int
	)
	for i := 0; dec.More(); i++ {
		off := dec.InputOffset()
		line := lineAt(data, off)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return nil, nil, jsonSyntaxError(data, file, err)
		}
		var named struct {
			Name any `json:"name"`
		}
		_ = json.Unmarshal(raw, &named)
		var fr fileRule
		d := json.NewDecoder(bytes.NewReader(raw))
		d.DisallowUnknownFields()
		if err := d.Decode(&fr); err != nil {
			// A wrong type's offset counts from the rule: say the line of
			// the field, not the rule's first.
			var te *json.UnmarshalTypeError
			if start := bytes.Index(data[off:], raw); errors.As(err, &te) && start >= 0 {
				line, _ = position(data, off+int64(start)+te.Offset-1)
			}
			return nil, nil, ruleError(file, line, i, named.Name, jsonField(err))
		}
		frs, lines = append(frs, fr), append(lines, line)
	}
	if _, err := dec.Token(); err != nil { // ']'
		return nil, nil, jsonSyntaxError(data, file, err)
	}
	return frs, lines, nil
}

// lineAt returns the line of the first byte at or after off that is not
// blank or a comma: where the next JSON token starts.
func lineAt(data []byte, off int64) int {
	if off < 0 || off > int64(len(data)) {
		return 0
	}
	rest := data[off:]
	skip := len(rest) - len(bytes.TrimLeft(rest, " \t\r\n,"))
	return 1 + bytes.Count(data[:off+int64(skip)], []byte{'\n'})
}
