// Package quota serves Envoy's Rate Limit Quota Service
// (envoy.service.rate_limit_quota.v3, StreamRateLimitQuotas): each Envoy
// reports, per bucket, the requests it allowed and denied, and the server
// divides each bucket's fleet-wide limit among the Envoys that report on
// it, max-min fair on their recent demand, as token-bucket or
// requests-per-time-unit assignments with a time to live.
//
// # Layers
//
// [Division] is the pure core: one bucket's division, with no goroutines
// and no clock of its own (every method takes now), not safe for
// concurrent use. [Server] is the gRPC service over it: one stream is one
// Envoy, buckets are matched to the rules of a [Config] (the
// rate_limit_quota section of actorlimitd's configuration files), and
// every bound on what a client controls is an [Options] field.
//
// # One limit over many servers
//
// A [Server] linked to others ([Server.Share] over a [Link]: actorlimitd's
// cluster members) divides, for each bucket, the share of the limit that
// the bucket's owner grants it, instead of the whole limit. The owner's
// [Owner] keeps a [FleetDivision] per bucket: max-min fair over the Envoys
// of every server, from the demand each server sends it every exchange.
package quota
