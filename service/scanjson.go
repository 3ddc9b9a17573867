package service

import (
	"bytes"
	"encoding/json"
)

// ScanJSON checks a RateLimitRequest in protojson, as POST /json takes it,
// against the bounds before it is decoded: what ScanRequest checks of the
// wire bytes, read as a stream of JSON tokens, so that a body of a million
// empty descriptors is refused at the first past the bound instead of
// being turned into a million objects. Its errors are those of
// ScanRequest. A nil error does not promise that protojson decodes the
// body: a field of the wrong type, or an unknown one, is left to it.
func (b Bounds) ScanJSON(body []byte) error {
	b = b.withDefaults()
	dec := json.NewDecoder(bytes.NewReader(body))
	return b.scanObject(dec, func(key string) error {
		switch key {
		case "domain":
			tok, err := dec.Token()
			if err != nil {
				return notJSON(err)
			}
			if s, ok := tok.(string); ok && len(s) > b.KeyLength {
				return invalid("domain is %d bytes, over the bound of %d bytes (the key length bound)", len(s), b.KeyLength)
			}
			return skipOpened(dec, tok)
		case "descriptors":
			return b.scanArray(dec, func(i int) error {
				if i == b.Descriptors {
					return invalid("more than %d descriptors, over the bound of %d descriptors per request", b.Descriptors, b.Descriptors)
				}
				return b.scanObject(dec, func(key string) error {
					if key != "entries" {
						return skipValue(dec)
					}
					return b.scanArray(dec, func(j int) error {
						if j == b.Entries {
							return invalid("descriptor %d has more than %d entries, over the bound of %d entries per descriptor", i, b.Entries, b.Entries)
						}
						return b.scanObject(dec, func(key string) error {
							if key != "key" {
								return skipValue(dec)
							}
							tok, err := dec.Token()
							if err != nil {
								return notJSON(err)
							}
							if s, ok := tok.(string); ok && len(s) > b.KeyLength {
								return invalid("descriptor %d, entry %d: key is %d bytes, over the bound of %d bytes", i, j, len(s), b.KeyLength)
							}
							return skipOpened(dec, tok)
						})
					})
				})
			})
		}
		return skipValue(dec)
	})
}

// scanObject reads a value: an object's members are passed to member,
// which must read the member's value; any other value is skipped.
func (b Bounds) scanObject(dec *json.Decoder, member func(key string) error) error {
	tok, err := dec.Token()
	if err != nil {
		return notJSON(err)
	}
	if tok != json.Delim('{') {
		return skipOpened(dec, tok)
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return notJSON(err)
		}
		key, _ := tok.(string)
		if err := member(key); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return notJSON(err)
	}
	return nil
}

// scanArray reads a value: an array's elements are passed, by index, to
// elem, which must read the element; any other value is skipped.
func (b Bounds) scanArray(dec *json.Decoder, elem func(i int) error) error {
	tok, err := dec.Token()
	if err != nil {
		return notJSON(err)
	}
	if tok != json.Delim('[') {
		return skipOpened(dec, tok)
	}
	for i := 0; dec.More(); i++ {
		if err := elem(i); err != nil {
			return err
		}
	}
	if _, err := dec.Token(); err != nil {
		return notJSON(err)
	}
	return nil
}

// skipValue reads a value whatever it is.
func skipValue(dec *json.Decoder) error {
	tok, err := dec.Token()
	if err != nil {
		return notJSON(err)
	}
	return skipOpened(dec, tok)
}

// skipOpened reads the rest of a value whose first token was tok: up to
// its end when tok opens an object or an array.
func skipOpened(dec *json.Decoder, tok json.Token) error {
	if tok != json.Delim('{') && tok != json.Delim('[') {
		return nil
	}
	for depth := 1; depth > 0; {
		tok, err := dec.Token()
		if err != nil {
			return notJSON(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
	}
	return nil
}

// notJSON is the error of a body that is not JSON.
func notJSON(err error) error {
	return invalid("the body is not a RateLimitRequest: %v", err)
}
