package httpadapter

import (
	"net/http"
	"strconv"

	"github.com/actorlimit/actorlimit"
)

// setHeaders writes the rate-limit fields of the block rules of s, as
// draft-ietf-httpapi-ratelimit-headers-09 defines them: RateLimit-Policy
// lists each rule's quota and window ("name";q=100;w=60) and RateLimit its
// remaining quota and the seconds until the window resets
// ("name";r=50;t=30). Monitor and shadow rules appear in neither. q is
// the Result's Limit, w the Policy's Period in seconds, rounded up. With
// LegacyHeaders, X-RateLimit-Limit, -Remaining and -Reset (seconds, rounded
// up) give the values of the most constraining block rule: the one with the
// least remaining, then the longest reset. Every value is from the limiter's
// Result (and the rule's Policy for the window), never guessed.
func (m *Middleware) setHeaders(h http.Header, s *scratch) {
	pol := s.buf[:0]
	best := -1
	for i, ru := range s.rules {
		if ru.action.Kind != Block {
			continue
		}
		if len(pol) > 0 {
			pol = append(pol, ", "...)
		}
		pol = append(pol, '"')
		pol = append(pol, ru.name...) // validName: nothing to escape
		pol = append(pol, `";q=`...)
		pol = strconv.AppendInt(pol, s.res[i].Limit, 10)
		pol = append(pol, ";w="...)
		pol = strconv.AppendInt(pol, ru.window, 10)
		if best < 0 || moreConstraining(&s.res[i], &s.res[best]) {
			best = i
		}
	}
	mark := len(pol)
	lim := pol
	for i, ru := range s.rules {
		if ru.action.Kind != Block {
			continue
		}
		if len(lim) > mark {
			lim = append(lim, ", "...)
		}
		lim = append(lim, '"')
		lim = append(lim, ru.name...)
		lim = append(lim, `";r=`...)
		lim = strconv.AppendInt(lim, s.res[i].Remaining, 10)
		lim = append(lim, ";t="...)
		lim = strconv.AppendInt(lim, ceilSeconds(s.res[i].ResetAfter), 10)
	}
	n, ends := 2, [5]int{mark, len(lim)}
	if m.legacy && best >= 0 {
		res := &s.res[best]
		n = 5
		lim = strconv.AppendInt(lim, res.Limit, 10)
		ends[2] = len(lim)
		lim = strconv.AppendInt(lim, res.Remaining, 10)
		ends[3] = len(lim)
		lim = strconv.AppendInt(lim, ceilSeconds(res.ResetAfter), 10)
		ends[4] = len(lim)
	}
	s.buf = lim
	// Two allocations for all the fields: one string and one []string,
	// cut with capacity limits so that an Add to one field cannot write
	// into the next.
	str, vals := string(lim), make([]string, n)
	start := 0
	for i := range n {
		vals[i], start = str[start:ends[i]], ends[i]
	}
	h["Ratelimit-Policy"] = vals[0:1:1]
	h["Ratelimit"] = vals[1:2:2]
	if n == 5 {
		h["X-Ratelimit-Limit"] = vals[2:3:3]
		h["X-Ratelimit-Remaining"] = vals[3:4:4]
		h["X-Ratelimit-Reset"] = vals[4:5:5]
	}
}

func moreConstraining(a, b *actorlimit.Result) bool {
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}
