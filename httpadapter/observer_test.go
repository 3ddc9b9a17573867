package httpadapter_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/httpadapter"
	"github.com/actorlimit/actorlimit/internal/logtest"
)

// recorder is an Observer that keeps what it saw.
type recorder struct {
	mu  sync.Mutex
	obs []httpadapter.Observation
}

func (r *recorder) Observe(o httpadapter.Observation) {
	r.mu.Lock()
	r.obs = append(r.obs, o)
	r.mu.Unlock()
}

func TestObserversSeeEveryRuleDecision(t *testing.T) {
	rules := []httpadapter.Rule{
		{Name: "per-ip", GroupBy: []string{"ip"}, Policy: perHour(2)},
		{Name: "watch", Policy: perHour(1), Action: httpadapter.Action{Kind: httpadapter.Monitor}},
	}
	fake := newFake()
	a, b := &recorder{}, &recorder{}
	m := newMW(t, fake, httpadapter.Config{Rules: rules, Observers: []httpadapter.Observer{a, b}})
	h := m.Handler(&okHandler{})
	for range 3 {
		serve(h, req("/"))
	}
	fake.setErr(errors.New("down"))
	serve(h, req("/"))

	type seen struct {
		rule    string
		action  httpadapter.ActionKind
		outcome httpadapter.Outcome
		count   int64
		grouped bool
	}
	var got []seen
	for _, o := range a.obs {
		got = append(got, seen{o.Rule, o.Action, o.Outcome, o.Result.Count, o.Group != ""})
	}
	assert.Equal(t, []seen{
		{"per-ip", httpadapter.Block, httpadapter.Within, 1, true},
		{"watch", httpadapter.Monitor, httpadapter.Within, 1, false},
		{"per-ip", httpadapter.Block, httpadapter.Within, 2, true},
		{"watch", httpadapter.Monitor, httpadapter.Over, 2, false},
		{"per-ip", httpadapter.Block, httpadapter.Over, 3, true},
		{"watch", httpadapter.Monitor, httpadapter.Over, 3, false},
		{"per-ip", httpadapter.Block, httpadapter.Failed, 0, true},
		{"watch", httpadapter.Monitor, httpadapter.Failed, 0, false},
	}, got)
	assert.Equal(t, a.obs, b.obs, "every observer sees the same")
	assert.Contains(t, a.obs[0].Group, "192.0.2.1", "the group is the rule's characteristics, without its prefix")
	assert.NotContains(t, a.obs[0].Group, "per-ip")
}

func TestNilObserverRefused(t *testing.T) {
	_, err := httpadapter.New(newFake(), httpadapter.Config{
		Rules:     []httpadapter.Rule{{Name: "r", Policy: perHour(1)}},
		Observers: []httpadapter.Observer{&recorder{}, nil},
	})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Observers[1] is nil")
}

func TestRuleSetSwapLoggedOnce(t *testing.T) {
	logs := &logtest.Recorder{}
	rules := []httpadapter.Rule{{Name: "r", Policy: perHour(1)}}
	m := newMW(t, newFake(), httpadapter.Config{Rules: rules, Logger: slog.New(logs)})
	h := m.Handler(&okHandler{})
	for range 3 {
		serve(h, req("/"))
	}
	assert.Empty(t, logs.Records(), "the first set is not a swap, and requests log nothing")
	require.NoError(t, m.SetRules(rules))
	require.Error(t, m.SetRules(nil), "a refused set changes nothing")
	for range 3 {
		serve(h, req("/"))
	}
	assert.Equal(t, []string{"INFO httpadapter: rule set swapped"}, logs.Records())
}

// TestLimiterFailureLoggedOnce: a limiter that fails under the middleware
// is logged once when it starts failing and once when it answers again,
// however many requests meet it in between; a request whose own context
// ended is no news of the limiter.
func TestLimiterFailureLoggedOnce(t *testing.T) {
	for _, closed := range []bool{false, true} {
		logs := &logtest.Recorder{}
		fake := newFake()
		rules := []httpadapter.Rule{{Name: "r", Policy: perHour(100)}}
		m := newMW(t, fake, httpadapter.Config{Rules: rules, FailClosed: closed, Logger: slog.New(logs)})
		h := m.Handler(&okHandler{})
		steps := []struct {
			err      error
			requests int
			want     []string // what is logged by the end of the step
		}{
			{nil, 3, nil},
			{errors.New("down"), 5, []string{"WARN"}},
			{nil, 4, []string{"WARN", "INFO"}},
			{errors.New("down again"), 2, []string{"WARN", "INFO", "WARN"}},
			{nil, 1, []string{"WARN", "INFO", "WARN", "INFO"}},
		}
		for i, st := range steps {
			fake.setErr(st.err)
			for range st.requests {
				serve(h, req("/"))
			}
			var levels []string
			for _, r := range logs.Records() {
				levels = append(levels, strings.Fields(r)[0])
			}
			assert.Equal(t, st.want, levels, "closed=%v step %d", closed, i)
		}
		recs := logs.Records()
		assert.Contains(t, recs[0], "the limiter fails")
		assert.Equal(t, "INFO httpadapter: the limiter answers again", recs[1])
		if closed {
			assert.Contains(t, recs[0], "fail closed")
		} else {
			assert.Contains(t, recs[0], "fail open")
		}
		assert.Equal(t, uint64(7), m.Stats().LimiterErrors, "every failure is still counted")
	}

	logs := &logtest.Recorder{}
	fake := newFake()
	m := newMW(t, fake, httpadapter.Config{Rules: []httpadapter.Rule{{Name: "r", Policy: perHour(100)}},
		Logger: slog.New(logs)})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	fake.setErr(context.Canceled)
	serve(m.Handler(&okHandler{}), req("/").WithContext(ctx))
	assert.Empty(t, logs.Records(), "the client went away: not the limiter's failure")
}
