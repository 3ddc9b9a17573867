package httpadapter_test

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestRefusedRuleDoesNotDisableOthers is issue 8's scenario against a real
// limiter: a rule whose policy the limiter refuses (it got past the checks
// through a test seam) matches every /upload request, beside a 2-per-hour
// IP rule. The IP rule must still block the 3rd upload; the refused rule's
// failures are counted in its statistics and logged once.
func TestRefusedRuleDoesNotDisableOthers(t *testing.T) {
	perIP := httpadapter.Rule{
		Name:    "per-ip",
		When:    []httpadapter.Condition{httpadapter.PathExact("/upload")},
		GroupBy: []string{"ip"},
		Policy:  perHour(2),
	}
	uploads := httpadapter.Rule{
		Name:   "uploads",
		When:   []httpadapter.Condition{httpadapter.PathPrefix("/upload")},
		Policy: neverDrains,
	}
	var logs bytes.Buffer
	m := newMW(t, startLimiter(t), httpadapter.Config{
		Rules:  []httpadapter.Rule{perIP},
		Logger: slog.New(slog.NewTextHandler(&logs, nil)),
	})
	require.NoError(t, httpadapter.SetRulesUnchecked(m, []httpadapter.Rule{uploads, perIP}))
	next := &okHandler{}
	h := m.Handler(next)

	var codes []int
	for range 5 {
		w := serve(h, req("/upload", method(http.MethodPost)))
		codes = append(codes, w.Code)
		assert.Equal(t, `"per-ip";q=2;w=3600`, w.Header().Get("RateLimit-Policy"), "only the decided rule in the headers")
	}
	assert.Equal(t, []int{200, 200, 429, 429, 429}, codes)
	assert.Equal(t, 2, next.calls)
	s := m.Stats()
	assert.Equal(t, []httpadapter.RuleStats{
		{Rule: "uploads", Matched: 5, Errors: 5},
		{Rule: "per-ip", Matched: 5, Allowed: 2, Blocked: 3},
	}, s.Rules)
	assert.Zero(t, s.LimiterErrors, "the limiter did not fail: it refused one rule")
	var lines []string // the warnings; a swap of the rule set is logged at INFO
	for _, l := range strings.Split(strings.TrimSpace(logs.String()), "\n") {
		if strings.Contains(l, "level=WARN") {
			lines = append(lines, l)
		}
	}
	require.Len(t, lines, 1, "logged once, not per request: %q", logs.String())
	assert.Contains(t, lines[0], "rule=uploads")
	assert.Contains(t, lines[0], "level=WARN")

	require.NoError(t, httpadapter.SetRulesUnchecked(m, []httpadapter.Rule{uploads, perIP}))
	serve(h, req("/upload"))
	assert.Equal(t, 1, strings.Count(logs.String(), "level=WARN"), "an unchanged rule is not logged again after a reload")
}

// TestRefusedRule checks what a rule whose hit the limiter refuses does to
// the answer: nothing, unless FailClosed and it is a block or shadow rule
// that no other rule overrules.
func TestRefusedRule(t *testing.T) {
	block := httpadapter.Rule{Name: "bad", Policy: perMinute(10)}
	monitor := httpadapter.Rule{Name: "bad", Policy: perMinute(10), Action: httpadapter.Action{Kind: httpadapter.Monitor}}
	allow := httpadapter.Rule{Name: "allow", Policy: perMinute(10)}
	deny := httpadapter.Rule{Name: "deny", Policy: perMinute(0)}
	tests := []struct {
		name       string
		rules      []httpadapter.Rule
		failClosed bool
		want       int
		wantNext   int
		wantMon    []string // rules in MonitorDecisions
	}{
		{"fail open: the other rule decides", []httpadapter.Rule{block, allow}, false, 200, 1, nil},
		{"fail open: the other rule blocks", []httpadapter.Rule{block, deny}, false, 429, 0, nil},
		{"fail closed: 503", []httpadapter.Rule{block, allow}, true, 503, 0, nil},
		{"fail closed: a certain block wins", []httpadapter.Rule{block, deny}, true, 429, 0, nil},
		{"fail closed: a monitor rule never blocks", []httpadapter.Rule{monitor, allow}, true, 200, 1, nil},
		{"a refused monitor rule has no decision", []httpadapter.Rule{monitor, {Name: "m2", Policy: perMinute(1), Action: httpadapter.Action{Kind: httpadapter.Monitor}}}, false, 200, 1, []string{"m2"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newFake()
			lim.Refuse = []string{"3:bad"}
			m := newMW(t, lim, httpadapter.Config{FailClosed: tt.failClosed, Rules: tt.rules})
			var mon []string
			calls := 0
			h := m.Handler(http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
				calls++
				for _, d := range httpadapter.MonitorDecisions(r.Context()) {
					mon = append(mon, d.Rule)
				}
			}))
			w := serve(h, req("/"))
			assert.Equal(t, tt.want, w.Code)
			assert.Equal(t, tt.wantNext, calls, "next handler calls")
			assert.Equal(t, tt.wantMon, mon)
			s := m.Stats()
			assert.Equal(t, httpadapter.RuleStats{Rule: "bad", Matched: 1, Errors: 1}, s.Rules[0])
			assert.Equal(t, uint64(1), s.Rules[1].Matched)
			assert.Zero(t, s.Rules[1].Errors)
			assert.NotContains(t, w.Header().Get("RateLimit"), `"bad"`)
		})
	}
}

