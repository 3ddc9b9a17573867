package service

import (
	"errors"
	"unicode/utf16"
	"unicode/utf8"
)

// ScanJSON checks a RateLimitRequest in protojson, as POST /json takes it,
// against the bounds before it is decoded: what ScanRequest checks of the
// wire bytes, read from the JSON text without building any value, so that
// a body of a million empty descriptors is refused at the first past the
// bound instead of being turned into a million objects. Its errors are
// those of ScanRequest. A nil error does not promise that protojson
// decodes the body: the scan reads only what it needs, and a field of the
// wrong type, an unknown one or malformed JSON elsewhere is left to
// protojson to refuse.
func (b Bounds) ScanJSON(body []byte) error {
	b = b.withDefaults()
	s := &jsonScanner{b: body}
	err := s.object(func(key string) error {
		switch key {
		case "domain":
			n, isString, err := s.stringValue()
			if err == nil && isString && n > b.KeyLength {
				return invalid(refusedDomain, "domain is %d bytes, over the bound of %d bytes (the key length bound)", n, b.KeyLength)
			}
			return err
		case "descriptors":
			return s.array(func(i int) error {
				if i == b.Descriptors {
					return invalid(refusedDescriptors, "more than %d descriptors, over the bound of %d descriptors per request", b.Descriptors, b.Descriptors)
				}
				return s.object(func(key string) error {
					if key != "entries" {
						return s.skip()
					}
					return s.array(func(j int) error {
						if j == b.Entries {
							return invalid(refusedEntries, "descriptor %d has more than %d entries, over the bound of %d entries per descriptor", i, b.Entries, b.Entries)
						}
						return s.object(func(key string) error {
							if key != "key" {
								return s.skip()
							}
							n, isString, err := s.stringValue()
							if err == nil && isString && n > b.KeyLength {
								return invalid(refusedKeyLength, "descriptor %d, entry %d: key is %d bytes, over the bound of %d bytes", i, j, n, b.KeyLength)
							}
							return err
						})
					})
				})
			})
		}
		return s.skip()
	})
	if err != nil && !isStatus(err) {
		return invalid(refusedMalformed, "the body is not a RateLimitRequest: %v", err)
	}
	return err
}

// isStatus reports whether err is a bound's refusal rather than the
// scanner's own error.
func isStatus(err error) bool { return !errors.Is(err, errJSONEnd) && !errors.Is(err, errJSONSyntax) }

var (
	errJSONEnd    = errors.New("unexpected end of JSON")
	errJSONSyntax = errors.New("JSON syntax error")
)

// jsonScanner reads JSON text in place, allocating nothing. It is lenient
// where leniency cannot change a count (a number or a literal is any run
// of bytes up to a delimiter): what it lets through, protojson refuses.
type jsonScanner struct {
	b []byte
	i int
}

// peek skips white space and returns the next byte, 0 at the end.
func (s *jsonScanner) peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// str reads the string at s.i, its opening quote, and returns its length
// once unescaped, as protojson decodes it; the first len(dst) bytes of
// the unescaped string are put in dst (a byte past ASCII as 0xff: enough
// to tell a field's name).
func (s *jsonScanner) str(dst []byte) (int, error) {
	n := 0
	put := func(c byte) {
		if n < len(dst) {
			dst[n] = c
		}
		n++
	}
	for s.i++; s.i < len(s.b); {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return n, nil
		case c != '\\':
			if c >= utf8.RuneSelf {
				c = 0xff
			}
			put(c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			return 0, errJSONEnd
		}
		switch e := s.b[s.i+1]; e {
		case '"', '\\', '/':
			put(e)
		case 'b':
			put('\b')
		case 'f':
			put('\f')
		case 'n':
			put('\n')
		case 'r':
			put('\r')
		case 't':
			put('\t')
		case 'u':
			if s.i+6 > len(s.b) {
				return 0, errJSONEnd
			}
			r := rune(0)
			for _, h := range s.b[s.i+2 : s.i+6] {
				switch {
				case h >= '0' && h <= '9':
					r = r<<4 | rune(h-'0')
				case h >= 'a' && h <= 'f':
					r = r<<4 | rune(h-'a'+10)
				case h >= 'A' && h <= 'F':
					r = r<<4 | rune(h-'A'+10)
				default:
					return 0, errJSONSyntax
				}
			}
			switch {
			case utf16.IsSurrogate(r):
				// Half of a pair: the pair is 4 bytes of UTF-8 (a lone
				// half protojson refuses).
				put(0xff)
				put(0xff)
			case r < utf8.RuneSelf:
				put(byte(r))
			default:
				for range utf8.RuneLen(r) {
					put(0xff)
				}
			}
			s.i += 4
		default:
			return 0, errJSONSyntax
		}
		s.i += 2
	}
	return 0, errJSONEnd
}

// stringValue reads a value: the unescaped length of a string, and
// whether it is one (any other value is skipped).
func (s *jsonScanner) stringValue() (int, bool, error) {
	if s.peek() != '"' {
		return 0, false, s.skip()
	}
	n, err := s.str(nil)
	return n, true, err
}

// skip reads a value whatever it is.
func (s *jsonScanner) skip() error {
	depth := 0
	for {
		switch c := s.peek(); c {
		case 0:
			return errJSONEnd
		case '"':
			if _, err := s.str(nil); err != nil {
				return err
			}
		case '{', '[':
			depth++
			s.i++
		case '}', ']':
			if depth == 0 {
				return errJSONSyntax
			}
			depth--
			s.i++
		case ',', ':':
			if depth == 0 {
				return errJSONSyntax
			}
			s.i++
		default: // a number or a literal, up to a delimiter
			for s.i < len(s.b) && !jsonDelimiter(s.b[s.i]) {
				s.i++
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

func jsonDelimiter(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', ':', '[', ']', '{', '}', '"':
		return true
	}
	return false
}

// The names of the fields ScanJSON reads (protojson's JSON and proto
// names are the same for these).
var jsonFields = [...]string{"domain", "descriptors", "entries", "key"}

// object reads a value: an object's members are passed, by name (one of
// jsonFields, else ""), to member, which must read the member's value;
// any other value is skipped.
func (s *jsonScanner) object(member func(key string) error) error {
	if s.peek() != '{' {
		return s.skip()
	}
	s.i++
	if s.peek() == '}' {
		s.i++
		return nil
	}
	for {
		if s.peek() != '"' {
			return errJSONSyntax
		}
		var buf [len("descriptors")]byte
		n, err := s.str(buf[:])
		if err != nil {
			return err
		}
		if s.peek() != ':' {
			return errJSONSyntax
		}
		s.i++
		key := ""
		for _, f := range jsonFields {
			if n == len(f) && string(buf[:n]) == f {
				key = f
			}
		}
		if err := member(key); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return nil
		case 0:
			return errJSONEnd
		default:
			return errJSONSyntax
		}
	}
}

// array reads a value: an array's elements are passed, by index, to
// elem, which must read the element; any other value is skipped.
func (s *jsonScanner) array(elem func(i int) error) error {
	if s.peek() != '[' {
		return s.skip()
	}
	s.i++
	if s.peek() == ']' {
		s.i++
		return nil
	}
	for i := 0; ; i++ {
		if err := elem(i); err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case ']':
			s.i++
			return nil
		case 0:
			return errJSONEnd
		default:
			return errJSONSyntax
		}
	}
}
