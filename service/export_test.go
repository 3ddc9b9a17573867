package service

import ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"

// IDOf returns the counter id s counts d of domain under, and its metric
// label, as ShouldRateLimit makes them.
func (s *Server) IDOf(domain string, d *ratelimitv3.RateLimitDescriptor) (id, label string) {
	m := s.Config().match(domain, d, s.h)
	return m.id(domain, d, s.h), m.Label()
}
