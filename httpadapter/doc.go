// Package httpadapter is net/http middleware that limits requests by rules,
// in the manner of a CDN's rate limiter: each rule has conditions, a
// grouping key, a policy and an action.
//
//	mw, err := httpadapter.New(lim, httpadapter.Config{Rules: rules})
//	...
//	http.ListenAndServe(addr, mw.Handler(mux))
//
// The limiter is anything with the [Limiter] method set, such as
// *actorlimit.Limiter; every rule a request matches is counted in one
// HitMany call, and a request that matches no rule costs no call at all.
//
// # Rules
//
// A [Rule] applies to a request when all its conditions hold: method set,
// path exact / prefix / glob (on the path cleaned as ServeMux cleans it),
// header equals / present / regex, client IP in CIDRs, country (through
// Config.Country); each may be negated. Its GroupBy characteristics (ip,
// host, method, path, header:NAME, query:NAME, cookie:NAME) make the key of
// the request's counter, together with the rule's name, policy and
// characteristics, so two rules never share a counter and values cannot be
// forged into another group's key. Every value but the client IP is the
// client's to choose, so a per-client limit groups by ip; "host" is taken
// in lower case without port or trailing dots, and "header:Host" is
// refused (Go moves that header to Request.Host). A value that may be a
// credential (every cookie, the Authorization, Proxy-Authorization and
// Cookie headers, what Rule.Secret lists) enters the key only as 32 hex
// digits of its HMAC-SHA256 under [Config.SecretKey]. A
// condition on GET holds for HEAD too. Rules come from Go or from a YAML or
// JSON file ([ParseRules], [LoadRules]) and can be replaced at run time
// ([Middleware.SetRules]) without losing the counts of unchanged rules.
// Every rule is checked when it is parsed or set, its policy with
// actorlimit.Policy.Validate, and errors say which rule (and, for a file,
// which line) and which field. An empty rule set is an error unless
// Config.AllowNoRules, so that an empty rules file cannot remove every
// limit by mistake.
//
// # Actions and the strictest decision
//
// A request counts against every rule it matches. Over a limit, a [Block]
// rule answers 429 (or its own status) with Retry-After in whole seconds,
// rounded up; a [Monitor] rule lets the request pass and records what it
// would have done, in its statistics and in the request's context
// ([MonitorDecisions]); a [Shadow] rule answers a fake success without
// calling the next handler, with the headers an allowed request would get
// (no Retry-After, nothing that gives it away). When several
// rules deny, shadow wins over block (a shadow ban must not be given away
// by a 429), and among block rules the one with the longest wait answers.
//
// # Headers
//
// Responses that a block rule matched carry the RateLimit-Policy and
// RateLimit fields of draft-ietf-httpapi-ratelimit-headers-09, one list
// member per block rule:
//
//	RateLimit-Policy: "login";q=5;w=60
//	RateLimit: "login";r=4;t=42
//
// and, with Config.LegacyHeaders, X-RateLimit-Limit, X-RateLimit-Remaining
// and X-RateLimit-Reset (seconds) of the most constraining one.
//
// # Client IP
//
// The client IP is the direct peer (RemoteAddr) unless the peer is in
// Config.TrustedProxies; then the one header Config.ClientIPHeader names
// (X-Forwarded-For by default, Forwarded or X-Real-IP) is read right to
// left, trusted hops are skipped, and the first untrusted address is the
// client. A header sent by an untrusted peer is never read. IPv6 clients
// are grouped by Config.IPv6Prefix (default /64). A client IP that cannot be
// determined has the outcome Config.UnknownIP says ([UnknownIPGroup] by
// default).
//
// # Algorithms and delays
//
// A rule's Policy may use any algorithm of package actorlimit; rules files
// name them fixed_window, sliding_window, gcra, token_bucket, leaky_bucket
// and sliding_log. When the limiter allows a request but asks it to wait
// (Result.Delay, from LeakyBucket), the middleware waits that long before
// calling the next handler, as nginx's limit_req does, unless
// Config.NoDelay.
//
// # Failures
//
// When the limiter fails, the request passes (fail open) unless
// Config.FailClosed, and the failure is counted in [Middleware.Stats].
// With Config.Logger, the limiter's failure is logged once at WARN, and
// once at INFO when it answers again, not per request; a call that failed
// because the request's own context ended (the client went away) is not
// taken for the limiter's failure.
// When it refuses the hit of one rule (bad input, after which it counts
// nothing), the middleware asks again for each rule alone: the other rules
// are counted and enforced as usual, the refused rule decides nothing, its
// failure is counted in its statistics and logged once through
// Config.Logger. Policies are checked with actorlimit.Policy.Validate when
// rules are parsed or set, and keys are bounded (hashed when the request's
// values make them long), so this takes a limiter stricter than
// *actorlimit.Limiter.
package httpadapter
