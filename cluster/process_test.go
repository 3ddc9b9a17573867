//go:build !race

package cluster_test

import (
	"context"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/internal/testkit"
)

const childEnv = "ACTORLIMIT_CLUSTER_CHILD"

// Process test figures: the limit per window, each member's offered rate.
const (
	procLimit     = 300
	procRate      = 200 // hits a second at each member
	procWindow    = time.Second
	procDeadAfter = 2 * time.Second
	// procSlack is what a window may allow over the predicted bound on the
	// wall clock of a loaded machine: 2% of the limit.
	procSlack = procLimit / 50
	// procDetect bounds the failure detection: DeadAfter, and 3 s for the
	// heartbeats, the gossip and a loaded machine.
	procDetect = procDeadAfter + 3*time.Second
)

// procBound is the predicted most a window allows with n live members:
// the limit plus what the other members admit in one sync interval.
func procBound(n int) int {
	return procLimit + (n-1)*procRate*int(cluster.DefaultSyncEvery)/int(time.Second)
}

// TestChildMember is not a test: run by TestMembersAsProcesses in a child
// process, it is one member that hits one hot id at procRate and prints,
// for each window, how many hits it allowed.
func TestChildMember(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("a child process of TestMembersAsProcesses")
	}
	port, am, hosts := testkit.MemberEnv()
	mode := cluster.LocalFirst
	if os.Getenv("MODE") == "owner" {
		mode = cluster.Owner
	}
	dead := procDeadAfter
	if d, err := time.ParseDuration(os.Getenv("DEAD_AFTER")); err == nil {
		dead = d // TestStoppedMemberKeepsPlace's and TestDroppedMemberRejoins's
	}
	m, err := cluster.Start(cluster.Config{
		Name:        "procs",
		Port:        port,
		AutoManaged: &cluster.AutoManaged{Port: am, Hosts: hosts},
		DeadAfter:   dead,
		Mode:        mode,
	})
	if err != nil {
		fmt.Println("err", err)
		os.Exit(1)
	}
	for len(m.Members()) < len(hosts) {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("ready", m.Address(), m.OwnerOf("hot"))
	go func() {
		// "members <n> <Unix ms>" when the member list changes, "owns <n>
		// <Unix ms>" when the number of partitions the member owns does,
		// and "resumed <Unix ms>" on the first look after the process was
		// stopped (a look more than a second after the one before).
		seen, owned := 0, -1
		last := time.Now()
		for {
			now := time.Now()
			if now.Sub(last) > time.Second {
				fmt.Println("resumed", now.UnixMilli())
			}
			last = now
			if n := len(m.Members()); n != seen {
				fmt.Println("members", n, now.UnixMilli())
				seen = n
			}
			if n := m.OwnedParts(); n != owned {
				fmt.Println("owns", n, now.UnixMilli())
				owned = n
			}
			time.Sleep(10 * time.Millisecond)
		}
	}()
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }() // the parent closes stdin to stop us
	p := actorlimit.Policy{Limit: procLimit, Period: procWindow}
	tick := time.NewTicker(time.Second / procRate)
	// Each hit is filed under the window the limiter decided it in (its
	// end is the decision's time plus ResetAfter, a whole window: the
	// nearest one to the call's start plus ResetAfter while a call takes
	// under half a window), not the ticker's, which a loaded machine
	// delivers late. A window is printed once the clock is a window past
	// it: "w <start Unix ms> <allowed> <tried>".
	type counts struct{ allowed, tried int }
	windows := map[int64]*counts{}
	for range tick.C {
		start := time.Now()
		res, err := m.Limiter.Hit(context.Background(), "hot", p)
		if err != nil {
			fmt.Println("err", err)
			continue
		}
		w := start.Add(res.ResetAfter).Add(procWindow / 2).Truncate(procWindow).Add(-procWindow).UnixMilli()
		c := windows[w]
		if c == nil {
			c = &counts{}
			windows[w] = c
		}
		c.tried++
		if res.Allowed {
			c.allowed++
		}
		past := time.Now().Truncate(procWindow).Add(-procWindow).UnixMilli()
		for w, c := range windows {
			if w < past {
				fmt.Println("w", w, c.allowed, c.tried)
				delete(windows, w)
			}
		}
	}
}

