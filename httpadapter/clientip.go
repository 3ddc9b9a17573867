package httpadapter

import (
	"net/http"
	"net/netip"
	"strings"
)

// Forwarding headers [Config.ClientIPHeader] may name.
const (
	XForwardedFor = "X-Forwarded-For"
	Forwarded     = "Forwarded"
	XRealIP       = "X-Real-Ip" // canonical form of X-Real-IP
)

// UnknownIP says what happens to a request whose client IP cannot be
// determined: a RemoteAddr that is not an IP address (a Unix socket, a
// test's made-up value), or a trusted proxy's forwarding header whose entry
// for the client is not an address ("unknown", an obfuscated identifier,
// garbage).
type UnknownIP int

const (
	// UnknownIPGroup, the default, lets such requests through the rules:
	// an "ip" characteristic has one value, "unknown", shared by all of
	// them (so they share one counter per rule and cannot escape a limit),
	// and ClientIPIn and CountryIn conditions do not hold (negated ones
	// do).
	UnknownIPGroup UnknownIP = iota
	// UnknownIPReject answers such a request 400 Bad Request when a rule
	// needs its client IP (a condition on it, or an "ip" characteristic of
	// a rule whose conditions hold). The rejection is counted in Stats.
	UnknownIPReject
)

// ipResolver finds a request's client IP.
type ipResolver struct {
	trusted []netip.Prefix
	header  string // canonical; "" when trusted is empty
}

func (v *ipResolver) isTrusted(a netip.Addr) bool {
	for _, p := range v.trusted {
		if p.Contains(a) {
			return true
		}
	}
	return false
}

// resolve returns the client IP of r: the direct peer, unless the peer is a
// trusted proxy; then the forwarding header is read right to left and the
// first hop that is not trusted is the client (or the leftmost hop, when all
// of them are trusted). ok is false when the IP cannot be determined.
func (v *ipResolver) resolve(r *http.Request) (netip.Addr, bool) {
	peer, ok := parsePeer(r.RemoteAddr)
	if !ok || len(v.trusted) == 0 || !v.isTrusted(peer) {
		return peer, ok
	}
	lines := r.Header[v.header]
	switch v.header {
	case XForwardedFor:
		return v.walkXFF(lines, peer)
	case Forwarded:
		return v.walkForwarded(lines, peer)
	default: // X-Real-IP: one address, set by the proxy
		if len(lines) == 0 {
			return peer, true
		}
		return parseNode(strings.TrimSpace(lines[len(lines)-1]))
	}
}

// walkXFF reads comma-separated X-Forwarded-For hops, from the last line's
// last hop backwards.
func (v *ipResolver) walkXFF(lines []string, last netip.Addr) (netip.Addr, bool) {
	for i := len(lines) - 1; i >= 0; i-- {
		line := lines[i]
		for {
			j := strings.LastIndexByte(line, ',')
			hop := strings.TrimSpace(line[j+1:])
			if hop != "" || j >= 0 {
				a, ok := parseNode(hop)
				if !ok {
					return netip.Addr{}, false
				}
				if !v.isTrusted(a) {
					return a, true
				}
				last = a
			}
			if j < 0 {
				break
			}
			line = line[:j]
		}
	}
	return last, true
}

// walkForwarded reads the for= parameters of RFC 7239 Forwarded elements,
// last first. An element without for= is a hop that cannot be known.
func (v *ipResolver) walkForwarded(lines []string, last netip.Addr) (netip.Addr, bool) {
	var arr [16]string
	fors := arr[:0]
	for _, line := range lines {
		fors = appendForwardedFors(fors, line)
	}
	for i := len(fors) - 1; i >= 0; i-- {
		a, ok := parseNode(fors[i])
		if !ok {
			return netip.Addr{}, false
		}
		if !v.isTrusted(a) {
			return a, true
		}
		last = a
	}
	return last, true
}

