// Package analytics keeps, per rule of an HTTP middleware, the two
// distributions of the DDoS-Guard article's analytics over time: of groups
// by the requests they made in a time slot, and of groups by the limit
// they had left at the slot's end; plus the heaviest groups.
//
// An [Analytics] is an [httpadapter.Observer]: put it in
// httpadapter.Config.Observers. Time is cut into slots (Config.Slot, 10 s by
// default) and the last Config.History slots are kept (360: an hour). In
// each slot a rule tracks each active group's request count and last
// remaining limit; when the slot ends it folds them into two histograms of
// log-scale buckets (bucket 0 is the value 0, bucket i >= 1 holds 2^(i-1)
// to 2^i-1, the last bucket is open) and forgets the groups. The heaviest
// groups of a slot come from the tracked groups' exact counts and, for the
// groups beyond Config.MaxGroups, from a space-saving sketch of
// Config.TopK*4 counters, so a flood of new groups cannot hide a heavy one.
// Each kept slot keeps its top K, so a snapshot has the heaviest groups of
// the current slot, of the previous one, and of the whole window (the last
// hour by default), the latter summed over the slots. [Analytics.SetOrder]
// lists the rules in the rules file's order.
//
// # Memory
//
// Per rule, bounded whatever the traffic:
//
//   - History slots of 2*Buckets 4-byte counts plus 16 bytes, and the
//     slot's top K of 32 bytes each plus its id: 1,808 bytes a slot with
//     the default TopK, 650,880 bytes for the default hour;
//   - the current slot's groups: at most MaxGroups (4096 by default) of
//     at most 128 bytes each (an index from the group's id, and its
//     counts) plus the id; groups beyond it are counted as untracked;
//   - the sketch: TopK*4 counters;
//   - the ids: copies, never the middleware's strings (which may hold
//     every key of a request), each at most [MaxGroupLength] bytes (a
//     longer one is kept as its start and a hash).
//
// [Analytics.MemoryPerRule] computes the bound for a configuration: 1.63
// MiB with the defaults.
// A rule's analytics are kept after it leaves the rule set, so the total is
// that times the rule names seen since the analytics were made.
// Groups are the middleware's counter ids: they may be addresses, and are
// meant for an operator's page, never for metric labels.
package analytics
