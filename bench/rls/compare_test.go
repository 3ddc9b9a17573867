package rls

import (
	"fmt"
	"math"
	"strconv"
	"strings"

	ratelimitpb "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlspb "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"google.golang.org/protobuf/encoding/prototext"
	"google.golang.org/protobuf/proto"
)

// unitSeconds is each unit's window in seconds, as envoy ratelimit counts
// them (a month is 30 days, a year 365, all aligned to the Unix epoch).
var unitSeconds = map[rlspb.RateLimitResponse_RateLimit_Unit]int64{
	rlspb.RateLimitResponse_RateLimit_SECOND: 1,
	rlspb.RateLimitResponse_RateLimit_MINUTE: 60,
	rlspb.RateLimitResponse_RateLimit_HOUR:   3600,
	rlspb.RateLimitResponse_RateLimit_DAY:    86400,
	rlspb.RateLimitResponse_RateLimit_WEEK:   7 * 86400,
	rlspb.RateLimitResponse_RateLimit_MONTH:  30 * 86400,
	rlspb.RateLimitResponse_RateLimit_YEAR:   365 * 86400,
}

// counterKey names a counter as envoy ratelimit keys it, less the window:
// the domain, the descriptor's entries and the limit's unit.
func counterKey(domain string, d *ratelimitpb.RateLimitDescriptor, unit rlspb.RateLimitResponse_RateLimit_Unit) string {
	var b strings.Builder
	b.WriteString(domain)
	for _, e := range d.GetEntries() {
		fmt.Fprintf(&b, "\x00%s\x00%s", e.GetKey(), e.GetValue())
	}
	fmt.Fprintf(&b, "\x00%s", unit)
	return b.String()
}

// timing is when a request was sent to every server, in Unix seconds: the
// first left at From, the last answer came at To.
type timing struct{ From, To int64 }

// crossed reports whether a window of unit u started between From and To.
func (t timing) crossed(u rlspb.RateLimitResponse_RateLimit_Unit) bool {
	s := unitSeconds[u]
	if s == 0 {
		return false
	}
	return t.From/s != t.To/s
}

// comparer compares a candidate's answers with envoy ratelimit's, request
// after request, exactly: the overall code, then for each descriptor its
// code, current_limit (name included), limit_remaining and
// duration_until_reset, and every other field of the answer. Both servers
// read the real clock and count in windows aligned to the epoch, so the
// answers to a request sent to both within one second are equal to the
// second. When a window of a descriptor's unit starts while the request is
// on its way from one server to the next, the two may have counted it in
// different windows: that descriptor is not compared, and its counter
// ("tainted") not either until that window ends. A duration is compared
// allowing the seconds that passed between the two answers.
type comparer struct {
	tainted map[string]int64 // counterKey -> Unix second the taint ends
	// Compared and Skipped count the statuses compared and those left out
	// for a window that started on the way.
	Compared, Skipped int
	// Kinds counts envoy ratelimit's statuses by kind (kindOf), so that a
	// test can tell that its stream reached every kind.
	Kinds map[string]int
}

// kindOf names the kind of a status: "over" the limit, "ok" within it,
// "unlimited" or "no-limit" (no rule).
func kindOf(s *rlspb.RateLimitResponse_DescriptorStatus) string {
	switch {
	case s.GetCode() == rlspb.RateLimitResponse_OVER_LIMIT:
		return "over"
	case s.GetCurrentLimit() != nil:
		return "ok"
	case s.GetLimitRemaining() == math.MaxUint32:
		return "unlimited"
	default:
		return "no-limit"
	}
}

func newComparer() *comparer { return &comparer{tainted: map[string]int64{}, Kinds: map[string]int{}} }

