// Package rls compares actorlimitd with envoy ratelimit, the Rate Limit
// Service it replaces: a differential test of their answers and
// benchmarks of ShouldRateLimit. Its code is all in test files.
package rls
