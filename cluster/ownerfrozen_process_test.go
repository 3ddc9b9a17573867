//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

const frozenChildEnv = "ACTORLIMIT_FROZEN_CHILD"

// The figures of TestOwnerFrozenAsProcesses: the hot id's policy is
// frozenLimit a frozenWindow, and each member hits it procRate times a
// second (TestMembersAsProcesses' rate: the 3 offer twice the limit); as
// many hits a second go to frozenColdIDs cold ids, which never reach their
// limit.
const (
	frozenColdIDs = 1000
	// frozenWindow is the hot id's window: short, so that a whole one lies
	// within a stop of frozenStop.
	frozenWindow = 500 * time.Millisecond
	frozenLimit  = 150 // half of what the 3 offer in a window: procRate × 3 × frozenWindow / 2
	// frozenSlack is what a window may allow over the predicted bound on
	// the wall clock of a loaded machine: 2% of the limit.
	frozenSlack = frozenLimit / 50
	// frozenStop is how long the first run keeps the owner stopped: under
	// its DeadAfter (the default, 5 s), and half the 2 s after which the
	// engine's automanaged provider drops a member whose health endpoint
	// does not answer (its HTTP client's timeout, whatever DeadAfter says),
	// so that it comes back as the owner: the stopped process has as long
	// again to answer once it runs. The stop starts half a window before a
	// window's start (frozenLead), so that the window lies whole within it
	// even if the signal lands up to half a window late or early.
	frozenStop = 2 * frozenWindow
	frozenLead = frozenWindow / 2
	// frozenDropEvery: one decide request in this many has its first answer
	// dropped by the sender's transport.
	frozenDropEvery = 50
)

// frozenShare is a member's share of the hot id's limit while 3 members are
// live: what each survivor may admit in a window while the owner is
// stopped.
const frozenShare = frozenLimit / 3

