// Package redisstore is an actor.Store that keeps the limiter's state in
// Redis, so that the limiters of many app servers share one limit:
//
//	client := redis.NewUniversalClient(&redis.UniversalOptions{Addrs: addrs})
//	store, err := redisstore.New(client, redisstore.WithPrefix("myapp:"))
//
// New returns (*Store, error): it fails only for a nil client or a bad
// option. It talks to Redis through redis.UniversalClient, so a single
// server, Sentinel or Redis Cluster all work; it needs Redis 6.0 or later
// (SET KEEPTTL). The limiter actor calls
// Decide once per mailbox batch. Checks that callers send at once are
// gathered by the limiter into one Decide (actorlimit.WithMaxBatch, default
// 256): N concurrent checks, one round trip. A Store is safe for concurrent
// use: several limiters may share one, and actorlimit.WithShards(n) with
// actorlimit.WithStore runs n limiter actors on it, ids hashed onto them,
// so that n round trips are in flight at once while each key's checks stay
// in order on one actor.
//
// # Keys
//
// One key per (algorithm, period, ID), as in the embedded table:
//
//	<prefix>v4:{<ID>}:<algorithm>:<period in ns>
//
// for example "actorlimit:v4:{alice}:GCRA:1000000000". "v4" is the version
// of the state layout (what the scripts keep under a key); a release whose
// scripts keep something else under a key writes another version, so that
// during a rolling deploy the app servers of the old and the new release
// keep their states apart (each group counts on its own until the old
// servers are gone; in total at most twice the limit) instead of reading
// each other's state and failing on it. Keys without a version, or with
// v2 (the bucket state as text) or v3 (four doubles), are earlier layouts,
// and their TTLs clear them. The ID is the Cluster hash tag, so one ID's
// keys live in one slot (with Redis Cluster every script call touches one
// key, so a call never spans slots). In the tag, '%' is written "%25" and
// '}' "%7D": a '}' would end the tag early, and then every ID that starts
// alike (a client's made-up header values behind one rule's prefix) would
// land in one slot. The layout's version stays v4: an ID without '%' or
// '}' keeps the key it had; one with them has a new key, and counts
// apart from servers of the releases before during a rolling deploy. The
// bucket script's arguments and reply changed after v4 came (one packed
// argument a run, the backlog alone in the reply), its state did not: the
// two scripts are loaded side by side, and servers of both releases share
// each key's state during a rolling deploy. Every key has a TTL: at least the
// time until it is back to full capacity plus a grace of 1s (a minute with
// [WithCallerTime], whose clock need not run with Redis's), so Redis never
// keeps dead state, and Expire has nothing to do. A bucket's key is given
// a grace more than that, and a new TTL only when its TTL would come too
// soon, so that a key hit often is not given one at every hit.
//
// # Scripts
//
// Each check is one EVALSHA of an atomic Lua script, loaded again on
// NOSCRIPT, except that on one server (a redis.Client, not a Cluster or a
// Ring) a run of consecutive fixed-window checks, or of bucket checks, of
// a batch goes as one EVALSHA of a script that decides them all in order:
//
//   - fixed window: a hash {b: window number, c: count} read with HMGET;
//     HINCRBY counts every hit, denied ones too, as the original does,
//     saturating at MaxInt64. The key's TTL is set when its window starts,
//     so a hit in a started window is one HINCRBY. With [WithWindowKeys]
//     no script: a string key per window, INCRBY and PEXPIRE NX pipelined
//     (a peek is a GET), on the caller's clock.
//   - sliding window (Figma's strict sub-window counters): a hash of at most
//     61 sub-window -> count fields, read whole (HGETALL) each call.
//   - sliding log: the same script with millisecond slots: up to Limit
//     fields (Limit is at most algo.MaxSlidingLogLimit), read whole each
//     call. It is the costly one, in memory and in time per call, as in
//     the table.
//   - GCRA, token bucket and leaky bucket: one string of five doubles
//     (40 bytes) holding the time the bucket is empty (ms, ns and a fraction
//     of 1/Limit ns), the Limit it drains at and the key's expiry (Unix
//     ms), read with GET (MGET for a run) and written at most once a
//     check with SET KEEPTTL, or SET PX when the expiry moves: O(1). The
//     script takes a run's parameters as one packed argument and answers
//     each check's backlog alone (Go works out the rest exactly), and it
//     decides a run of one check, a lone caller's, on a path of its own
//     (GET, no loop or tables): TIME, GET and SET, as redis_rate's script.
//
// Peek runs the same script without writing; Reset is a DEL.
//
// Decisions are the embedded table's exactly (Count, Remaining,
// RetryAfter with algo.Never, ResetAfter, Delay): a differential test runs
// both over random sequences. Lua numbers are doubles, exact below 2^53, so
// the scripts never hold a Unix time in ns: they take time as Unix
// milliseconds plus the nanoseconds within (Redis TIME gives microseconds),
// hold spans below [MaxSpan] (2^52 ns, about 52 days) and counts and
// fractions below 2^52, and return slot numbers and (ns, fraction) pairs
// that Go turns into exact durations with 64/128-bit integer arithmetic. A
// fixed window's count is Redis's 64-bit integer and reaches Go as a
// string. The price: Decide refuses with [ErrUnsupported], before sending
// anything, a windowed Period that is not a whole number of milliseconds, a
// sliding or bucket Limit above 2^52, and a bucket that takes longer than
// MaxSpan to drain; and a backlog that a change of Limit would stretch past
// MaxSpan saturates there (the table saturates at algo.MaxSpan). Through a
// Limiter, such a check fails its own call with an error that wraps both
// ErrUnsupported and actorlimit.ErrInvalidArgument (nothing was counted),
// so the other calls and, in httpadapter, the other rules of a request are
// still decided.
//
// # Time
//
// By default the scripts decide at Redis's TIME, so the app servers' clocks
// do not matter; the now given to Decide then paces only the over-limit
// cache and, with the wall clock, the outage probe. [WithCallerTime] makes
// them decide at that now instead; [WithWindowKeys] needs it, as it works
// out a fixed window's number before the round trip.
//
// # Batches and round trips
//
// Decide sends a whole batch as one pipeline: one round trip per batch of up
// to [WithMaxBatch] checks (default 1000; a larger batch takes one round trip
// per 1000), in order on one connection, so later checks of a key see the
// earlier ones. A flushed script cache (a restarted Redis) costs four more
// round trips: one SCRIPT LOAD for each of the three scripts, one after
// another, and one for the commands that got NOSCRIPT, which changed
// nothing, sent again in one pipeline.
// Each round trip is bounded by [WithTimeout] (default 250ms) and by ctx.
//
// # Outages
//
// When a round trip fails (an error or a timeout), the batch is decided as
// [WithOutage] says, and so is every batch after it until the probe
// interval has passed (default 500ms, on the wall clock or on Decide's now,
// whichever comes first) and a PING answers:
//
//   - [Fallback], the default: an embedded table.Table of this process
//     decides, so each app server limits on its own. Limits keep holding
//     per server (the total is at most servers times the limit), an outage
//     of Redis is no outage of the app, and it is no open door either.
//   - [FailOpen] allows, [FailClosed] denies with RetryAfter the probe
//     interval, [FailError] returns an error wrapping [ErrUnavailable] and
//     the cause.
//
// The timeout holds whatever the client's options. go-redis ignores a
// context's deadline on socket reads unless Options.ContextTimeoutEnabled is
// set (by default a read waits for ReadTimeout, 5s, and a pipeline's
// retries after it: 40s in a test against a Redis that never answers). For
// such a client (New reads its Options) the store runs each round trip, and
// each probe, on a goroutine of its own and stops waiting at the deadline;
// the abandoned round trip ends in go-redis's own time, holding a pooled
// connection until then. The goroutine, its timer and the hand-off cost
// about 15µs a round trip (a lone check on a local redis-server took 35µs
// instead of 20µs on a 2-vCPU machine). go-redis also redials a refused connection
// DialerRetries times (5 by default) with a pause between, so each probe of
// a dead Redis takes the whole timeout, during which the limiter waits.
// Give the client
//
//	ContextTimeoutEnabled: true, // reads stop at WithTimeout, without a goroutine each
//	DialerRetries:         1,    // a dead Redis costs one refused dial
//	MaxRetries:            -1,   // a failed batch goes to the outage mode at once
//	Protocol:              2,    // RESP2: the store's own connection (below)
//
// With such a client of one server (redis.Client, Sentinel's too) and a
// pool of at least two, the store keeps one connection of the pool for
// itself, taken by whichever round trip finds it free (the others use the
// pool): a round trip on it skips go-redis's pool, whose health check of
// each connection it hands out costs a syscall and three allocations. In
// exchange, a connection that Redis closed (a restart) is found by the
// round trip that uses it, which fails as a network error does, and the
// connection is replaced; one unused for more than 100ms goes back to the
// pool, whose check finds it closed before any round trip uses it, and
// so does one past the client's ConnMaxLifetime. On RESP3 the store uses
// the pool alone: go-redis would peek at a connection kept out of its pool
// for push notifications before every command, and a connection dialed
// for it would race with the pool's on the client's options.
//
// A lone round trip's reply, on a virtual machine, takes about as long to
// wake the reader as to come: for a Redis on the same machine or rack, let
// the client's connections poll for it before they park, with a dialer of
// package [github.com/actorlimit/actorlimit/redisstore/busypoll]
// (Options.Dialer). That is the client's way of waiting, for any command on
// it; the store needs nothing else.
//
// The end-to-end tests kill Redis under load with these options: no call
// outlasts 2s, at a 200ms timeout; and a Redis that never answers holds a
// round trip for the timeout alone, with these options and with the
// defaults.
//
// A check that Redis answers with an error of its own while the round trip
// works (its key holds another type or a state the script cannot read,
// the script fails, OOM) is no outage: that check alone is decided as the
// outage mode says (in FailError mode Decide returns an [algo.CheckErrors]
// whose errors wrap [ErrCheckFailed], with the check's index, key and
// Redis's reply, and out holds the other checks' decisions), the other checks of its pipeline are
// Redis's, Redis is not marked down, and [Stats].CheckErrors counts it
// (logged, with the key, at most once per probe interval). Error replies
// that speak for the whole server (LOADING, BUSY, READONLY, MASTERDOWN,
// CLUSTERDOWN, TRYAGAIN, NOREPLICAS, NOAUTH, WRONGPASS, MOVED, ASK, too
// many clients) fail the round trip, as a network error does. A Lua script
// that fails half-way keeps what it wrote (Redis does not roll it back);
// the scripts read a key before they write it, so a key they cannot read
// is left as it was. In FailError mode Decide's error is an
// [algo.CheckErrors] naming the failed checks, and the limiter answers only
// the calls that hold one with its error; the callers gathered into the
// same batch get their decisions.
//
// # The over-limit cache
//
// With [WithDeniedCache] (off by default), once Redis denies a hit on a
// key, this store answers the same hits on that key denied itself until
// the denial's RetryAfter has passed, or for at most the bound: a flood of
// denied hits costs Redis one script call per key per bound. The option's
// doc states exactly when such an answer differs from Redis's. It is off by
// default because users of a shared limit expect a Reset made on any app
// server to hold at once on all of them; turn it on where denied floods
// matter more.
//
// Some checks of a failed batch may have reached Redis. A context that the
// caller cancelled gives ErrUnavailable wrapping ctx's error in every mode
// and is no outage. Reconnecting is go-redis's. [Store.Stats] counts
// batches, failed round trips, outages, probes and the checks each mode
// decided.
package redisstore
