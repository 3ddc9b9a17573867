package cluster

import "time"

// The bounds of Member.Close, from its call: it returns within closeBound
// whatever the other members do (a dead member's requests time out; one
// that closes at the same moment answers nothing).
const (
	// closeSyncBound is when the last sync's requests give up: the hits it
	// could not carry are lost with the member (LocalFirst), as a crash
	// would lose them, bounded by one sync interval's.
	closeSyncBound = 250 * time.Millisecond
	// closeHandOffBound is when the hand-offs give up: a partition whose
	// hand-off failed is taken over by its next owner from its backup,
	// as after a crash (docs/cluster.md, Backups).
	closeHandOffBound = 500 * time.Millisecond
	// closeBound is when the member stops lingering (see leave).
	closeBound = 750 * time.Millisecond
	// gossipStopBound is how long, after the linger, a close waits for its
	// gossip actor to stop (the engine's stop waits for the message it is
	// handling: a gossip round to a member that does not answer, say)
	// before it stops the
	// remote, which fails whatever the actor still sends; some 100 ms are
	// left to stop the remote within a second.
	gossipStopBound = 150 * time.Millisecond
	// remoteStopBound is how long a close waits for its gRPC server's
	// handlers to return (see stopRemote).
	remoteStopBound = 100 * time.Millisecond
)

// bound returns d, or less if the member is closing and its close's
// current phase ends sooner (at least a millisecond: a request is
// always tried).
func (m *Member) bound(d time.Duration) time.Duration {
	by := m.closeBy.Load()
	if by == 0 {
		return d
	}
	return max(time.Millisecond, min(d, time.Until(time.Unix(0, by))))
}

// waitUntil waits until done is closed, or until by.
func waitUntil(done <-chan struct{}, by time.Time) {
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	select {
	case <-done:
	case <-t.C:
	}
}
