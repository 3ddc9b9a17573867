package service

import (
	"bytes"
	"fmt"

	"gopkg.in/yaml.v3"
)

// Redacted is what RedactedSource writes in place of a secret value.
const Redacted = "REDACTED"

// RedactedSource returns Source with the value of every descriptor whose
// key is secret replaced by Redacted: a key among secretKeys (nil:
// DefaultSecretKeys; empty: none) or one that a descriptor of its domain
// marks secret: true. A file with such a value is written back from its
// parsed form (its comments kept, its layout normalized); the others are
// as they were. GET /rlconfig serves it.
func (c *Config) RedactedSource(secretKeys []string) []byte {
	if secretKeys == nil {
		secretKeys = DefaultSecretKeys
	}
	keys := make(map[string]bool, len(secretKeys))
	for _, k := range secretKeys {
		keys[k] = true
	}
	var b bytes.Buffer
	for i, file := range c.Files {
		data := c.texts[i]
		if red, ok := redactFile(data, keys, c.secret); ok {
			data = red
		}
		if i > 0 {
			b.WriteString("---\n")
		}
		fmt.Fprintf(&b, "# %s\n", file)
		b.Write(data)
		if len(data) > 0 && data[len(data)-1] != '\n' {
			b.WriteByte('\n')
		}
	}
	return b.Bytes()
}

// redactFile returns data with its secret descriptors' values redacted,
// and whether it changed anything.
func redactFile(data []byte, keys map[string]bool, domainKeys map[string]map[string]bool) ([]byte, bool) {
	var doc yaml.Node
	if yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return nil, false // Load read it: cannot happen
	}
	root := doc.Content[0]
	domain := field(root, "domain")
	if domain == nil {
		return nil, false
	}
	secret := func(k string) bool { return keys[k] || domainKeys[domain.Value][k] }
	if !redactDescriptors(field(root, "descriptors"), secret) {
		return nil, false
	}
	var out bytes.Buffer
	enc := yaml.NewEncoder(&out)
	enc.SetIndent(2)
	if enc.Encode(&doc) != nil || enc.Close() != nil {
		return []byte("# " + Redacted + ": the file holds secret values\n"), true
	}
	return out.Bytes(), true
}

// redactDescriptors redacts the values of the secret descriptors of the
// sequence n, and reports whether it redacted one.
func redactDescriptors(n *yaml.Node, secret func(string) bool) bool {
	if n == nil || n.Kind != yaml.SequenceNode {
		return false
	}
	changed := false
	for _, d := range n.Content {
		if d.Kind != yaml.MappingNode {
			continue
		}
		if k, v := field(d, "key"), field(d, "value"); k != nil && v != nil && v.Value != "" && secret(k.Value) {
			v.Value, v.Style, v.Tag = Redacted, 0, "!!str"
			changed = true
		}
		if redactDescriptors(field(d, "descriptors"), secret) {
			changed = true
		}
	}
	return changed
}

// field returns the value of key in the mapping n, or nil.
func field(n *yaml.Node, key string) *yaml.Node {
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1]
		}
	}
	return nil
}
