// Package service is actorlimitd's core: envoy ratelimit's configuration
// format, its matching of descriptors to rules, and the decisions of
// ShouldRateLimit, made through an actorlimit.Limiter. It opens no socket,
// so it is tested without a network; cmd/actorlimitd serves it.
package service

import (
	_ "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3" // the RLS types
)
