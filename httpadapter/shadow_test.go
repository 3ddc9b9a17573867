package httpadapter_test

import (
	"io"
	"net/http"
	"regexp"
	"slices"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestShadowLooksLikeSuccess compares an allowed response and a shadowed
// one under the same rules, with and without legacy headers: the same
// header names, every value of the same form, so that nothing tells a
// shadow-banned client that it is.
func TestShadowLooksLikeSuccess(t *testing.T) {
	formats := map[string]*regexp.Regexp{
		"Content-Type":          regexp.MustCompile(`^text/plain; charset=utf-8$`),
		"Ratelimit-Policy":      regexp.MustCompile(`^"all";q=\d+;w=\d+$`),
		"Ratelimit":             regexp.MustCompile(`^"all";r=\d+;t=\d+$`),
		"X-Ratelimit-Limit":     regexp.MustCompile(`^\d+$`),
		"X-Ratelimit-Remaining": regexp.MustCompile(`^\d+$`),
		"X-Ratelimit-Reset":     regexp.MustCompile(`^\d+$`),
	}
	for _, legacy := range []bool{false, true} {
		t.Run(map[bool]string{false: "draft headers", true: "legacy headers too"}[legacy], func(t *testing.T) {
			m := newMW(t, newFake(), httpadapter.Config{LegacyHeaders: legacy, Rules: []httpadapter.Rule{
				{Name: "spam", Policy: perMinute(1), Action: httpadapter.Action{Kind: httpadapter.Shadow}},
				{Name: "all", Policy: perMinute(100)},
			}})
			h := m.Handler(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
				w.Header().Set("Content-Type", httpadapter.DefaultContentType)
				_, _ = io.WriteString(w, "ok")
			}))
			allowed := serve(h, req("/")).Result()
			shadowed := serve(h, req("/")).Result()
			require.Equal(t, http.StatusOK, allowed.StatusCode)
			require.Equal(t, http.StatusOK, shadowed.StatusCode)
			require.Equal(t, uint64(1), m.Stats().Rules[0].Shadowed, "the second request was shadowed")

			names := func(h http.Header) []string {
				ks := make([]string, 0, len(h))
				for k := range h {
					ks = append(ks, k)
				}
				slices.Sort(ks)
				return ks
			}
			assert.Equal(t, names(allowed.Header), names(shadowed.Header), "the same header names")
			if legacy {
				assert.Contains(t, names(shadowed.Header), "X-Ratelimit-Remaining")
			}
			for name, resp := range map[string]*http.Response{"allowed": allowed, "shadowed": shadowed} {
				for k, vs := range resp.Header {
					re := formats[k]
					if !assert.NotNil(t, re, "%s: unexpected header %s", name, k) {
						continue
					}
					for _, v := range vs {
						assert.Regexp(t, re, v, "%s: %s", name, k)
					}
				}
			}
		})
	}
}