// TestMembersAsProcesses: 3 members as separate OS processes on loopback
// (automanaged provider: seed addresses, no registry), one hot id, load
// spread over the three; one is killed with SIGKILL. The survivors report
// no error; they stop listing the dead member within procDetect (measured
// from the signal to the moment the later of the two reports 2 members);
// every whole window until the detection allows at most the 3-member
// bound, and every window from the detection on, at least 5 of them, at
// most the 2-member bound (both plus procSlack) and at least 90% of the
// limit, or of the hits the members tried where a loaded machine let them
// try fewer. The victim is the member that owns the hot id's partition.
// The three cases run side by side (-parallel, 2 by default), each on
// members of its own: their processes mostly wait for the next tick.
func TestMembersAsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 25 s")
	}
	t.Run("signal=SIGKILL", func(t *testing.T) { t.Parallel(); testMembersAsProcesses(t, syscall.SIGKILL, "localfirst") })
	t.Run("signal=SIGSTOP", func(t *testing.T) { t.Parallel(); testMembersAsProcesses(t, syscall.SIGSTOP, "localfirst") })
	t.Run("signal=SIGKILL,mode=Owner", func(t *testing.T) { t.Parallel(); testMembersAsProcesses(t, syscall.SIGKILL, "owner") })
}

// procOwnerLoss is the most an Owner-mode window may lose, and so allow
// again, when the hot id's owner is killed: what it admitted since it last
// sent its backup, one sync interval of the members' hits.
const procOwnerLoss = 3 * procRate * int(cluster.DefaultSyncEvery) / int(time.Second)

// testMembersAsProcesses is TestMembersAsProcesses with the member that
// owns the hot id's partition (the victim) stopped by sig: SIGKILL ends the process, and the kernel closes its connections;
// SIGSTOP freezes it with its connections open, so that only the missed
// heartbeats (DeadAfter) tell the others.
func testMembersAsProcesses(t *testing.T, sig syscall.Signal, mode string) {
	ports := testkit.NewMembers(t, 3)
	type line struct {
		member int
		text   string
	}
	lines := make(chan line, 1024)
	var procs []*testkit.Proc
	for i := range 3 {
		p := testkit.StartProc(t, "^TestChildMember$", append(ports.Env(i), childEnv+"=1", "MODE="+mode), nil)
		procs = append(procs, p)
		go func() {
			for l := range p.Lines {
				lines <- line{i, l}
			}
		}()
	}
	// window start (ms) -> member -> allowed
	allowed := map[int64]map[int]int{}
	tried := map[int64]int{} // window start (ms) -> hits tried, all members
	ready, victim := 0, -1
	var (
		addrs                         [3]string
		owner                         string
		readyAt, killedAt, detectedAt time.Time
	)
	detected := map[int]time.Time{} // survivor -> when it listed 2 members
	deadline := time.After(90 * time.Second)
	for done := false; !done; {
		var l line
		select {
		case <-deadline:
			t.Fatalf("timed out: %d ready, killed at %v, detected at %v", ready, killedAt, detectedAt)
		case l = <-lines:
		}
		f := strings.Fields(l.text)
		switch {
		case len(f) == 3 && f[0] == "ready":
			addrs[l.member], owner = f[1], f[2]
			if ready++; ready == 3 {
				readyAt = time.Now()
				victim = slices.Index(addrs[:], owner)
				require.GreaterOrEqual(t, victim, 0, "the hot id's owner %s is none of %v", owner, addrs)
				t.Logf("all 3 members ready; member %d owns the hot id", victim)
			}
		case len(f) > 0 && f[0] == "err":
			if !killedAt.IsZero() && l.member == victim {
				continue
			}
			t.Errorf("member %d: %s", l.member, l.text)
		case len(f) == 3 && f[0] == "members" && !killedAt.IsZero() && l.member != victim && f[1] == "2":
			ms, _ := strconv.ParseInt(f[2], 10, 64)
			if _, ok := detected[l.member]; !ok {
				detected[l.member] = time.UnixMilli(ms)
				t.Logf("member %d stopped listing the victim %v after the signal", l.member, detected[l.member].Sub(killedAt).Round(time.Millisecond))
				if len(detected) == 2 {
					detectedAt = detected[l.member]
				}
			}
		case len(f) == 4 && f[0] == "w" && ready == 3:
			w, _ := strconv.ParseInt(f[1], 10, 64)
			n, _ := strconv.Atoi(f[2])
			tries, _ := strconv.Atoi(f[3])
			if time.UnixMilli(w).Before(readyAt) {
				continue // a window that started before every member was ready
			}
			if !killedAt.IsZero() && l.member == victim {
				continue // a stopped member's late report
			}
			if allowed[w] == nil {
				allowed[w] = map[int]int{}
			}
			allowed[w][l.member] = n
			tried[w] += tries
			if killedAt.IsZero() && len(allowed) >= 4 {
				require.NoError(t, procs[victim].Cmd.Process.Signal(sig))
				killedAt = time.Now()
				t.Logf("member %d got %v at %s", victim, sig, killedAt.Format("15:04:05.000"))
			}
			if !killedAt.IsZero() && detectedAt.IsZero() && time.Since(killedAt) > procDetect+5*time.Second {
				t.Fatalf("the survivors still list the dead member %v after the kill: %v", time.Since(killedAt), detected)
			}
			// Done when 5 whole windows from the detection on are in.
			done = !detectedAt.IsZero() && time.UnixMilli(w).After(detectedAt.Add(5*procWindow))
		}
	}
	require.LessOrEqual(t, detectedAt.Sub(killedAt), procDetect, "failure detection")
	if mode == "owner" {
		checkOwnerWindows(t, allowed, tried, killedAt, detectedAt)
		return
	}
	checkProcWindows(t, allowed, tried, killedAt, detectedAt)
}

