package dashboard_test

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/dashboard"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

func get(t *testing.T, h http.Handler, target string) *httptest.ResponseRecorder {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodGet, target, nil))
	return w
}

func TestJSON(t *testing.T) {
	an, _ := drive(t, 3)
	h, err := dashboard.New(an, dashboard.Config{})
	require.NoError(t, err)
	w := get(t, h, "/limits?format=json")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "application/json", w.Header().Get("Content-Type"))
	var got analytics.Snapshot
	require.NoError(t, json.Unmarshal(w.Body.Bytes(), &got))
	assert.Equal(t, an.Snapshot(), got, "the JSON is the snapshot, whole")
	require.Len(t, got.Rules, 2)
	assert.Equal(t, []string{"per-ip", "api-watch"}, []string{got.Rules[0].Rule, got.Rules[1].Rule}, "the rule set's order")
	assert.NotContains(t, w.Body.String(), "0001-01-01", "no zero time")
	assert.Equal(t, float64(10), got.SlotSeconds)
	require.Len(t, got.Rules[0].Slots, 3)
	assert.Equal(t, 40-countZeroClients(0)+1, got.Rules[0].Slots[0].Groups, "the clients that made requests, and the bot")
	assert.Contains(t, got.Rules[0].Top[0].Group, botIP)
	assert.Equal(t, uint64(60), got.Rules[0].Top[0].Count)
}

// countZeroClients is how many of the 40 normal clients made no request in
// slot s of drive: those with (c+s)%4 == 0.
func countZeroClients(s int) int {
	n := 0
	for c := range 40 {
		if (c+s)%4 == 0 {
			n++
		}
	}
	return n
}

func TestPageStructure(t *testing.T) {
	an, _ := drive(t, 6)
	h, err := dashboard.New(an, dashboard.Config{Title: "Shop <limits>"})
	require.NoError(t, err)
	w := get(t, h, "/limits")
	require.Equal(t, http.StatusOK, w.Code)
	assert.Equal(t, "text/html; charset=utf-8", w.Header().Get("Content-Type"))
	body := w.Body.String()
	assert.Contains(t, body, "<title>Shop &lt;limits&gt;</title>", "escaped")
	assert.Contains(t, body, `<meta http-equiv="refresh" content="10">`)
	assert.NotContains(t, body, "<script")
	assert.NotRegexp(t, `(src|href)="(https?:)?//`, body, "nothing from elsewhere")

	checkDrivenPage(t, body, an.Snapshot())
	for _, sec := range sections(body) {
		for _, kind := range []string{"requests", "remaining"} {
			svg := heatmapSVG(sec[1], kind)
			assert.Contains(t, svg, "time (UTC)")
			assert.Contains(t, svg, "groups</text>", "legend")
			assert.Contains(t, svg, `class="ytick"`)
		}
	}
}

func TestHandlerErrors(t *testing.T) {
	an, err := analytics.New(analytics.Config{Clock: testkit.NewClock(time.Time{})})
	require.NoError(t, err)
	h, err := dashboard.New(an, dashboard.Config{})
	require.NoError(t, err)
	assert.Equal(t, http.StatusBadRequest, get(t, h, "/?format=xml").Code)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest(http.MethodPost, "/", nil))
	assert.Equal(t, http.StatusMethodNotAllowed, w.Code)
	assert.Contains(t, get(t, h, "/").Body.String(), "No rule has matched a request yet.")

	_, err = dashboard.New(nil, dashboard.Config{})
	require.ErrorIs(t, err, dashboard.ErrInvalidConfig)
	_, err = dashboard.New(an, dashboard.Config{Refresh: 10})
	require.ErrorIs(t, err, dashboard.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Refresh 10ns")
}

func TestReadableGroup(t *testing.T) {
	for _, tc := range []struct{ id, want string }{
		{"12:203.0.113.66", "203.0.113.66"},
		{"9:192.0.2.1-", "192.0.2.1 · -"},
		{"9:192.0.2.111:example.com", "192.0.2.1 · example.com"},
		{"", "(all requests)"},
		{"#0a1b2c", "#0a1b2c"},
		{"99:short", "99:short"},
		{"x:y", "x:y"},
		{"3:abc4:", "3:abc4:"},
	} {
		assert.Equal(t, tc.want, dashboard.Readable(tc.id), "%q", tc.id)
	}
}
