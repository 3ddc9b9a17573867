//go:build !race

package cluster_test

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

// TestStoppedMemberKeepsPlace: 3 members as processes (automanaged,
// DeadAfter 10 s, each hitting its hot id as TestMembersAsProcesses's);
// one is stopped (SIGSTOP) for 5 s, longer than a health poll's timeout
// and shorter than DeadAfter, then continued. No other member stops
// listing it, during the stop or in the 2 s after (the engine's provider
// dropped it 2 s into the stop, for good); no caller sees an error.
func TestStoppedMemberKeepsPlace(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 15 s")
	}
	ports := testkit.NewMembers(t, 3)
	type line struct {
		member int
		text   string
	}
	lines := make(chan line, 1024)
	var procs []*testkit.Proc
	for i := range 3 {
		p := testkit.StartProc(t, "^TestChildMember$", append(ports.Env(i), childEnv+"=1", "DEAD_AFTER=10s"), nil)
		procs = append(procs, p)
		go func() {
			for l := range p.Lines {
				lines <- line{i, l}
			}
		}()
	}
	const victim = 2
	var stopped, resumed time.Time
	ready := 0
	deadline := time.After(60 * time.Second)
	var after <-chan time.Time
	for done := false; !done; {
		select {
		case <-deadline:
			t.Fatalf("timed out: %d ready, stopped at %v", ready, stopped)
		case <-after:
			if resumed.IsZero() {
				require.NoError(t, procs[victim].Cmd.Process.Signal(syscall.SIGCONT))
				resumed = time.Now()
				t.Logf("member %d continued after %v", victim, resumed.Sub(stopped).Round(time.Millisecond))
				after = time.After(2 * time.Second)
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
					after = time.After(5 * time.Second)
				}
			case len(f) > 0 && f[0] == "err":
				t.Errorf("member %d: %s", l.member, l.text)
			case len(f) == 3 && f[0] == "members" && ready == 3 && l.member != victim && f[1] != "3":
				t.Errorf("member %d listed %s members %v after the SIGSTOP", l.member, f[1], time.Since(stopped).Round(time.Millisecond))
			}
		}
	}
}
