//go:build !race

package cluster_test

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

// rejoinFullEnv set runs TestDroppedMemberRejoins with DeadAfter 10 s and
// a stop of 15 s, in place of 3 s and 5 s.
const rejoinFullEnv = "ACTORLIMIT_REJOIN_FULL"

// The bounds of TestDroppedMemberRejoins: a dropped member is listed again
// by the others within rejoinBound of resuming, measured from the first
// look of the resumed member at its own clock to the look of the later of
// the others that lists it (every process reads the same wall clock); each
// look is made every 10 ms by a goroutine that a loaded machine may run
// late: rejoinLookSlack is that allowance.
const (
	rejoinBound     = 2 * time.Second
	rejoinLookSlack = 250 * time.Millisecond
)

// TestDroppedMemberRejoins: 3 members as processes (automanaged, each
// hitting its hot id as TestMembersAsProcesses's); one is stopped
// (SIGSTOP) for longer than DeadAfter, so that the others drop it and the
// engine blocks its system id, then continued. Both others stop listing it
// during the stop, and list it again within rejoinBound of its resuming;
// it owns partitions again; no caller of any member sees an error; every
// window allows at most the 3-member bound plus the resumed member's share
// of the limit (what it admits on its own while it rejoins), plus
// procSlack. With ACTORLIMIT_REJOIN_FULL set, DeadAfter is 10 s and the
// stop 15 s; 3 s and 5 s without.
func TestDroppedMemberRejoins(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 15 s")
	}
	deadAfter, stop := 3*time.Second, 5*time.Second
	if os.Getenv(rejoinFullEnv) != "" {
		deadAfter, stop = 10*time.Second, 15*time.Second
	}
	for _, mode := range []string{"localfirst", "owner"} {
		t.Run("mode="+mode, func(t *testing.T) {
			t.Parallel()
			testDroppedMemberRejoins(t, mode, deadAfter, stop)
		})
	}
}

func testDroppedMemberRejoins(t *testing.T, mode string, deadAfter, stop time.Duration) {
	ports := testkit.NewMembers(t, 3)
	type line struct {
		member int
		text   string
	}
	lines := make(chan line, 1024)
	var procs []*testkit.Proc
	for i := range 3 {
		p := testkit.StartProc(t, "^TestChildMember$", append(ports.Env(i), childEnv+"=1",
			"DEAD_AFTER="+deadAfter.String(), "MODE="+mode), nil)
		procs = append(procs, p)
		go func() {
			for l := range p.Lines {
				lines <- line{i, l}
			}
		}()
	}
	const victim = 2
	var (
		stopped, continued time.Time
		resumed            int64               // the victim's first look after the stop, Unix ms
		dropped            = map[int]int64{}   // member -> when it stopped listing the victim, Unix ms
		relisted           = map[int]int64{}   // member -> when it listed it again, after the resume
		owns               = -1                // the partitions the victim owns, last reported
		ownedNone          bool                // it owned none after the resume
		ownsAgain          int64               // when it owned some again, after that
		allowed            = map[int64][]int{} // window start, Unix ms -> each member's allowed
	)
	ready := 0
	deadline := time.After(90*time.Second + stop)
	var after <-chan time.Time
	for done := false; !done; {
		select {
		case <-deadline:
			t.Fatalf("timed out: %d ready, stopped at %v, continued at %v", ready, stopped, continued)
		case <-after:
			if continued.IsZero() {
				require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGCONT))
				continued = time.Now()
				t.Logf("member %d continued after %v", victim, continued.Sub(stopped).Round(time.Millisecond))
				after = time.After(rejoinBound + rejoinLookSlack + 2*time.Second) // and a few windows
				continue
			}
			done = true
		case l := <-lines:
			f := strings.Fields(l.text)
			switch {
			case len(f) == 3 && f[0] == "ready":
				if ready++; ready == 3 {
					time.Sleep(500 * time.Millisecond) // a few windows under load
					require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGSTOP))
					stopped = time.Now()
					after = time.After(stop)
				}
			case len(f) > 0 && f[0] == "err":
				t.Errorf("member %d: %s", l.member, l.text)
			case len(f) == 2 && f[0] == "resumed" && l.member == victim && !continued.IsZero() && resumed == 0:
				resumed, _ = strconv.ParseInt(f[1], 10, 64)
			case len(f) == 3 && f[0] == "members" && ready == 3 && !stopped.IsZero() && l.member != victim:
				at, _ := strconv.ParseInt(f[2], 10, 64)
				switch {
				case f[1] == "2" && continued.IsZero():
					dropped[l.member] = at
				case f[1] == "3" && !continued.IsZero() && relisted[l.member] == 0:
					relisted[l.member] = at
				}
			case len(f) == 3 && f[0] == "owns" && l.member == victim:
				owns, _ = strconv.Atoi(f[1])
				switch at, _ := strconv.ParseInt(f[2], 10, 64); {
				case owns == 0 && !continued.IsZero():
					ownedNone = true // it dropped its partitions to rejoin
				case owns > 0 && ownedNone && ownsAgain == 0:
					ownsAgain = at
				}
			case len(f) == 4 && f[0] == "w" && ready == 3:
				w, _ := strconv.ParseInt(f[1], 10, 64)
				n, _ := strconv.Atoi(f[2])
				allowed[w] = append(allowed[w], n)
			}
		}
	}
	for _, i := range []int{0, 1} {
		assert.NotZero(t, dropped[i], "member %d never stopped listing the stopped member", i)
		if dropped[i] != 0 {
			t.Logf("member %d dropped it %v into the stop", i, time.UnixMilli(dropped[i]).Sub(stopped).Round(time.Millisecond))
		}
	}
	require.NotZero(t, resumed, "the stopped member never reported its resume")
	bound := (rejoinBound + rejoinLookSlack).Milliseconds()
	for _, i := range []int{0, 1} {
		if !assert.NotZero(t, relisted[i], "member %d did not list the resumed member again", i) {
			continue
		}
		took := relisted[i] - resumed
		t.Logf("member %d listed it again %d ms after it resumed", i, took)
		assert.LessOrEqual(t, took, bound, "member %d listed the resumed member again too late", i)
	}
	assert.Positive(t, owns, "the rejoined member owns no partition")
	if assert.NotZero(t, ownsAgain, "the rejoined member owned no partition after it resumed") {
		took := ownsAgain - resumed
		t.Logf("it owned partitions again %d ms after it resumed", took)
		assert.LessOrEqual(t, took, bound, "the rejoined member took its partitions back too late")
	}
	// The limit: each whole window the three reported (the victim's
	// windows of the stop hold nothing; those of the rejoin hold what it
	// admitted on its share).
	most := 0
	limit := procBound(3) + procLimit/3 + procSlack
	for w, ns := range allowed {
		sum := 0
		for _, n := range ns {
			sum += n
		}
		most = max(most, sum)
		assert.LessOrEqual(t, sum, limit, "window %v allowed too much: %v", time.UnixMilli(w).Format("15:04:05.000"), ns)
	}
	t.Logf("the most a window allowed: %d (limit %d, bound %d)", most, procLimit, limit)
}