// TestRefusalErrors: how the middleware reads the error of a call refused
// for one rule's hit. Any error wrapping actorlimit.ErrInvalidArgument is a
// refusal of that rule alone, however deeply wrapped: the store refusal
// that *actorlimit.Limiter returns (a WithStore store such as redisstore
// refusing a check it cannot decide) wraps the store's own sentinel too.
// Any other error is a failure of the limiter as a whole, and every rule
// fails open.
func TestRefusalErrors(t *testing.T) {
	errStore := errors.New("somestore: check not supported")
	tests := []struct {
		name     string
		err      func(i int) error
		want     []int // the answers to three requests
		wantStat httpadapter.Stats
	}{
		{
			name: "bad input",
			err:  func(i int) error { return fmt.Errorf("hits[%d]: %w: refused", i, actorlimit.ErrInvalidArgument) },
			want: []int{200, 200, 429},
			wantStat: httpadapter.Stats{Rules: []httpadapter.RuleStats{
				{Rule: "bad", Matched: 3, Errors: 3}, {Rule: "per-ip", Matched: 3, Allowed: 2, Blocked: 1},
			}},
		},
		{
			name: "a store's refusal",
			err:  func(int) error { return fmt.Errorf("%w: store: %w", actorlimit.ErrInvalidArgument, errStore) },
			want: []int{200, 200, 429},
			wantStat: httpadapter.Stats{Rules: []httpadapter.RuleStats{
				{Rule: "bad", Matched: 3, Errors: 3}, {Rule: "per-ip", Matched: 3, Allowed: 2, Blocked: 1},
			}},
		},
		{
			name: "a failure of the limiter",
			err:  func(int) error { return fmt.Errorf("actorlimit: store: %w", errStore) },
			want: []int{200, 200, 200},
			wantStat: httpadapter.Stats{LimiterErrors: 3, Rules: []httpadapter.RuleStats{
				{Rule: "bad", Matched: 3, Errors: 3}, {Rule: "per-ip", Matched: 3, Errors: 3},
			}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lim := newFake()
			lim.Refuse, lim.RefuseErr = []string{"3:bad"}, tt.err
			m := newMW(t, lim, httpadapter.Config{Rules: []httpadapter.Rule{
				{Name: "bad", Policy: perMinute(10)},
				{Name: "per-ip", GroupBy: []string{"ip"}, Policy: perHour(2)},
			}})
			h := m.Handler(&okHandler{})
			var codes []int
			for range 3 {
				codes = append(codes, serve(h, req("/")).Code)
			}
			assert.Equal(t, tt.want, codes)
			s := m.Stats()
			assert.Equal(t, tt.wantStat.LimiterErrors, s.LimiterErrors)
			assert.Equal(t, tt.wantStat.Rules, s.Rules)
		})
	}
}

// TestGroupByTooLongForAKey checks that a rule whose keys could never fit
// in actorlimit.MaxIDLength, whatever the request, is refused up front
// rather than refused by the limiter at every request.
func TestGroupByTooLongForAKey(t *testing.T) {
	long := "header:" + strings.Repeat("X", 4096)
	_, err := httpadapter.New(newFake(), httpadapter.Config{Rules: []httpadapter.Rule{
		{Name: "r", GroupBy: []string{long}, Policy: perMinute(1)},
	}})
	require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `rule "r" (rules[0]): group_by: the names given are too long`)
}