// TestOwnerFrozenChild is not a test: run by TestOwnerFrozenAsProcesses in
// a child process, it is one Owner-mode member whose transport drops the
// first answer of one decide request in frozenDropEvery. It hits one hot
// id and a random cold one every 1/procRate s, each in a goroutine of its
// own, and prints:
//
//	ready ADDR OWNER           once it sees every member: its address, the hot id's owner's
//	w START ALLOWED TRIED      the hot id's hits of the window that started at START (Unix ms), once it ended
//	s SEC CALLS ERRS MAX LATE  the calls started in the second SEC (Unix ms): how many, errors, the slowest (ns),
//	                           and the latest this process ran a 1 ms sleeper in it (ns)
//	fb MS N                    its OwnerFallbacks became N at MS (Unix ms)
//	pend MS N                  the checks it keeps for owners became N at MS
//	members N MS               it lists N members from MS on
//	stats FALLBACKS CHARGED RETRIES DEDUPLICATED   every second
//	err TEXT                   a call failed
func TestOwnerFrozenChild(t *testing.T) {
	if os.Getenv(frozenChildEnv) == "" {
		t.Skip("a child process of TestOwnerFrozenAsProcesses")
	}
	port, am, hosts := testkit.MemberEnv()
	dead, _ := time.ParseDuration(os.Getenv("DEAD_AFTER"))
	m, err := cluster.Start(cluster.Config{
		Name: "frozen", Port: port, Mode: cluster.Owner, DeadAfter: dead,
		// The wait fixed: the bounds below are OwnerWait's. An adaptive
		// wait takes the frozen owner's late answers, capped at twice
		// the wait they were sent under, for round trips, and holds the
		// next checks to that owner up to about three times longer
		// (rtt.go's sampleAnswer, TestOwnerWaitAfterThaw).
		OwnerWait:   cluster.DefaultOwnerWait,
		AutoManaged: &cluster.AutoManaged{Port: am, Hosts: hosts},
		Logger:      slog.New(ownLogs{slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})}),
	})
	if err != nil {
		fmt.Println("err", err)
		os.Exit(1)
	}
	var dropped sync.Map
	m.DropReplies(func(msg any) bool {
		r, ok := msg.(*clusterpb.DecideRequest)
		if !ok || len(r.GetCharges()) > 0 || r.GetRequestId()%frozenDropEvery != 0 {
			return false
		}
		_, again := dropped.LoadOrStore(r.GetRequestId(), true)
		return !again
	})
	for len(m.Members()) < len(hosts) {
		time.Sleep(50 * time.Millisecond)
	}
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Printf(format+"\n", args...)
	}
	say("ready %s %s", m.Address(), m.OwnerOf("hot"))
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }() // the parent closes stdin to stop us

	type second struct{ calls, errs, slowest, late int64 }
	var (
		mu      sync.Mutex
		seconds = map[int64]*second{}
		windows = map[int64][2]int{} // window start (ms) -> allowed, tried
	)
	sec := func(at time.Time) *second {
		k := at.Truncate(time.Second).UnixMilli()
		s := seconds[k]
		if s == nil {
			s = &second{}
			seconds[k] = s
		}
		return s
	}
	go func() { // the scheduling delay, and the reports
		var fb uint64
		pend := -1
		lastStats := time.Now()
		for {
			start := time.Now()
			time.Sleep(time.Millisecond)
			late := int64(time.Since(start) - time.Millisecond)
			mu.Lock()
			s := sec(start)
			s.late = max(s.late, late)
			past := time.Now().Truncate(time.Second).Add(-time.Second).UnixMilli()
			for k, s := range seconds {
				if k < past {
					say("s %d %d %d %d %d", k, s.calls, s.errs, s.slowest, s.late)
					delete(seconds, k)
				}
			}
			wpast := time.Now().Truncate(frozenWindow).Add(-frozenWindow).UnixMilli()
			for w, c := range windows {
				if w < wpast {
					say("w %d %d %d", w, c[0], c[1])
					delete(windows, w)
				}
			}
			mu.Unlock()
			st := m.SyncStats()
			if st.OwnerFallbacks != fb {
				fb = st.OwnerFallbacks
				say("fb %d %d", time.Now().UnixMilli(), fb)
			}
			if p := m.PendingCharges(); p != pend {
				pend = p
				say("pend %d %d", time.Now().UnixMilli(), p)
			}
			if time.Since(lastStats) > time.Second {
				lastStats = time.Now()
				say("stats %d %d %d %d", st.OwnerFallbacks, st.Charged, st.Retries, st.Deduplicated)
			}
		}
	}()
	go func() { // "members <n> <Unix ms>" when the member list changes
		seen := 0
		for {
			if n := len(m.Members()); n != seen {
				say("members %d %d", n, time.Now().UnixMilli())
				seen = n
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	hot := actorlimit.Policy{Limit: frozenLimit, Period: frozenWindow}
	cold := actorlimit.Policy{Limit: 1 << 30, Period: time.Hour}
	hit := func(id string, p actorlimit.Policy) {
		start := time.Now()
		res, err := m.Limiter.Hit(context.Background(), id, p)
		d := int64(time.Since(start))
		mu.Lock()
		defer mu.Unlock()
		s := sec(start)
		s.calls++
		s.slowest = max(s.slowest, d)
		if err != nil {
			s.errs++
			say("err %s", strings.ReplaceAll(err.Error(), "\n", " "))
			return
		}
		if id != "hot" {
			return
		}
		// Filed under the window the decision was made in: the decision
		// came between the call's start and its end, and its window ends
		// ResetAfter after it, so the middle of the call plus ResetAfter
		// is within half the call's time of the window's end; a call
		// shorter than a window is filed right (a short window does not
		// leave TestChildMember's margin, the start alone, to a slow call).
		mid := start.Add(time.Duration(d) / 2)
		w := mid.Add(res.ResetAfter).Add(frozenWindow / 2).Truncate(frozenWindow).Add(-frozenWindow).UnixMilli()
		c := windows[w]
		c[1]++
		if res.Allowed {
			c[0]++
		}
		windows[w] = c
	}
	tick := time.NewTicker(time.Second / procRate)
	for range tick.C {
		go hit("hot", hot)
		go hit(fmt.Sprintf("cold:%d", rand.IntN(frozenColdIDs)), cold)
	}
}

// TestOwnerFrozenAsProcesses: 3 Owner-mode members as OS processes on
// loopback, each hitting one hot id (frozenLimit a frozenWindow, procRate a
// second at each member) and cold ids at the same rate, every call in a
// goroutine of its own; each member's transport drops the first answer of
// one decide request in frozenDropEvery. The hot id's owner is stopped
// (SIGSTOP) once 2 whole windows are in, half a window before a window
// starts:
//
//   - sigcont: for frozenStop (2 windows, 1 s), then SIGCONT: the window
//     after the signal lies whole within the stop. Not longer: the
//     engine's automanaged provider drops a member whose health endpoint
//     does not answer in 2 s (its HTTP client's timeout, whatever
//     DeadAfter says), and a member dropped so never comes back; the
//     stopped process has 1 s to answer once it runs, and the test asserts
//     that no survivor dropped it;
//   - past-dead-after: DeadAfter 2 s, and it stays stopped until the
//     survivors have dropped it and 2 whole windows are in (then killed).
//
// Asserted: no caller of a survivor (of any member, with SIGCONT) sees an
// error; no survivor's call takes longer than OwnerWait plus an allowance
// measured in the same child: twice the worst delay with which it ran a
// 1 ms sleeper, plus its slowest call before the signal; every whole
// window before the signal, and every window that starts one sync interval
// after SIGCONT or the survivors' detection, allows at most the limit and
// at least 90% of it (both within frozenSlack); a window in between allows
// at most the limit plus the survivors' shares, frozenLimit + 2 ×
// frozenLimit/3, and a whole one with the owner stopped throughout (there
// is one in each run: asserted) the shares alone, 2 × frozenLimit/3, where
// a fallback that admitted every hit would allow what the survivors offer,
// 4/3 of the limit. Each survivor fell back during the stop. A fallback outside the stop (the load held an answer longer
// than OwnerWait) admits at most one hit more: a window's bound allows
// those made in it, and one less (its share denied a hit the owner would
// have allowed). The dropped answers were sent again (Retries) and
// answered from the first decision (Deduplicated); the windows before the
// signal show them counted once; every charge reached the owner.
func TestOwnerFrozenAsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 20 s")
	}
	t.Run("sigcont", func(t *testing.T) { testOwnerFrozen(t, false) })
	t.Run("past-dead-after", func(t *testing.T) { testOwnerFrozen(t, true) })
}

