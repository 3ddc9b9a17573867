package httpadapter

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"

	"gopkg.in/yaml.v3"
)

func parseYAML(data []byte, file string) ([]Rule, error) {
	var root yaml.Node
	in := &byteReader{data: data}
	yamlParses.Add(1)
	dec := yaml.NewDecoder(in)
	if err := dec.Decode(&root); err != nil && !errors.Is(err, io.EOF) {
		return nil, yamlSyntaxError(data, in.n, file, err)
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		return nil, fileError(file, extra.Line, errors.New("more than one YAML document"))
	}
	var fr fileRules
	yamlParses.Add(1)
	strict := yaml.NewDecoder(bytes.NewReader(data))
	strict.KnownFields(true)
	if err := strict.Decode(&fr); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return nil, fileError(file, 0, err)
		}
		return nil, yamlTypeError(file, &root, te)
	}
	ruleNodes, found := yamlRuleNodes(&root)
	if !found {
		return nil, fileError(file, 0, errNoRulesKey)
	}
	lines := make([]int, len(ruleNodes))
	for i, n := range ruleNodes {
		lines[i] = n.Line
	}
	return convert(file, fr.Rules, lines)
}

// yamlRuleNodes returns the items of the top-level "rules" sequence, and
// whether there is a "rules" key at all.
func yamlRuleNodes(root *yaml.Node) ([]*yaml.Node, bool) {
	doc := root
	if doc.Kind == yaml.DocumentNode && len(doc.Content) == 1 {
		doc = doc.Content[0]
	}
	if doc.Kind != yaml.MappingNode {
		return nil, false
	}
	for i := 0; i+1 < len(doc.Content); i += 2 {
		if doc.Content[i].Value == "rules" {
			return doc.Content[i+1].Content, true
		}
	}
	return nil, false
}

// yamlTypeError rewrites the messages of a strict decoding error ("line 7:
// field limt not found in type ...", "line 9: cannot unmarshal !!str
// `many` into int64") to name the rule and the field path, found in the
// document's nodes by line and value.
func yamlTypeError(file string, root *yaml.Node, te *yaml.TypeError) error {
	rules, _ := yamlRuleNodes(root)
	msgs := make([]string, 0, len(te.Errors))
	for _, e := range te.Errors {
		line, msg, val := splitYAMLError(e)
		at := where(file, line)
		prefix := ""
		for i, rn := range rules {
			if rn.Kind != yaml.MappingNode && rn.Line == line {
				msg = "not a rule: a mapping of fields (name:, policy:, ...) is wanted"
				prefix = fmt.Sprintf("%s: rule #%d: ", at, i+1)
				break
			}
			if p := yamlPath(rn, line, val, ""); p != "" {
				who := fmt.Sprintf("rule #%d (it has no name)", i+1)
				if name := yamlName(rn); name != "" {
					who = fmt.Sprintf("rule %q", name)
				}
				prefix = fmt.Sprintf("%s: %s: %s: ", at, who, p)
				break
			}
		}
		if prefix == "" {
			prefix = at + ": "
			if msg == "unknown field" {
				prefix += val + ": "
			}
		}
		msgs = append(msgs, prefix+yamlTypeMessage(msg))
	}
	return fmt.Errorf("%w: %s", ErrInvalidConfig, strings.Join(msgs, "; "))
}

// splitYAMLError splits one yaml.v3 type error message into its line, the
// message and the value it is about (a field name or a scalar).
func splitYAMLError(e string) (line int, msg, val string) {
	msg = e
	if rest, ok := strings.CutPrefix(e, "line "); ok {
		if n, m, ok := strings.Cut(rest, ": "); ok {
			if _, err := fmt.Sscan(n, &line); err == nil {
				msg = m
			}
		}
	}
	if f, ok := strings.CutPrefix(msg, "field "); ok {
		if f, _, ok := strings.Cut(f, " not found in type"); ok {
			return line, "unknown field", f
		}
	}
	if _, rest, ok := strings.Cut(msg, "`"); ok {
		if v, _, ok := strings.Cut(rest, "`"); ok {
			val = v
		}
	}
	return line, msg, val
}

// yamlPath returns the path (policy.limit, when[1].path.exact) under n of
// the key or scalar at line whose value is val ("" matches any; a value
// ending in "..." is a truncated one), or "".
func yamlPath(n *yaml.Node, line int, val, prefix string) string {
	same := func(m *yaml.Node) bool {
		if m.Line != line {
			return false
		}
		if v, ok := strings.CutSuffix(val, "..."); ok {
			return strings.HasPrefix(m.Value, v)
		}
		return val == "" || m.Value == val
	}
	switch n.Kind {
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			p := k.Value
			if prefix != "" {
				p = prefix + "." + k.Value
			}
			if same(k) || v.Kind == yaml.ScalarNode && same(v) {
				return p
			}
			if r := yamlPath(v, line, val, p); r != "" {
				return r
			}
		}
	case yaml.SequenceNode:
		for j, c := range n.Content {
			p := fmt.Sprintf("%s[%d]", prefix, j)
			if c.Kind == yaml.ScalarNode && same(c) {
				return p
			}
			if r := yamlPath(c, line, val, p); r != "" {
				return r
			}
		}
	}
	return ""
}

// yamlName finds a rule's name in its node, for error messages.
func yamlName(node *yaml.Node) string {
	if node.Kind != yaml.MappingNode {
		return ""
	}
	for i := 0; i+1 < len(node.Content); i += 2 {
		if node.Content[i].Value == "name" {
			return node.Content[i+1].Value
		}
	}
	return ""
}
