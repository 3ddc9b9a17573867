package httpadapter_test

import (
	"context"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestHeaderFloodKeepsIPCounter is issue 8's fault 2 over HTTP: beside a
// per-IP day rule, a monitor rule grouped by a header the client controls
// gives the limiter a fresh key for every fresh header value. A client that
// sends thousands of them fills the limiter's bounded table and makes it
// evict; its own IP counter, being hit and denying, must not be the state
// evicted, so the client stays limited.
func TestHeaderFloodKeepsIPCounter(t *testing.T) {
	const maxEntries = 2000
	tests := []struct {
		name      string
		algorithm actorlimit.Algorithm
		flood     int // fresh X-Session values sent
	}{
		{"fixed window, just past the bound", actorlimit.FixedWindow, maxEntries + 100},
		{"fixed window, twice the bound", actorlimit.FixedWindow, 2 * maxEntries},
		{"sliding window, twice the bound", actorlimit.SlidingWindow, 2 * maxEntries},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim, err := actorlimit.Start(actorlimit.WithClock(newFrozenClock()), actorlimit.WithJanitor(0, 0),
				actorlimit.WithMaxEntries(maxEntries))
			require.NoError(t, err)
			t.Cleanup(func() { _ = lim.Close() })
			m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{
				{Name: "per-ip", GroupBy: []string{"ip"},
					Policy: actorlimit.Policy{Algorithm: tt.algorithm, Limit: 5, Period: 24 * time.Hour}},
				{Name: "sessions", GroupBy: []string{"header:X-Session"}, Policy: perMinute(100),
					Action: httpadapter.Action{Kind: httpadapter.Monitor}},
			}})
			h := m.Handler(&okHandler{})
			send := func(session string) int {
				return serve(h, req("/", remote("198.51.100.9:4000"), header("X-Session", session))).Code
			}

			var codes []int
			for range 7 {
				codes = append(codes, send("first"))
			}
			require.Equal(t, []int{200, 200, 200, 200, 200, 429, 429}, codes, "before the flood")
			for i := range tt.flood {
				require.Equal(t, http.StatusTooManyRequests, send(fmt.Sprintf("flood-%d", i)), "flood request %d", i)
			}
			codes = codes[:0]
			for range 7 {
				codes = append(codes, send("after"))
			}
			assert.Equal(t, []int{429, 429, 429, 429, 429, 429, 429}, codes, "after the flood")

			st, err := lim.Stats(context.Background())
			require.NoError(t, err)
			assert.Positive(t, st.Evictions, "the flood never filled the table: the test saw nothing")
			assert.LessOrEqual(t, st.Entries, maxEntries)
		})
	}
}
