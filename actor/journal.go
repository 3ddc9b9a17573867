package actor

import (
	"context"
	"errors"
	"iter"
	"sync/atomic"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
)

// Journal keeps a copy of a [Snapshotter] store's state outside the
// process, so that it survives a restart: persist.Journal is the one the
// root package installs. The limiter calls Load and Start before it serves;
// then, when the Journal asks, Append for every key changed since the last
// flush and Commit, or BeginSnapshot, SnapshotRecord for every key, a
// chunk of keys a message, and EndSnapshot; and Close after it stopped.
// Those calls never overlap, and none of them may wait for a disk.
type Journal interface {
	// Load calls apply with every saved record; an error fails Start.
	Load(now int64, apply func(algo.Record) error) error
	// Start writes the loaded state afresh and starts writing. The Journal
	// calls flush to ask for the keys changed since the last flush, and
	// snapshot to ask for the whole state, from any goroutine.
	Start(records iter.Seq[algo.Record], snapshot, flush func())
	// Append adds a changed key's record to the flush; r.State is copied.
	Append(r algo.Record)
	// Commit ends the flush: one group of records, written together.
	Commit()
	// BeginSnapshot starts a snapshot of the whole state, which the
	// limiter takes a chunk of keys at a time, deciding checks in between;
	// the keys changed meanwhile reach the Journal through the flushes,
	// which go on. It reports false if the Journal cannot take one now (it
	// asks again later).
	BeginSnapshot() bool
	// SnapshotRecord adds a key's record to the snapshot begun; r.State is
	// copied.
	SnapshotRecord(r algo.Record)
	// EndSnapshot ends the snapshot begun.
	EndSnapshot()
	// Failures returns how many writes failed and how many records were
	// dropped so far; it is safe for concurrent use.
	Failures() (errors, dropped uint64)
	// Close writes what it was given and stops; it returns an error if
	// the state it keeps is older than what it was given (the last
	// snapshot, or the records after it, could not be written).
	Close() error
}

// SnapshotChunk is the most keys the limiter walks for a snapshot in one
// message: about a quarter of a millisecond of encoding, so that a check
// arriving while a snapshot of a million keys is taken waits little.
const SnapshotChunk = 1024

// The limiter's messages from its Journal.
type (
	// snapshotRequest asks for the whole state.
	snapshotRequest struct{}
	// flushRequest asks for the keys changed since the last flush.
	flushRequest struct{}
)

// dirtyKey names a key changed since the last flush.
type dirtyKey struct {
	alg    algo.Algorithm
	period time.Duration
	id     string
}

// policyKey is a key without its id.
type policyKey struct {
	alg    algo.Algorithm
	period time.Duration
}

// dirtySet is the keys changed since the last flush. Most ids are checked
// under one policy, so it is a map by id, whose string hash is the cheapest
// Go has, holding that id's first policy; the other policies of an id go
// to a second map, by whole key.
type dirtySet struct {
	byID  map[string]policyKey
	other map[dirtyKey]struct{}
}

func (d *dirtySet) add(c *algo.Check) {
	p := policyKey{c.Algorithm, c.Period}
	if q, ok := d.byID[c.ID]; !ok {
		d.byID[c.ID] = p
	} else if q != p {
		d.other[dirtyKey{c.Algorithm, c.Period, c.ID}] = struct{}{}
	}
}

// each calls fn with every key of the set.
func (d *dirtySet) each(fn func(*algo.Check)) {
	var c algo.Check
	for id, p := range d.byID {
		c.Algorithm, c.Period, c.ID = p.alg, p.period, id
		fn(&c)
	}
	for k := range d.other {
		c.Algorithm, c.Period, c.ID = k.alg, k.period, k.id
		fn(&c)
	}
}

func (d *dirtySet) clear() {
	clear(d.byID)
	clear(d.other)
}

// startJournal loads h's journal into the store, writes it afresh and
// starts the writer, which messages pid (once known).
func (h *heir) startJournal(root *protoactor.RootContext, pid *atomic.Pointer[protoactor.PID]) error {
	j := h.cfg.Journal
	snap, ok := h.store.(Snapshotter)
	if !ok {
		return errors.New("actorlimit: persistence needs a store that can be saved and loaded")
	}
	now := h.cfg.Clock.Now().UnixNano()
	if err := j.Load(now, func(r algo.Record) error { return snap.Load(now, r) }); err != nil {
		return err
	}
	h.snap = snap
	h.dirty = dirtySet{byID: make(map[string]policyKey), other: make(map[dirtyKey]struct{})}
	send := func(m any) func() {
		return func() {
			if p := pid.Load(); p != nil {
				root.Send(p, m)
			}
		}
	}
	j.Start(h.records(now), send(snapshotRequest{}), send(flushRequest{}))
	return nil
}

