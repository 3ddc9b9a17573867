package algo

import "strings"

// CheckErrors is the error a store's Decide returns when it decided every
// check of the batch but some, each of which failed on its own (a Redis key
// holding another type, say): out holds the decisions of the others, which
// were applied. Index lists the failed checks' indexes in the batch, in
// increasing order, and Errs their errors, one each. The limiter answers
// only the callers of the failed checks with their error; the others get
// their decisions.
type CheckErrors struct {
	Index []int
	Errs  []error
}

// Error returns the failed checks' errors, joined by "; ".
func (e *CheckErrors) Error() string {
	s := make([]string, len(e.Errs))
	for i, err := range e.Errs {
		s[i] = err.Error()
	}
	return strings.Join(s, "; ")
}

// Unwrap returns the failed checks' errors, for errors.Is and errors.As.
func (e *CheckErrors) Unwrap() []error { return e.Errs }