// frozenLine is a line a child printed, and the child.
type frozenLine struct {
	member int
	f      []string
}

func testOwnerFrozen(t *testing.T, pastDeadAfter bool) {
	dead := cluster.DefaultDeadAfter
	if pastDeadAfter {
		dead = procDeadAfter
	}
	members := testkit.NewMembers(t, 3)
	lines := make(chan frozenLine, 4096)
	logs := &testkit.Buffer{}
	t.Cleanup(func() {
		if t.Failed() || testing.Verbose() {
			t.Logf("the members' logs:\n%s", logs.String())
		}
	})
	var cmds []*exec.Cmd
	for i := range 3 {
		p := testkit.StartProc(t, "^TestOwnerFrozenChild$", append(members.Env(i), frozenChildEnv+"=1", "DEAD_AFTER="+dead.String()), logs)
		cmds = append(cmds, p.Cmd)
		go func() {
			for l := range p.Lines {
				lines <- frozenLine{i, strings.Fields(l)}
			}
		}()
	}
	type sec struct{ calls, errs, slowest, late int64 }
	var (
		addrs                      [3]string
		ready                      int
		victim                     = -1
		readyAt, stopAt, resumedAt time.Time // resumedAt: SIGCONT, or the survivors' detection
		detected                   = map[int]time.Time{}
		allowed                    = map[int64]map[int]int{} // window start (ms) -> member -> allowed
		tried                      = map[int64]int{}
		seconds                    = map[int]map[int64]sec{} // member -> second (ms) -> its calls
		charged                    = map[int]time.Time{}     // survivor -> when its kept charges first went to 0 after the owner answered again
		stats                      = map[int][]string{}
		errs                       = map[int][]string{}
		pending                    = map[int]int{}
		falls                      []fallback // every member's, in the order they came
		lastFb                     = map[int]int{}
	)
	windowsAfter := 0
	handle := func(l frozenLine) {
		f := l.f
		if len(f) == 0 {
			return
		}
		at := func(i int) time.Time {
			ms, _ := strconv.ParseInt(f[i], 10, 64)
			return time.UnixMilli(ms)
		}
		num := func(i int) int64 {
			n, _ := strconv.ParseInt(f[i], 10, 64)
			return n
		}
		survivor := stopAt.IsZero() || l.member != victim
		switch f[0] {
		case "ready":
			addrs[l.member] = f[1]
			if ready++; ready == 3 {
				readyAt = time.Now()
				victim = slices.Index(addrs[:], f[2])
				require.GreaterOrEqual(t, victim, 0, "the hot id's owner %s is none of %v", f[2], addrs)
				t.Logf("all 3 members ready; member %d owns the hot id", victim)
			}
		case "err":
			if pastDeadAfter && !survivor {
				return // the stopped member's own callers, once it runs: it is out of the cluster
			}
			errs[l.member] = append(errs[l.member], strings.Join(f[1:], " "))
		case "s":
			if seconds[l.member] == nil {
				seconds[l.member] = map[int64]sec{}
			}
			seconds[l.member][num(1)] = sec{num(2), num(3), num(4), num(5)}
		case "fb":
			n := int(num(2))
			falls = append(falls, fallback{l.member, at(1), n - lastFb[l.member]})
			lastFb[l.member] = n
		case "pend":
			pending[l.member] = int(num(2))
			if _, ok := charged[l.member]; !ok && !stopAt.IsZero() && survivor && num(2) == 0 && !resumedAt.IsZero() {
				charged[l.member] = at(1) // the first time after the stop
			}
		case "stats":
			stats[l.member] = f[1:]
		case "members":
			if !stopAt.IsZero() && survivor && f[1] == "2" {
				if _, ok := detected[l.member]; !ok {
					detected[l.member] = at(2)
					t.Logf("member %d dropped the stopped member %v after the signal", l.member, at(2).Sub(stopAt).Round(time.Millisecond))
					if pastDeadAfter && len(detected) == 2 {
						resumedAt = at(2)
					}
				}
			}
		case "w":
			w := num(1)
			if ready < 3 || time.UnixMilli(w).Before(readyAt) || !survivor && pastDeadAfter {
				return
			}
			if allowed[w] == nil {
				allowed[w] = map[int]int{}
			}
			allowed[w][l.member] += int(num(2)) // a call that ends late files its hit after the report: reported again
			tried[w] += int(num(3))
			whole := 0
			for w := range allowed {
				if len(allowed[w]) == 3 {
					whole++
				}
			}
			if stopAt.IsZero() && whole >= 2 {
				// frozenLead before a window's start, so that the window
				// lies whole within the stop.
				at := time.Now().Truncate(frozenWindow).Add(frozenWindow - frozenLead)
				if time.Until(at) < 0 {
					at = at.Add(frozenWindow)
				}
				time.Sleep(time.Until(at)) // the lines wait in their channel
				require.NoError(t, cmds[victim].Process.Signal(syscall.SIGSTOP))
				stopAt = time.Now()
				t.Logf("member %d stopped at %s", victim, stopAt.Format("15:04:05.000"))
				if !pastDeadAfter {
					go func() {
						time.Sleep(frozenStop)
						_ = cmds[victim].Process.Signal(syscall.SIGCONT)
					}()
					resumedAt = stopAt.Add(frozenStop) // within a few ms: the sleep's
				}
			}
			if !resumedAt.IsZero() && time.UnixMilli(w).After(resumedAt.Add(cluster.DefaultSyncEvery)) {
				windowsAfter = len(slices.DeleteFunc(slices.Collect(maps.Keys(allowed)), func(w int64) bool {
					return !time.UnixMilli(w).After(resumedAt.Add(cluster.DefaultSyncEvery))
				}))
			}
		}
	}
	deadline := time.After(90 * time.Second)
	for windowsAfter < 3 {
		select {
		case <-deadline:
			t.Fatalf("timed out: %d ready, stopped at %v, resumed at %v, detected %v", ready, stopAt, resumedAt, detected)
		case l := <-lines:
			handle(l)
		}
	}
	drain(lines, handle) // the other members' reports of the last windows
	if pastDeadAfter {
		require.NoError(t, cmds[victim].Process.Kill())
	}

	// Errors and the calls' times.
	var worstLate int64
	for i := range 3 {
		assert.Empty(t, errs[i], "member %d's callers", i)
		if i == victim {
			continue // its callers were stopped with it
		}
		var before, worst, late int64
		for s, c := range seconds[i] {
			late = max(late, c.late)
			if time.UnixMilli(s).Add(time.Second).Before(stopAt) {
				before = max(before, c.slowest)
			} else {
				worst = max(worst, c.slowest)
			}
		}
		worstLate = max(worstLate, late)
		bound := cluster.DefaultOwnerWait + time.Duration(2*late+before)
		t.Logf("member %d: slowest call %v after the signal, %v before; worst scheduling delay %v: bound %v",
			i, time.Duration(worst).Round(time.Microsecond), time.Duration(before).Round(time.Microsecond),
			time.Duration(late).Round(time.Microsecond), bound.Round(time.Microsecond))
		assert.LessOrEqual(t, time.Duration(worst), bound, "member %d's slowest call", i)
	}
	// The windows. A fallback outside the stop (before it, or once the
	// owner answers again: the machine's load held an answer longer than
	// OwnerWait) admits at most one hit beyond the owner's count: each
	// window's bound allows those made in it.
	ws := slices.Sorted(maps.Keys(allowed))
	after := resumedAt.Add(cluster.DefaultSyncEvery)
	stopFalls := map[int]int{} // survivor -> fallbacks of the stop
	var loadFalls []string
	extra := map[int64]int{} // window start (ms) -> fallbacks outside the stop in it
	for _, f := range falls {
		if f.n <= 0 {
			continue
		}
		if !f.at.Before(stopAt) && !f.at.After(resumedAt.Add(cluster.DefaultOwnerWait+time.Duration(worstLate))) && (f.member != victim || !pastDeadAfter) {
			stopFalls[f.member] += f.n
			continue
		}
		if f.member == victim && pastDeadAfter {
			continue
		}
		extra[f.at.Truncate(frozenWindow).UnixMilli()] += f.n
		loadFalls = append(loadFalls, fmt.Sprintf("member %d: %d at %+.3fs", f.member, f.n, f.at.Sub(stopAt).Seconds()))
	}
	t.Logf("fallbacks of the stop, by member: %v; the others (load): %v", stopFalls, loadFalls)
	for i := range 3 {
		if i != victim {
			assert.Positive(t, stopFalls[i], "member %d fell back while the owner was stopped", i)
		}
	}
	if !pastDeadAfter {
		assert.Empty(t, detected, "no survivor dropped the owner stopped %v (the engine drops a member whose health endpoint does not answer in 2 s)", frozenStop)
	}
	// A fallback outside the stop may also deny a hit the owner would
	// have allowed (the member's share is spent): a window may allow one
	// less for each fallback in it.
	lost := func(w int64) int { return extra[w] }
	stopped := 0
	for _, w := range ws[:len(ws)-1] { // the last may be partial
		total, start := sum(allowed[w]), time.UnixMilli(w)
		end := start.Add(frozenWindow)
		what := "before"
		switch {
		case !end.After(stopAt) && len(allowed[w]) < 3:
			continue // a window the stopped member did not report
		case !end.After(stopAt):
			assert.LessOrEqual(t, total, frozenLimit+frozenSlack+extra[w], "window %s, before", start.Format("15:04:05.000"))
			assert.GreaterOrEqual(t, total, min(frozenLimit, tried[w])*9/10-lost(w), "window %s, before: %d tried", start.Format("15:04:05.000"), tried[w])
		case start.After(after):
			what = "after"
			assert.LessOrEqual(t, total, frozenLimit+frozenSlack+extra[w], "window %s, after", start.Format("15:04:05.000"))
			assert.GreaterOrEqual(t, total, min(frozenLimit, tried[w])*9/10-lost(w), "window %s, after: %d tried", start.Format("15:04:05.000"), tried[w])
		case !start.Before(stopAt) && !end.After(resumedAt):
			what = "stopped"
			stopped++
			assert.LessOrEqual(t, total, 2*frozenShare+frozenSlack, "window %s, the owner stopped throughout", start.Format("15:04:05.000"))
		default:
			what = "edge"
			assert.LessOrEqual(t, total, frozenLimit+2*frozenShare+frozenSlack+extra[w], "window %s, of the stop or the resumption", start.Format("15:04:05.000"))
		}
		t.Logf("window %s (%s): %v total %d of limit %d, %d tried, %+.2fs from the signal, %d load fallbacks",
			start.Format("15:04:05.000"), what, allowed[w], total, frozenLimit, tried[w], start.Sub(stopAt).Seconds(), extra[w])
	}
	assert.Positive(t, stopped, "a window lies whole within the stop: the survivors' shares bound it")
	// The fallbacks, the charges, the retries.
	var retries, dedup int
	for i := range 3 {
		if i == victim && pastDeadAfter {
			continue
		}
		if len(stats[i]) == 4 {
			r, _ := strconv.Atoi(stats[i][2])
			d, _ := strconv.Atoi(stats[i][3])
			retries, dedup = retries+r, dedup+d
		}
		if i != victim {
			t.Logf("member %d: stats (fallbacks, charged, retries, deduplicated) %v; its charges were all in %v after the owner answered again",
				i, stats[i], charged[i].Sub(resumedAt).Round(time.Millisecond))
			assert.Zero(t, pending[i], "member %d still keeps charges", i)
		}
	}
	assert.Positive(t, retries, "dropped answers were asked again")
	assert.Positive(t, dedup, "and answered from the first decision")
}

// fallback is n fallbacks a member made, reported at at.
type fallback struct {
	member int
	at     time.Time
	n      int
}

// drain takes the lines that come in lines for 1.2 s more (a child reports
// a window once a window past it), and gives each to f.
func drain(lines <-chan frozenLine, f func(frozenLine)) {
	end := time.After(1200 * time.Millisecond)
	for {
		select {
		case l := <-lines:
			f(l)
		case <-end:
			return
		}
	}
}
