package httpadapter

import (
	"net/http"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
)

var testTrusted = []netip.Prefix{
	netip.MustParsePrefix("10.0.0.0/8"),
	netip.MustParsePrefix("2001:db8:ffff::/48"),
}

func resolveWith(header, peer string, lines ...string) (string, bool) {
	v := ipResolver{trusted: testTrusted, header: header}
	r := &http.Request{RemoteAddr: peer, Header: http.Header{}}
	for _, l := range lines {
		r.Header.Add(header, l)
	}
	a, ok := v.resolve(r)
	if !ok {
		return "unknown", false
	}
	return a.String(), true
}

func TestResolveClientIP(t *testing.T) {
	tests := []struct {
		name, header, peer string
		lines              []string
		want               string
	}{
		{"peer", XForwardedFor, "192.0.2.1:80", nil, "192.0.2.1"},
		{"bare peer", XForwardedFor, "192.0.2.1", nil, "192.0.2.1"},
		{"peer v6 zone", XForwardedFor, "[fe80::1%eth0]:80", nil, "fe80::1"},
		{"peer v4-mapped", XForwardedFor, "[::ffff:192.0.2.1]:80", nil, "192.0.2.1"},
		{"peer unix", XForwardedFor, "@", nil, "unknown"},
		{"untrusted peer header ignored", XForwardedFor, "192.0.2.1:80", []string{"198.51.100.1"}, "192.0.2.1"},
		{"trusted peer no header", XForwardedFor, "10.0.0.1:80", nil, "10.0.0.1"},
		{"xff one hop", XForwardedFor, "10.0.0.1:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"xff skip trusted", XForwardedFor, "10.0.0.1:80", []string{"6.6.6.6, 198.51.100.1, 10.9.9.9"}, "198.51.100.1"},
		{"xff lines", XForwardedFor, "10.0.0.1:80", []string{"6.6.6.6, 198.51.100.1", "10.1.1.1", "10.2.2.2"}, "198.51.100.1"},
		{"xff all trusted", XForwardedFor, "10.0.0.1:80", []string{"10.3.3.3, 10.2.2.2"}, "10.3.3.3"},
		{"xff port", XForwardedFor, "10.0.0.1:80", []string{"198.51.100.1:4711"}, "198.51.100.1"},
		{"xff v6 brackets", XForwardedFor, "[2001:db8:ffff::1]:80", []string{"[2001:db8::7]:4711"}, "2001:db8::7"},
		{"xff v6 bare", XForwardedFor, "10.0.0.1:80", []string{"2001:db8::7"}, "2001:db8::7"},
		{"xff junk at client", XForwardedFor, "10.0.0.1:80", []string{"198.51.100.1, junk"}, "unknown"},
		{"xff junk left of client", XForwardedFor, "10.0.0.1:80", []string{"junk, 198.51.100.1"}, "198.51.100.1"},
		{"xff empty hop", XForwardedFor, "10.0.0.1:80", []string{"198.51.100.1,"}, "unknown"},
		{"forwarded", Forwarded, "10.0.0.1:80", []string{`for=198.51.100.1;proto=https;by=10.0.0.1`}, "198.51.100.1"},
		{"forwarded list", Forwarded, "10.0.0.1:80", []string{`for=6.6.6.6, for="198.51.100.1:80", for=10.2.2.2`}, "198.51.100.1"},
		{"forwarded v6", Forwarded, "10.0.0.1:80", []string{`For="[2001:db8::7]:4711"`}, "2001:db8::7"},
		{"forwarded quoted comma", Forwarded, "10.0.0.1:80", []string{`for=198.51.100.1;x="a,b", for=10.2.2.2`}, "198.51.100.1"},
		{"forwarded escaped", Forwarded, "10.0.0.1:80", []string{`for="198.51.100.\1"`}, "198.51.100.1"},
		{"forwarded unknown", Forwarded, "10.0.0.1:80", []string{`for=unknown`}, "unknown"},
		{"forwarded obfuscated", Forwarded, "10.0.0.1:80", []string{`for=_hidden, for=10.2.2.2`}, "unknown"},
		{"forwarded no for", Forwarded, "10.0.0.1:80", []string{`proto=https`}, "unknown"},
		{"forwarded obfuscated port", Forwarded, "10.0.0.1:80", []string{`for="[2001:db8::7]:_p1"`}, "2001:db8::7"},
		{"x-real-ip", XRealIP, "10.0.0.1:80", []string{"198.51.100.1"}, "198.51.100.1"},
		{"x-real-ip junk", XRealIP, "10.0.0.1:80", []string{"x"}, "unknown"},
		{"x-real-ip untrusted", XRealIP, "198.51.100.9:80", []string{"198.51.100.1"}, "198.51.100.9"},
	}
	for _, tt := range tests {
		got, _ := resolveWith(tt.header, tt.peer, tt.lines...)
		assert.Equal(t, tt.want, got, tt.name)
	}
}

func TestGroupIPv6(t *testing.T) {
	a := netip.MustParseAddr("2001:db8:1:2:3:4:5:6")
	assert.Equal(t, "2001:db8:1:2::", group(a, 32, 64).String())
	assert.Equal(t, "2001:db8:1::", group(a, 32, 48).String())
	assert.Equal(t, "192.0.2.0", group(netip.MustParseAddr("192.0.2.77"), 24, 64).String())
}

func TestResolveDoesNotAllocate(t *testing.T) {
	v := ipResolver{trusted: testTrusted, header: XForwardedFor}
	r := &http.Request{RemoteAddr: "10.0.0.1:80", Header: http.Header{XForwardedFor: {"6.6.6.6, 198.51.100.1, 10.2.2.2"}}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { v.resolve(r) }))
	v.header = Forwarded
	r.Header = http.Header{Forwarded: {`for=6.6.6.6, for="198.51.100.1:80";proto=https, for=10.2.2.2`}}
	assert.Zero(t, testing.AllocsPerRun(100, func() { v.resolve(r) }))
}