// compare returns the differences between ref's answer (envoy ratelimit)
// and got's to req, sent at t; errors are compared as errors, not codes.
func (c *comparer) compare(req *rlspb.RateLimitRequest, t timing, ref, got *rlspb.RateLimitResponse, refErr, gotErr error) []string {
	if refErr != nil || gotErr != nil {
		if (refErr == nil) != (gotErr == nil) {
			return []string{fmt.Sprintf("error: envoy ratelimit %v, candidate %v", refErr, gotErr)}
		}
		return nil
	}
	var diffs []string
	rs, gs := ref.GetStatuses(), got.GetStatuses()
	if len(rs) != len(gs) {
		return []string{fmt.Sprintf("statuses: envoy ratelimit %d, candidate %d", len(rs), len(gs))}
	}
	skipOverall := false
	for i := range rs {
		d := req.GetDescriptors()[i]
		unit := rs[i].GetCurrentLimit().GetUnit()
		key := counterKey(req.GetDomain(), d, unit)
		if rs[i].GetCurrentLimit() != nil {
			if t.crossed(unit) {
				s := unitSeconds[unit]
				c.tainted[key] = (t.To/s + 1) * s
				c.Skipped++
				skipOverall = true
				continue
			}
			if end, ok := c.tainted[key]; ok {
				if t.From < end {
					c.Skipped++
					skipOverall = true
					continue
				}
				delete(c.tainted, key)
			}
		}
		c.Compared++
		c.Kinds[kindOf(rs[i])]++
		diffs = append(diffs, compareStatus(i, t, rs[i], gs[i])...)
	}
	if !skipOverall && ref.GetOverallCode() != got.GetOverallCode() {
		diffs = append(diffs, fmt.Sprintf("overall_code: envoy ratelimit %s, candidate %s", ref.GetOverallCode(), got.GetOverallCode()))
	}
	r, g := proto.Clone(ref).(*rlspb.RateLimitResponse), proto.Clone(got).(*rlspb.RateLimitResponse)
	r.Statuses, g.Statuses, r.OverallCode, g.OverallCode = nil, nil, 0, 0
	if skipOverall {
		// the headers name the descriptor with the least remaining, which
		// a status left out may be
		r.ResponseHeadersToAdd, g.ResponseHeadersToAdd = nil, nil
	}
	// RateLimit-Reset counts seconds as duration_until_reset does
	if rh, gh := r.GetResponseHeadersToAdd(), g.GetResponseHeadersToAdd(); len(rh) == len(gh) {
		for i := range rh {
			if rh[i].GetKey() != "RateLimit-Reset" || gh[i].GetKey() != rh[i].GetKey() {
				continue
			}
			rv, err1 := strconv.ParseInt(rh[i].GetValue(), 10, 64)
			gv, err2 := strconv.ParseInt(gh[i].GetValue(), 10, 64)
			if err1 == nil && err2 == nil && rv-gv >= 0 && rv-gv <= t.To-t.From {
				gh[i].Value = rh[i].GetValue()
			}
		}
	}
	if !proto.Equal(r, g) {
		diffs = append(diffs, fmt.Sprintf("other fields: envoy ratelimit {%s}, candidate {%s}", text(r), text(g)))
	}
	return diffs
}

// compareStatus compares one descriptor's statuses.
func compareStatus(i int, t timing, r, g *rlspb.RateLimitResponse_DescriptorStatus) []string {
	var diffs []string
	add := func(field string, rv, gv any) {
		diffs = append(diffs, fmt.Sprintf("statuses[%d].%s: envoy ratelimit %v, candidate %v", i, field, rv, gv))
	}
	if r.GetCode() != g.GetCode() {
		add("code", r.GetCode(), g.GetCode())
	}
	if !proto.Equal(r.GetCurrentLimit(), g.GetCurrentLimit()) {
		add("current_limit", "{"+text(r.GetCurrentLimit())+"}", "{"+text(g.GetCurrentLimit())+"}")
	}
	if r.GetLimitRemaining() != g.GetLimitRemaining() {
		add("limit_remaining", r.GetLimitRemaining(), g.GetLimitRemaining())
	}
	rd, gd := r.GetDurationUntilReset(), g.GetDurationUntilReset()
	switch {
	case (rd == nil) != (gd == nil):
		add("duration_until_reset", rd.AsDuration(), gd.AsDuration())
	case rd != nil:
		// the candidate answered later: by as many seconds as passed
		late := rd.GetSeconds() - gd.GetSeconds()
		if gd.GetNanos() != rd.GetNanos() || late < 0 || late > t.To-t.From {
			add("duration_until_reset", rd.AsDuration(), gd.AsDuration())
		}
	}
	r2, g2 := proto.Clone(r).(*rlspb.RateLimitResponse_DescriptorStatus), proto.Clone(g).(*rlspb.RateLimitResponse_DescriptorStatus)
	r2.Code, r2.CurrentLimit, r2.LimitRemaining, r2.DurationUntilReset = 0, nil, 0, nil
	g2.Code, g2.CurrentLimit, g2.LimitRemaining, g2.DurationUntilReset = 0, nil, 0, nil
	if !proto.Equal(r2, g2) {
		add("other fields", "{"+text(r2)+"}", "{"+text(g2)+"}")
	}
	return diffs
}

// text is m in one line of the protobuf text format.
func text(m proto.Message) string {
	if m == nil {
		return ""
	}
	return strings.TrimSpace(prototext.MarshalOptions{}.Format(m))
}
