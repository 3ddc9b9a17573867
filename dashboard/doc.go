// Package dashboard serves an operator's page of a middleware's rules: for
// each rule, the two heatmaps of the DDoS-Guard article's analytics and the
// table of its heaviest groups, drawn on the server as SVG, with nothing
// fetched from elsewhere; and the same data as JSON.
//
// Mount the [Handler] where the page should be, for example at /limits:
//
//	GET /limits               the page (HTML with inline SVG), refreshing itself
//	GET /limits?format=json   the analytics.Snapshot it is drawn from, as JSON
//
// # Reading the heatmaps
//
// In both, x is time (one column per slot, the newest on the right) and
// the colour of a cell is how many of the rule's groups fell in it: the
// darker, the more groups. "Requests" puts a group at the number of
// requests it made in the slot; "remaining" at the limit it had left after
// its last request of the slot. Both y axes are log-scale buckets (0, 1,
// 2-3, 4-7, ...).
//
//   - Normal traffic: most groups low on "requests", high on "remaining".
//   - A rule too strict: many groups at remaining 0 although their requests
//     are few: raise the limit or narrow the rule.
//   - A rule too loose: remaining always near the top; the rule limits
//     nobody.
//   - Bots: a band of groups at a steady high request count, and remaining
//     falling to 0 slot after slot.
//
// The tables show a group by its values ("203.0.113.66", or
// "192.0.2.1 · example.com" for ip and host); the JSON keeps the groups as
// the analytics keep them (the middleware's ids, or for one longer than
// analytics.MaxGroupLength its start and a hash). A secret value (a cookie,
// a token) is shown as the 32 hex digits of its HMAC, which
// docs/security.md says how to match. The page shows client addresses: it
// is for operators, so mount it behind whatever guards the rest of the
// admin interface.
package dashboard