// records returns the store's state at now as a sequence.
func (h *heir) records(now int64) iter.Seq[algo.Record] {
	return func(yield func(algo.Record) bool) {
		var cur algo.Cursor
		h.snap.SnapshotChunk(now, &cur, 0, yield)
	}
}

// markDirty notes the keys checks may have changed: a map insert each, the
// only cost of persistence a check pays. A key changed many times between
// two flushes is written once.
func (h *heir) markDirty(checks []algo.Check) {
	for i := range checks {
		if checks[i].Op != algo.OpPeek {
			h.dirty.add(&checks[i])
		}
	}
}

// flushJournal hands the journal the records of the keys changed since the
// last flush.
func (h *heir) flushJournal() {
	j := h.cfg.Journal
	h.dirty.each(func(c *algo.Check) { j.Append(h.snap.Record(c)) })
	j.Commit()
	h.dirty.clear()
}

// snapshotWalk is a snapshot being taken a chunk of keys at a time: the
// limiter sends it to itself after each chunk, so that the checks queued
// meanwhile go first. The keys they change are flushed as usual, which
// keeps the snapshot whole (see [Journal]).
type snapshotWalk struct {
	cur algo.Cursor
}

// snapshotJournal begins a snapshot, unless one is under way or the
// journal cannot take one now, and takes its first chunk.
func (h *heir) snapshotJournal(c protoactor.Context, now int64) {
	if h.walk != nil || !h.cfg.Journal.BeginSnapshot() {
		return
	}
	h.walk = &snapshotWalk{}
	h.continueSnapshot(c, h.walk, now)
}

// continueSnapshot hands the journal the records of the next chunk of keys
// of w and sends w to the limiter again, behind the messages queued
// meanwhile, or ends the snapshot. A walk that panics is given up: the
// next request begins another.
func (h *heir) continueSnapshot(c protoactor.Context, w *snapshotWalk, now int64) {
	if w != h.walk {
		return // given up
	}
	defer func() {
		if r := recover(); r != nil {
			h.walk = nil
			panic(r)
		}
	}()
	began := time.Now()
	if h.walkChunk(w, now, SnapshotChunk) {
		h.sendSelf(c, w, time.Since(began))
		return
	}
	h.walk = nil
	h.cfg.Journal.EndSnapshot()
}

// walkChunk hands the journal the records of at most max keys of w (max
// <= 0: all that remain) and reports whether keys remain.
func (h *heir) walkChunk(w *snapshotWalk, now int64, max int) bool {
	j := h.cfg.Journal
	return h.snap.SnapshotChunk(now, &w.cur, max, func(r algo.Record) bool {
		j.SnapshotRecord(r)
		return true
	})
}

// closeJournal hands the journal the last changed keys, then a last
// snapshot (the rest of the one under way, if any, or a whole one), and
// closes it, returning its error; the limiter must have stopped for good
// (h.over). If the writer is still writing the last snapshot, that one is
// the last. A caller that took the turn before the limiter stopped may
// still be deciding its check on the table in place (the check that it
// had stopped came first): closeJournal waits for that turn to end, so
// that the last snapshot holds the check the caller is answered for.
// Every turn after it finds the limiter stopped and leaves the table be.
func (h *heir) closeJournal() error {
	if h.snap == nil {
		return nil
	}
	if m := h.mailbox.Load(); m != nil && m.lockTurn(context.Background()) {
		if m.release() { // what was posted meanwhile: answered ErrClosed or dropped, as stopped
			m.process(m.batch, nil)
		}
	}
	j := h.cfg.Journal
	h.flushJournal()
	if h.walk != nil || j.BeginSnapshot() {
		w := h.walk
		if w == nil {
			w = &snapshotWalk{}
		}
		h.walkChunk(w, h.cfg.Clock.Now().UnixNano(), 0)
		h.walk = nil
		j.EndSnapshot()
	}
	return j.Close()
}
