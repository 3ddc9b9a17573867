// Package metrics exports what a limiter and its HTTP middleware do as
// Prometheus metrics.
//
// A [Collector] is a prometheus.Collector that the user registers. It is fed
// five ways:
//
//   - as an [httpadapter.Observer] (put it in httpadapter.Config.Observers):
//     per rule and action, the requests the rule matched, allowed, denied,
//     monitored (would have denied), shadowed, let through near its limit,
//     and failed to decide;
//   - through [Collector.Wrap], which times every call the middleware makes
//     to the limiter (a histogram) and counts the calls that failed, or
//     [Collector.WrapLimiter], which does the same for the application's
//     own checks (CheckRate, Hit, HitN) too: give its [TimedLimiter] to
//     the middleware and make every other check through it;
//   - through [Collector.SetLimiter], whose Stats it reads at scrape time:
//     entries held, evictions, expired entries, restarts;
//   - through [Collector.SetStore], for a networked store such as
//     redisstore's: its errors, outages, fallbacks and failed checks, as a [StoreStats]
//     (declared here, so that this package depends on no store; a
//     [StoreStatsFunc] adapts the store's own counters);
//   - through [Collector.SetCluster], for a cluster member: its
//     fallbacks, sync rounds, requests and failures, outages,
//     recoveries, rebuilds and queued resets, hand-offs, Owner mode's
//     fallbacks and retries, as a [ClusterStats] (declared
//     here, so that this package depends on no backend; a
//     [ClusterStatsFunc] adapts the member's SyncStats).
//
// Labels are bounded: a rule's name and its action, never a group, an id
// or an address. A rule's counters are kept after it leaves the rule set
// (counters never go back), so the series are those of every rule name and
// action used since the collector was made.
//
// # Metrics
//
// With the default namespace "actorlimit":
//
//	actorlimit_rule_matched_total{rule,action}     requests the rule matched
//	actorlimit_rule_allowed_total{rule,action}     within the limit
//	actorlimit_rule_denied_total{rule,action}      over the limit of a block rule
//	actorlimit_rule_monitored_total{rule,action}   over the limit of a monitor rule
//	actorlimit_rule_shadowed_total{rule,action}    over the limit of a shadow rule
//	actorlimit_rule_near_limit_total{rule,action}  allowed, with at least NearLimitRatio of the limit used
//	actorlimit_rule_errors_total{rule,action}      the limiter did not decide the rule's hit
//	actorlimit_check_duration_seconds              histogram of the checks, in seconds (Wrap, WrapLimiter)
//	actorlimit_check_errors_total                  checks that failed (Wrap, WrapLimiter)
//	actorlimit_limiter_entries                     keys the limiter holds (SetLimiter; no sample when the store cannot tell)
//	actorlimit_limiter_evictions_total             entries evicted by the memory bound
//	actorlimit_limiter_expired_total               entries deleted by sweeps
//	actorlimit_limiter_mailbox_queued              messages waiting in the limiter's mailbox
//	actorlimit_limiter_restarts_total              restarts of the limiter actor
//	actorlimit_limiter_sweeps_total                sweeps of expired entries finished
//	actorlimit_limiter_sweep_seconds_total         the time they took in all
//	actorlimit_limiter_stats_errors_total          scrapes whose Stats call failed
//	actorlimit_store_errors_total                  failed round trips to a networked store (SetStore)
//	actorlimit_store_outages_total                 times the store went from answering to not
//	actorlimit_store_fallbacks_total               checks decided by the local fallback table
//	actorlimit_store_failed_open_total             checks allowed because the store did not answer
//	actorlimit_store_failed_closed_total           checks denied because the store did not answer
//	actorlimit_store_check_errors_total            checks the store answered with an error of their own
//	actorlimit_store_cached_denials_total          hits the store's over-limit cache answered denied, no round trip
//	actorlimit_cluster_fallbacks_total             hits a cluster member decided on its copy while the owner was unreachable (SetCluster)
//	actorlimit_cluster_sync_rounds_total           sync rounds run
//	actorlimit_cluster_sync_requests_total         sync requests sent to owners
//	actorlimit_cluster_sync_failures_total         sync requests that failed (their hits are sent again)
//	actorlimit_cluster_outages_total               times the member went from reaching every owner to not
//	actorlimit_cluster_recoveries_total            times it went back
//	actorlimit_cluster_rebuilds_total              owners found started empty and sent the partition again
//	actorlimit_cluster_queued_resets_total         resets kept for an unreachable owner, sent with a later sync
//	actorlimit_cluster_hand_offs_total             partitions taken, with their state, from a live owner
//	actorlimit_cluster_refusals_total              requests refused for a partition the member did not hold
//	actorlimit_cluster_take_overs_total            partitions taken from the member's backup after their owner died
//	actorlimit_cluster_backups_total               partitions' states sent to their backup member
//	actorlimit_cluster_owner_fallbacks_total       Owner-mode checks decided on the member's share: the owner did not answer in time
//	actorlimit_cluster_owner_charged_total         of those, the ones their owner has counted since
//	actorlimit_cluster_owner_charges_dropped_total of those, the ones dropped beyond the bound kept for owners
//	actorlimit_cluster_decide_retries_total        Owner-mode requests sent again, same id, for want of an answer
//	actorlimit_cluster_decide_deduplicated_total   Owner-mode requests answered, as an owner, from the first decision
//
// Only the one of denied, monitored and shadowed that a rule's action can
// produce is exported for it.
package metrics