// naiveXFF is the obvious X-Forwarded-For walk, to compare with.
func naiveXFF(v *ipResolver, lines []string, peer netip.Addr) (netip.Addr, bool) {
	var nonBlank []string // a blank line has no hop
	for _, l := range lines {
		if strings.TrimSpace(l) != "" {
			nonBlank = append(nonBlank, l)
		}
	}
	var hops []string
	if len(nonBlank) > 0 {
		hops = strings.Split(strings.Join(nonBlank, ","), ",")
	}
	last := peer
	for i := len(hops) - 1; i >= 0; i-- {
		a, ok := parseNode(strings.TrimSpace(hops[i]))
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

func FuzzForwardedFor(f *testing.F) {
	f.Add("10.0.0.1:80", "198.51.100.1, 10.2.2.2", "")
	f.Add("10.0.0.1:80", "6.6.6.6,198.51.100.1:80", "10.9.9.9")
	f.Add("[2001:db8:ffff::1]:1", "[2001:db8::1]:4711", "for=\"[2001:db8::1]\"")
	f.Add("10.0.0.1:80", "for=198.51.100.1;proto=http, for=_x", `for="a,b";by=x, For=10.1.1.1`)
	f.Add("192.0.2.1:1", "junk", "for=unknown")
	f.Add("10.0.0.1:80", "", `for="\"`)
	f.Fuzz(func(t *testing.T, peer, line1, line2 string) {
		lines := []string{line1}
		if line2 != "" {
			lines = append(lines, line2)
		}
		for _, h := range []string{XForwardedFor, Forwarded, XRealIP} {
			v := ipResolver{trusted: testTrusted, header: h}
			r := &http.Request{RemoteAddr: peer, Header: http.Header{h: lines}}
			a, ok := v.resolve(r)
			if !ok {
				continue
			}
			if !a.IsValid() || a.Zone() != "" || a.Is4In6() {
				t.Fatalf("%s: %v is not a normalized address", h, a)
			}
			p, pok := parsePeer(peer)
			if !pok {
				t.Fatalf("%s: resolved %v for an unknown peer %q", h, a, peer)
			}
			if !v.isTrusted(p) && a != p {
				t.Fatalf("%s: untrusted peer %v, resolved %v from the header", h, p, a)
			}
			if h == XForwardedFor && v.isTrusted(p) {
				want, wok := naiveXFF(&v, lines, p)
				if wok != ok || want != a {
					t.Fatalf("XFF %q: got %v %v, naive %v %v", lines, a, ok, want, wok)
				}
			}
		}
	})
}

func TestUnmapPrefix(t *testing.T) {
	tests := []struct{ in, want string }{
		{"::ffff:127.0.0.1/128", "127.0.0.1/32"},
		{"::ffff:10.1.2.3/104", "10.0.0.0/8"},
		{"::ffff:0.0.0.0/96", "0.0.0.0/0"},
		{"::ffff:0:0/95", "::fffe:0:0/95"}, // wider than the mapped range: IPv6
		{"10.1.2.3/8", "10.0.0.0/8"},
		{"2001:db8::1/32", "2001:db8::/32"},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, unmapPrefix(netip.MustParsePrefix(tt.in)).String(), tt.in)
	}
}