// appendForwardedFors appends the for= value of each element of one
// Forwarded field line to fors, unquoted ("" for an element without one).
// Elements are separated by commas and pairs by semicolons outside quoted
// strings.
func appendForwardedFors(fors []string, line string) []string {
	forVal, hasFor := "", false
	elemEmpty := true
	i := 0
	for i <= len(line) {
		if i == len(line) || line[i] == ',' {
			if !elemEmpty {
				fors = append(fors, forVal)
			}
			forVal, hasFor, elemEmpty = "", false, true
			i++
			continue
		}
		if line[i] == ';' || line[i] == ' ' || line[i] == '\t' {
			i++
			continue
		}
		// a pair: token "=" (token / quoted-string)
		elemEmpty = false
		start := i
		for i < len(line) && line[i] != '=' && line[i] != ',' && line[i] != ';' {
			i++
		}
		key := strings.TrimSpace(line[start:i])
		var val string
		if i < len(line) && line[i] == '=' {
			i++
			if i < len(line) && line[i] == '"' {
				val, i = readQuoted(line, i)
			} else {
				vs := i
				for i < len(line) && line[i] != ',' && line[i] != ';' {
					i++
				}
				val = strings.TrimSpace(line[vs:i])
			}
		}
		if !hasFor && strings.EqualFold(key, "for") {
			forVal, hasFor = val, true
		}
	}
	return fors
}

// readQuoted reads the quoted string starting at line[i] == '"' and returns
// its content and the index after it. A string that is not closed runs to
// the end of the line.
func readQuoted(line string, i int) (string, int) {
	i++ // opening quote
	start := i
	escaped := false
	for j := i; j < len(line); j++ {
		switch line[j] {
		case '\\':
			if j+1 < len(line) {
				escaped = true
				j++
			}
		case '"':
			s := line[start:j]
			if escaped {
				s = unescapeQuoted(s)
			}
			return s, j + 1
		}
	}
	s := line[start:]
	if escaped {
		s = unescapeQuoted(s)
	}
	return s, len(line)
}

func unescapeQuoted(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+1 < len(s) {
			i++
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

// parsePeer parses a RemoteAddr: "ip:port", "[ipv6]:port" or a bare IP.
func parsePeer(s string) (netip.Addr, bool) {
	if ap, err := netip.ParseAddrPort(s); err == nil {
		return normalize(ap.Addr()), true
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	return netip.Addr{}, false
}

// parseNode parses one hop of a forwarding header: an IP, "ip:port",
// "[ipv6]" or "[ipv6]:port". Anything else ("unknown", "_hidden", junk) is
// not an address.
func parseNode(s string) (netip.Addr, bool) {
	if s == "" {
		return netip.Addr{}, false
	}
	if s[0] == '[' {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return netip.Addr{}, false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() {
			return netip.Addr{}, false
		}
		if rest := s[end+1:]; rest != "" && !validPort(rest) {
			return netip.Addr{}, false
		}
		return normalize(a), true
	}
	if strings.Count(s, ":") == 1 { // IPv4 and port; tried first, as a failed parse allocates its error
		if ap, err := netip.ParseAddrPort(s); err == nil && ap.Addr().Is4() {
			return normalize(ap.Addr()), true
		}
		return netip.Addr{}, false
	}
	if a, err := netip.ParseAddr(s); err == nil {
		return normalize(a), true
	}
	return netip.Addr{}, false
}

// validPort reports whether s is ":" and 1 to 5 digits, or an RFC 7239
// obfuscated port (":_" and token characters).
func validPort(s string) bool {
	if len(s) < 2 || s[0] != ':' {
		return false
	}
	s = s[1:]
	if s[0] == '_' {
		return validToken(s)
	}
	if len(s) > 5 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// normalize drops the zone and unmaps IPv4-mapped IPv6 addresses.
func normalize(a netip.Addr) netip.Addr {
	return a.WithZone("").Unmap()
}

// unmapPrefix returns p masked, and an IPv4-mapped IPv6 prefix
// (::ffff:a.b.c.d/n, n >= 96) as the IPv4 prefix a.b.c.d/(n-96): client IPs
// are unmapped before they are compared, so the mapped form would never
// match.
func unmapPrefix(p netip.Prefix) netip.Prefix {
	p = p.Masked()
	if a := p.Addr(); a.Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(a.Unmap(), p.Bits()-96)
	}
	return p
}

// group masks ip to the grouping prefix of its family.
func group(ip netip.Addr, bits4, bits6 int) netip.Addr {
	bits := bits6
	if ip.Is4() {
		bits = bits4
	}
	p, err := ip.Prefix(bits)
	if err != nil {
		return ip
	}
	return p.Addr()
}
