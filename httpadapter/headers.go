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
// ("name";r=50;t=30). Monitor and shadow rules appear in neither. With
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
		pol = append(pol, ru.policyItem...)
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
	s.buf = lim
	h["Ratelimit-Policy"] = []string{string(lim[:mark])}
	h["Ratelimit"] = []string{string(lim[mark:])}
	if m.legacy && best >= 0 {
		res := &s.res[best]
		h["X-Ratelimit-Limit"] = []string{strconv.FormatInt(res.Limit, 10)}
		h["X-Ratelimit-Remaining"] = []string{strconv.FormatInt(res.Remaining, 10)}
		h["X-Ratelimit-Reset"] = []string{strconv.FormatInt(ceilSeconds(res.ResetAfter), 10)}
	}
}

func moreConstraining(a, b *actorlimit.Result) bool {
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}
