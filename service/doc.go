// Package service is actorlimitd's core: envoy ratelimit's configuration
// format (Load, Parse, Config), its matching of descriptors to rules
// (Config.Match), and the decisions of ShouldRateLimit (Server), made
// through an actorlimit.Limiter, with their Prometheus metrics (Metrics).
// It opens no socket, so it is tested without a network; cmd/actorlimitd
// serves it over gRPC and HTTP.
//
// # Configuration
//
// A file is envoy ratelimit's: a domain and a tree of descriptors, each with
// a key, an optional value (ending in '*': a prefix wildcard), an optional
// rate_limit (unit, requests_per_unit, unlimited, name, replaces) and the
// flags shadow_mode, quota_mode, detailed_metric, value_to_metric and
// share_threshold, which mean what they mean there. A rule without
// extensions is envoy ratelimit's fixed window of one unit, aligned to the
// Unix epoch. actorlimitd's extensions, three in rate_limit:
//
//	algorithm: sliding_window  # fixed_window (default), sliding_window, sliding_log, gcra, token_bucket, leaky_bucket
//	period: 15s                # any period instead of unit
//	burst: 20                  # the bucket algorithms' burst (0: requests_per_unit)
//
// and one on a descriptor:
//
//	secret: true               # this key's values are secret in the domain (see Secrets)
//
// Unknown fields, duplicate domains and duplicate descriptors are refused
// with the file, line and column (a *ConfigError wrapping ErrConfig).
//
// # What clients send
//
// No value a client sends is refused: a value longer than
// Bounds.ValueLength, and the value of a secret key (Options.Secrets), is
// counted under its HMAC-SHA256, and an id longer than MaxStoredID under
// the digest of the whole id; rules still match the real values. Only the
// bounds of what the operator's configuration decides (descriptors,
// entries, keys, the domain) refuse a request.
//
// # Decisions
//
// Server.ShouldRateLimit answers as envoy ratelimit does: one status per
// descriptor with its current_limit, limit_remaining and
// duration_until_reset; OVER_LIMIT overall when a descriptor is over its
// limit and not in shadow or quota mode; OK for an unknown domain and for a
// descriptor no rule matches; hits_addend per request and per descriptor (a
// descriptor's 0: checked, not counted). Options.AllOrNothing and
// Options.DeniedNotCounted change that, and are off by default.
//
// # Bounds before decoding
//
// A request's counts and key lengths (Bounds) are checked on its bytes
// before it becomes objects: Bounds.ScanRequest reads the protobuf wire
// format, Bounds.ScanJSON the JSON text, neither allocating. Codec puts
// the first in a gRPC server (grpc.ForceServerCodecV2 and
// Codec.Interceptor), and JSONHandlerBounded the second in POST /json,
// with a bound on the body.
package service
