package analytics_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/analytics"
	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

// allowAll allows every hit and keeps nothing.
type allowAll struct{}

func (allowAll) HitMany(_ context.Context, hits []actorlimit.HitRequest, res []actorlimit.Result) error {
	for i, h := range hits {
		res[i] = actorlimit.Result{Allowed: true, Limit: h.Policy.Limit, Remaining: h.Policy.Limit - 1}
	}
	return nil
}

// oneRule passes the observations of one rule on.
type oneRule struct {
	rule string
	to   httpadapter.Observer
}

func (o oneRule) Observe(ob httpadapter.Observation) {
	if ob.Rule == o.rule {
		o.to.Observe(ob)
	}
}

// heap returns the bytes of the live heap.
func heap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestLongGroupsStayWithinMemoryPerRule: behind the middleware, a rule's
// Group is a piece of one string that holds every key of the request; with
// 16 rules grouped by a 3000-byte header, that string is about 48 KB. The
// analytics of one of those rules, over MaxGroups requests of as many
// groups, keep at most MemoryPerRule bytes (not the requests' whole
// strings), and still tell the long groups apart.
func TestLongGroupsStayWithinMemoryPerRule(t *testing.T) {
	const groups, rules, long = 256, 16, 3000
	a, err := analytics.New(analytics.Config{Clock: testkit.NewClock(t0), MaxGroups: groups, History: 2, TopK: 1})
	require.NoError(t, err)
	var rs []httpadapter.Rule
	for i := range rules {
		rs = append(rs, httpadapter.Rule{Name: fmt.Sprintf("r%d", i), GroupBy: []string{"header:X-Long"},
			Policy: actorlimit.Policy{Limit: 10, Period: 60e9}})
	}
	m, err := httpadapter.New(allowAll{}, httpadapter.Config{Rules: rs, Observers: []httpadapter.Observer{oneRule{"r0", a}}})
	require.NoError(t, err)
	h := m.Handler(http.NotFoundHandler())
	pad := strings.Repeat("é", long/2)

	before := heap()
	for i := range groups + 10 { // 10 more: the sketch keeps some too
		r := httptest.NewRequest(http.MethodGet, "/", nil)
		r.Header.Set("X-Long", fmt.Sprintf("%05d", i)+pad)
		h.ServeHTTP(httptest.NewRecorder(), r)
	}
	kept := heap() - before
	runtime.KeepAlive(a)
	assert.LessOrEqual(t, kept, uint64(a.MemoryPerRule()), "kept %d bytes, MemoryPerRule %d", kept, a.MemoryPerRule())
	t.Logf("kept %d bytes, MemoryPerRule %d", kept, a.MemoryPerRule())

	s := a.Snapshot()
	require.Len(t, s.Rules, 1)
	cur := s.Rules[0].Slots[len(s.Rules[0].Slots)-1]
	assert.Equal(t, groups, cur.Groups, "every long group apart")
	for _, g := range s.Rules[0].Top {
		assert.LessOrEqual(t, len(g.Group), analytics.MaxGroupLength)
		assert.True(t, utf8.ValidString(g.Group), "cut between characters")
	}
}
