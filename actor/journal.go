package actor

import (
	"errors"
	"iter"
	"sync/atomic"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
)

// Journal keeps a copy of a [Snapshotter] store's state outside the
// process, so that it survives a restart: persist.Journal is the one the
// root package installs. The limiter calls Load and Start before it serves,
// Append for every key a check may have changed and Commit once per mailbox
// batch, Snapshot when the Journal asks for one and at Close, then Close.
// Those calls never overlap, and none of them may wait for a disk.
type Journal interface {
	// Load calls apply with every saved record; an error fails Start.
	Load(now int64, apply func(algo.Record) error) error
	// Start writes the loaded state afresh and starts writing; request
	// asks the limiter for a Snapshot, and may be called from any
	// goroutine.
	Start(records iter.Seq[algo.Record], request func())
	// Append adds a changed key's record to the current batch; r.State is
	// copied.
	Append(r algo.Record)
	// Commit ends the batch.
	Commit()
	// Snapshot takes the whole state.
	Snapshot(records iter.Seq[algo.Record])
	// Failures returns how many writes failed and how many records were
	// dropped so far; it is safe for concurrent use.
	Failures() (errors, dropped uint64)
	// Close writes what it was given and stops.
	Close() error
}

// snapshotRequest asks the limiter to hand its whole state to its Journal.
type snapshotRequest struct{}

// startJournal loads h's journal into the store, writes it afresh and
// starts the writer, which asks pid (once known) for snapshots.
func (h *heir) startJournal(root *protoactor.RootContext, pid *atomic.Pointer[protoactor.PID]) error {
	j := h.cfg.Journal
	snap, ok := h.store.(Snapshotter)
	if !ok {
		return errors.New("actorlimit: persistence needs a store that can be saved and loaded")
	}
	h.snap = snap
	now := h.cfg.Clock.Now().UnixNano()
	if err := j.Load(now, func(r algo.Record) error { return snap.Load(now, r) }); err != nil {
		return err
	}
	j.Start(h.records(now), func() {
		if p := pid.Load(); p != nil {
			root.Send(p, snapshotRequest{})
		}
	})
	return nil
}

// records returns the store's state at now as a sequence.
func (h *heir) records(now int64) iter.Seq[algo.Record] {
	return func(yield func(algo.Record) bool) { h.snap.Snapshot(now, yield) }
}

// journalChecks appends the records of the keys checks may have changed.
func (h *heir) journalChecks(checks []algo.Check) {
	for i := range checks {
		if checks[i].Op != algo.OpPeek {
			h.cfg.Journal.Append(h.snap.Record(&checks[i]))
		}
	}
}

// closeJournal hands the journal a last snapshot and closes it; the
// limiter must have stopped.
func (h *heir) closeJournal() {
	if h.snap == nil {
		return
	}
	h.cfg.Journal.Snapshot(h.records(h.cfg.Clock.Now().UnixNano()))
	_ = h.cfg.Journal.Close()
}
