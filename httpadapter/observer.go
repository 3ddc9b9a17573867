package httpadapter

import (
	"strconv"

	"github.com/actorlimit/actorlimit"
)

// Outcome is what a rule decided for one request.
type Outcome uint8

// The outcomes.
const (
	// Within: the request was within the rule's limit.
	Within Outcome = iota
	// Over: the request was over the limit; the rule's action (block,
	// monitor or shadow) says what became of it.
	Over
	// Failed: the limiter did not decide the rule's hit (it failed as a
	// whole, or refused this rule's hit).
	Failed
)

// String returns the outcome's name: "within", "over" or "failed".
func (o Outcome) String() string {
	switch o {
	case Within:
		return "within"
	case Over:
		return "over"
	case Failed:
		return "failed"
	}
	return "Outcome(" + strconv.Itoa(int(o)) + ")"
}

// Observation is one rule's decision for one request.
type Observation struct {
	// Rule is the rule's name.
	Rule string
	// Action is the rule's action kind.
	Action ActionKind
	// Outcome is what the rule decided.
	Outcome Outcome
	// Group is the request's group under the rule: the characteristics of
	// its GroupBy, as the limiter's counter id holds them after the rule's
	// own prefix; empty for a rule without GroupBy. It may identify a
	// client (an IP): never use it as a metric label.
	Group string
	// Result is the limiter's decision; zero when Outcome is Failed.
	Result actorlimit.Result
}

// Observer sees every rule's decision for every request it matched, after
// the decision and before the answer. Observe is called on the request's
// goroutine, so it must be safe for concurrent use and quick, and must not
// keep the Observation's strings longer than it needs them (they are the
// limiter's counter ids, which it keeps as long as the counter lives).
type Observer interface {
	Observe(o Observation)
}
