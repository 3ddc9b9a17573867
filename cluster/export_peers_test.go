package cluster

import (
	"fmt"
	"slices"
	"strings"
	"time"

	protoactor "github.com/asynkron/protoactor-go/actor"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/table"
)

// SyncActor is the name of each member's actor that takes the other
// members' messages.
const SyncActor = syncActor

// Send sends msg to the sync actor of the member at addr, from m's actor
// system, as m's own requests go, and returns the answer.
func (m *Member) Send(addr string, msg any, timeout time.Duration) (any, error) {
	return m.engine().ActorSystem.Root.RequestFuture(protoactor.NewPID(addr, syncActor), msg, timeout).Result()
}

// Owns reports whether m owns partition p.
func (m *Member) Owns(p int) bool { return m.parts[p].owned.Load() != nil }

// StateDigest describes, in a canonical form, every state of m that a
// message from another member may change: the owner's state of each
// partition it owns, the partitions it hands on, waits for, keeps backups
// of and accepted, the requests it remembers as an owner, and its counters
// other than Rejected and Refusals.
func (m *Member) StateDigest() string {
	var b strings.Builder
	now := m.cfg.Clock.Now().UnixNano()
	for p := range m.parts {
		op := m.parts[p].owned.Load()
		if op == nil {
			continue
		}
		fmt.Fprintf(&b, "partition %d:\n", p)
		op.mu.Lock()
		var lines []string
		for k, w := range op.windows {
			var nodes []string // in order: a map's is random
			for n, t := range w.nodes {
				nodes = append(nodes, fmt.Sprintf(" [%q %d %d %d]", n, t.epoch, t.base, t.hits))
			}
			slices.Sort(nodes)
			lines = append(lines, fmt.Sprintf("  window %q/%d: %d sum %d", k.id, k.period, w.window, w.sum)+strings.Join(nodes, ""))
		}
		op.table.Snapshot(now, func(r algo.Record) bool {
			lines = append(lines, fmt.Sprintf("  record %v/%v %q: %d %x", r.Algorithm, r.Period, r.ID, r.Death, r.State))
			return true
		})
		for k, ch := range op.charged {
			var nodes []string
			for n, nc := range ch.nodes {
				nodes = append(nodes, fmt.Sprintf(" [%q %d %d]", n, nc.epoch, nc.done))
			}
			slices.Sort(nodes)
			lines = append(lines, fmt.Sprintf("  charged %v/%d %q: %d", k.alg, k.period, k.id, ch.death)+strings.Join(nodes, ""))
		}
		for k, mk := range op.marks {
			lines = append(lines, fmt.Sprintf("  mark %v/%d %q: %d %d %d", k.alg, k.period, k.id, mk.gen, mk.at, mk.until))
		}
		op.mu.Unlock()
		slices.Sort(lines)
		for _, l := range lines {
			b.WriteString(l + "\n")
		}
	}
	m.own.mu.Lock()
	var lines []string
	for p, h := range m.own.handing {
		lines = append(lines, fmt.Sprintf("handing %d to %q", p, h.to))
	}
	for p, w := range m.own.waiting {
		lines = append(lines, fmt.Sprintf("waiting %d from %q", p, w.from))
	}
	for p, bk := range m.own.backups {
		lines = append(lines, fmt.Sprintf("backup %d from %q: %v", p, bk.from, bk.state))
	}
	for p, from := range m.own.accepted {
		lines = append(lines, fmt.Sprintf("accepted %d from %q", p, from))
	}
	for k, a := range m.own.assembling {
		lines = append(lines, fmt.Sprintf("assembling %+v from %q: version %d, piece %d of %d, %d bytes", k, a.from, a.version, a.next, a.pieces, a.bytes))
	}
	m.own.mu.Unlock()
	for i := range m.fb.mem.shards {
		s := &m.fb.mem.shards[i]
		s.mu.Lock()
		for id, r := range s.byID {
			lines = append(lines, fmt.Sprintf("remembered %d of %d at %d: %v %v", id, r.part, r.at, r.charged, r.decisions))
		}
		s.mu.Unlock()
	}
	lines = append(lines, m.copiesDigest(now)...)
	slices.Sort(lines)
	for _, l := range lines {
		b.WriteString(l + "\n")
	}
	st := m.SyncStats()
	st.Rejected, st.Refusals = 0, 0
	fmt.Fprintf(&b, "%+v\n", st)
	return b.String()
}

// copiesDigest is, one line each, the member's own copies: its
// LocalFirst copies of fixed windows, and of the other algorithms' keys
// (with their states, and the shares kept while an owner cannot be
// reached).
func (m *Member) copiesDigest(now int64) []string {
	var lines []string
	for i := range m.local.shards {
		s := &m.local.shards[i]
		s.mu.Lock()
		for k, e := range s.entries {
			lines = append(lines, fmt.Sprintf("copy %q/%d: %+v", k.id, k.period, *e))
		}
		for _, k := range s.active {
			lines = append(lines, fmt.Sprintf("active copy %q/%d", k.id, k.period))
		}
		s.mu.Unlock()
	}
	for i := range m.states.shards {
		s := &m.states.shards[i]
		s.mu.Lock()
		for k, cp := range s.copies {
			lines = append(lines, fmt.Sprintf("state copy %+v: %+v", k, *cp))
		}
		for _, k := range s.active {
			lines = append(lines, fmt.Sprintf("active state copy %+v", k))
		}
		for name, t := range map[string]*table.Table{"state": s.t, "share": s.share} {
			t.Snapshot(now, func(r algo.Record) bool {
				lines = append(lines, fmt.Sprintf("%s %v/%v %q: %d %x", name, r.Algorithm, r.Period, r.ID, r.Death, r.State))
				return true
			})
		}
		s.mu.Unlock()
	}
	return lines
}

// OwnerAt and BackupAt are partition p's owner and backup in m's view.
func (m *Member) OwnerAt(p int) string  { return m.view.Load().owner(p) }
func (m *Member) BackupAt(p int) string { return m.view.Load().backup(p) }
