package quota

import (
	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/protobuf/types/known/durationpb"
)

// lastAssignment is the action a bucket built last, for the share and
// rule it was built for: when a division sends the same share to many
// Envoys (an over-demanded bucket, where every Envoy gets the level), they
// are sent the one message. A message is not changed once built, and
// marshalling reads it only, so that several streams may send it at once.
type lastAssignment struct {
	share  float64
	rule   *Rule
	action *rlqsv3.RateLimitQuotaResponse_BucketAction
}

// assignment returns the action that gives share requests per second.
// b.mu is held.
func (b *bucket) assignment(share float64) *rlqsv3.RateLimitQuotaResponse_BucketAction {
	if l := &b.last; l.action != nil && l.share == share && l.rule == b.rule {
		return l.action
	}
	a := assign(b.id, durationpb.New(b.rule.TTL), Strategy(b.rule, share))
	b.last = lastAssignment{share: share, rule: b.rule, action: a}
	return a
}
