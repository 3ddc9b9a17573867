package quota

import rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

// NewTestStream returns a stream for ReportOn, with no gRPC behind it: what
// is posted to it is dropped by Drain.
func (s *Server) NewTestStream() *TestStream {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.nextID++
	str := &stream{id: s.nextID, buckets: map[string]*bucket{}, seen: map[string]bool{},
		out: map[string]*rlqsv3.RateLimitQuotaResponse_BucketAction{}, wake: make(chan struct{}, 1),
		tokens: s.opts.ReportBurst, pending: &s.pending}
	s.streams[str.id] = str
	return &TestStream{s: s, str: str}
}

// TestStream is a stream of NewTestStream.
type TestStream struct {
	s   *Server
	str *stream
}

// Report handles msg as if received on the stream.
func (t *TestStream) Report(msg *rlqsv3.RateLimitQuotaUsageReports) error {
	return t.s.report(t.str, msg)
}

// Drain empties the stream's outbox and returns how many actions it held.
func (t *TestStream) Drain() int {
	t.str.mu.Lock()
	defer t.str.mu.Unlock()
	n := len(t.str.out)
	t.s.pending.Add(-int64(n))
	clear(t.str.out)
	return n
}
