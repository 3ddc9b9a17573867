package quota

import rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"

// wakeAll wakes the sender of every stream the report str has just handled
// posted to, once the whole report is handled: the actions it caused for
// one Envoy, all its buckets' refreshes among them, then go in one
// response rather than one each as the sender races the report.
func (str *stream) wakeAll() {
	for i, m := range str.posted {
		m.wakeUp()
		str.posted[i] = nil // no stream kept alive by the scratch
	}
	str.posted = str.posted[:0]
}

// wakeUp wakes str's sender, if not already woken.
func (str *stream) wakeUp() {
	select {
	case str.wake <- struct{}{}:
	default:
	}
}

// postFrom posts an action to m's outbox from the report str is handling,
// and remembers m for wakeAll.
func (str *stream) postFrom(m *stream, key string, a *rlqsv3.RateLimitQuotaResponse_BucketAction) {
	m.put(key, a)
	if n := len(str.posted); n == 0 || str.posted[n-1] != m {
		str.posted = append(str.posted, m)
	}
}

// put puts an action in str's outbox, replacing an older one for the same
// bucket not sent yet, without waking its sender.
func (str *stream) put(key string, a *rlqsv3.RateLimitQuotaResponse_BucketAction) {
	str.mu.Lock()
	if _, ok := str.out[key]; !ok {
		str.pending.Add(1)
	}
	str.out[key] = a
	str.mu.Unlock()
}