// wholeWindows logs the totals of the windows in allowed, in order, and
// returns their starts, the last one (which may be partial) left out.
func wholeWindows(t *testing.T, allowed map[int64]map[int]int, tried map[int64]int, killedAt time.Time) []int64 {
	t.Helper()
	ws := slices.Sorted(maps.Keys(allowed))
	ws = ws[:len(ws)-1]
	for _, w := range ws {
		total, start := sum(allowed[w]), time.UnixMilli(w)
		t.Logf("window %s: %v total %d of limit %d (%.3f×) of %d tried, %+.1fs from the kill",
			start.Format("15:04:05"), allowed[w], total, procLimit, float64(total)/procLimit, tried[w], start.Sub(killedAt).Seconds())
	}
	return ws
}

// sum returns the hits allowed in a window, over the members.
func sum(byMember map[int]int) int {
	total := 0
	for _, n := range byMember {
		total += n
	}
	return total
}

// checkProcWindows checks, and logs, the totals of the whole windows of
// TestMembersAsProcesses.
func checkProcWindows(t *testing.T, allowed map[int64]map[int]int, tried map[int64]int, killedAt, detectedAt time.Time) {
	t.Helper()
	after := 0
	for _, w := range wholeWindows(t, allowed, tried, killedAt) {
		total, start := sum(allowed[w]), time.UnixMilli(w)
		switch {
		case !start.Add(procWindow).After(killedAt) && len(allowed[w]) < 3:
			// The killed member did not report this window.
		case !start.Add(procWindow).After(killedAt):
			assert.LessOrEqual(t, total, procBound(3)+procSlack, "window %s, before the kill", start.Format("15:04:05"))
		case start.Add(procWindow).After(killedAt) && start.Before(detectedAt):
			// Between the signal and the detection the survivors cannot
			// reach the owner: each falls back to its share (limit/3 while
			// it still counts 3 members) beyond what the owner confirmed.
			assert.LessOrEqual(t, total, procBound(3)+procSlack, "window %s, before the detection", start.Format("15:04:05"))
		case !start.Before(detectedAt):
			after++
			assert.LessOrEqual(t, total, procBound(2)+procSlack, "window %s, after the detection", start.Format("15:04:05"))
			assert.GreaterOrEqual(t, total, min(procLimit, tried[w])*9/10, "window %s, after the detection: %d tried", start.Format("15:04:05"), tried[w])
		}
	}
	assert.GreaterOrEqual(t, after, 5, "whole windows after the detection")
}

// checkOwnerWindows checks, and logs, the totals of the whole windows of
// TestMembersAsProcesses in Owner mode: the limit (plus procSlack, for the
// members' clocks that disagree at a window's edge) before the kill and
// from the detection on; in the window of the kill, the limit plus what
// the dead owner admitted since its last backup (procOwnerLoss).
func checkOwnerWindows(t *testing.T, allowed map[int64]map[int]int, tried map[int64]int, killedAt, detectedAt time.Time) {
	t.Helper()
	after := 0
	for _, w := range wholeWindows(t, allowed, tried, killedAt) {
		total, start := sum(allowed[w]), time.UnixMilli(w)
		switch {
		case !start.Add(procWindow).After(killedAt) && len(allowed[w]) < 3:
			// The killed member did not report this window.
		case !start.Add(procWindow).After(killedAt), !start.Before(detectedAt):
			if !start.Before(detectedAt) {
				after++
			}
			assert.LessOrEqual(t, total, procLimit+procSlack, "window %s", start.Format("15:04:05"))
			assert.GreaterOrEqual(t, total, min(procLimit, tried[w])*9/10, "window %s: %d tried", start.Format("15:04:05"), tried[w])
		default: // the kill's window, until the detection
			assert.LessOrEqual(t, total, procLimit+procOwnerLoss+procSlack, "window %s, of the kill", start.Format("15:04:05"))
		}
	}
	assert.GreaterOrEqual(t, after, 5, "whole windows after the detection")
}
