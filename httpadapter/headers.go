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
// ("name";r=50;t=30). Monitor and shadow rules appear in neither, nor
// does a block rule whose hit the limiter refused. q is
// the Result's Limit, w the Policy's Period in seconds, rounded up. With
// LegacyHeaders, X-RateLimit-Limit, -Remaining and -Reset (seconds, rounded
// up) give the values of the most constraining block rule: the one with the
// least remaining, then the longest reset. Every value is from the limiter's
// Result (and the rule's Policy for the window), never guessed.
func (m *Middleware) setHeaders(h http.Header, s *scratch) {
	b, mark, best := appendFields(s.buf[:0], s)
	n, ends := 2, [5]int{mark, len(b)}
	if m.legacy && best >= 0 {
		res := &s.res[best]
		n = 5
		b = strconv.AppendInt(b, res.Limit, 10)
		ends[2] = len(b)
		b = strconv.AppendInt(b, res.Remaining, 10)
		ends[3] = len(b)
		b = strconv.AppendInt(b, ceilSeconds(res.ResetAfter), 10)
		ends[4] = len(b)
	}
	s.buf = b
	// Two allocations for all the fields: one string and one []string,
	// cut with capacity limits so that an Add to one field cannot write
	// into the next.
	str, vals := string(b), make([]string, n)
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

// appendFields appends to b the RateLimit-Policy value of the block rules
// of s, then their RateLimit value, which starts at mark. best is the index
// of the most constraining block rule, -1 when there is none.
func appendFields(b []byte, s *scratch) (_ []byte, mark, best int) {
	best = -1
	for i, ru := range s.rules {
		if ru.action.Kind != Block || !s.decided(i) {
			continue
		}
		if best >= 0 {
			b = append(b, ", "...)
		}
		b = appendItem(b, ru.name, "q", s.res[i].Limit, "w", ru.window)
		if best < 0 || moreConstraining(&s.res[i], &s.res[best]) {
			best = i
		}
	}
	mark = len(b)
	for i, ru := range s.rules {
		if ru.action.Kind != Block || !s.decided(i) {
			continue
		}
		if len(b) > mark {
			b = append(b, ", "...)
		}
		b = appendItem(b, ru.name, "r", s.res[i].Remaining, "t", ceilSeconds(s.res[i].ResetAfter))
	}
	return b, mark, best
}

// appendItem appends the list member "name";k1=v1;k2=v2. validName leaves
// nothing to escape in name.
func appendItem(b []byte, name, k1 string, v1 int64, k2 string, v2 int64) []byte {
	b = append(b, '"')
	b = append(b, name...)
	b = append(b, '"', ';')
	b = append(b, k1...)
	b = append(b, '=')
	b = strconv.AppendInt(b, v1, 10)
	b = append(b, ';')
	b = append(b, k2...)
	b = append(b, '=')
	return strconv.AppendInt(b, v2, 10)
}

func moreConstraining(a, b *actorlimit.Result) bool {
	if a.Remaining != b.Remaining {
		return a.Remaining < b.Remaining
	}
	return a.ResetAfter > b.ResetAfter
}
