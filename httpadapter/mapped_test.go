package httpadapter_test

import (
	"net/http"
	"net/netip"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestIPv4MappedPrefixes checks that IPv4-mapped prefixes, in trusted
// proxies, in ClientIPIn and in a rules file, match IPv4 clients (whose
// addresses are unmapped).
func TestIPv4MappedPrefixes(t *testing.T) {
	fromFile, err := httpadapter.ParseRules([]byte("rules:\n  - name: r\n    when: [{ip: [\"::ffff:10.0.0.0/104\", \"::ffff:192.0.2.9\"]}]\n    policy: {limit: 0, period: 1m}\n"))
	require.NoError(t, err)
	inGo := []httpadapter.Rule{{Name: "r", When: []httpadapter.Condition{httpadapter.ClientIPIn(
		netip.MustParsePrefix("::ffff:10.0.0.0/104"), netip.MustParsePrefix("::ffff:192.0.2.9/128"))}, Policy: perMinute(0)}}
	for name, rules := range map[string][]httpadapter.Rule{"rules file": fromFile, "Go": inGo} {
		t.Run("condition from "+name, func(t *testing.T) {
			h := newMW(t, newFake(), httpadapter.Config{Rules: rules}).Handler(&okHandler{})
			assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/", remote("10.1.2.3:1"))).Code, "in 10.0.0.0/8")
			assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/", remote("[::ffff:10.1.2.3]:1"))).Code, "mapped peer")
			assert.Equal(t, http.StatusTooManyRequests, serve(h, req("/", remote("192.0.2.9:1"))).Code, "the single address")
			assert.Equal(t, http.StatusOK, serve(h, req("/", remote("11.0.0.1:1"))).Code, "outside")
		})
	}
	t.Run("trusted proxy", func(t *testing.T) {
		m := newMW(t, newFake(), httpadapter.Config{
			TrustedProxies: []netip.Prefix{netip.MustParsePrefix("::ffff:127.0.0.1/128")},
			Rules: []httpadapter.Rule{{Name: "r", When: []httpadapter.Condition{
				httpadapter.ClientIPIn(netip.MustParsePrefix("198.51.100.7/32"))}, Policy: perMinute(0)}},
		})
		h := m.Handler(&okHandler{})
		viaProxy := req("/", remote("127.0.0.1:4000"), header("X-Forwarded-For", "198.51.100.7"))
		assert.Equal(t, http.StatusTooManyRequests, serve(h, viaProxy).Code, "the proxy is trusted: the client is 198.51.100.7")
		direct := req("/", remote("192.0.2.1:4000"), header("X-Forwarded-For", "198.51.100.7"))
		assert.Equal(t, http.StatusOK, serve(h, direct).Code, "an untrusted peer's header is ignored")
	})
}
