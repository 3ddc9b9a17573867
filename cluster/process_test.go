//go:build !race

package cluster_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/automanaged"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

const childEnv = "ACTORLIMIT_CLUSTER_CHILD"

// Process test figures: the limit per window, each member's offered rate.
const (
	procLimit  = 300
	procRate   = 200 // hits a second at each member
	procWindow = time.Second
)

// TestChildMember is not a test: run by TestMembersAsProcesses in a child
// process, it is one member that hits one hot id at procRate and prints,
// for each window, how many hits it allowed.
func TestChildMember(t *testing.T) {
	if os.Getenv(childEnv) == "" {
		t.Skip("a child process of TestMembersAsProcesses")
	}
	port, _ := strconv.Atoi(os.Getenv("REMOTE_PORT"))
	am, _ := strconv.Atoi(os.Getenv("AM_PORT"))
	hosts := strings.Split(os.Getenv("AM_HOSTS"), ",")
	m, err := cluster.Start(cluster.Config{
		Name:      "procs",
		Port:      port,
		Provider:  automanaged.NewWithConfig(200*time.Millisecond, am, hosts...),
		DeadAfter: 2 * time.Second,
	})
	if err != nil {
		fmt.Println("err", err)
		os.Exit(1)
	}
	for len(m.Members()) < len(hosts) {
		time.Sleep(50 * time.Millisecond)
	}
	fmt.Println("ready")
	go func() { _, _ = io.Copy(io.Discard, os.Stdin); os.Exit(0) }() // the parent closes stdin to stop us
	p := actorlimit.Policy{Limit: procLimit, Period: procWindow}
	tick := time.NewTicker(time.Second / procRate)
	window, allowed := time.Now().Truncate(procWindow), 0
	for now := range tick.C {
		if w := now.Truncate(procWindow); w != window {
			fmt.Println("w", window.UnixMilli(), allowed)
			window, allowed = w, 0
		}
		res, err := m.Limiter.Hit(context.Background(), "hot", p)
		if err != nil {
			fmt.Println("err", err)
			continue
		}
		if res.Allowed {
			allowed++
		}
	}
}

func freePorts(t *testing.T, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// TestMembersAsProcesses: 3 members as separate OS processes on loopback
// (automanaged provider: seed addresses, no registry), one hot id, load
// spread over the three; one is killed with SIGKILL. The survivors report
// no error, and their totals per window stay within the limit plus the
// over-admission bound once the failure is detected.
func TestMembersAsProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("runs real processes for about 20 s")
	}
	exe, err := os.Executable()
	require.NoError(t, err)
	ports := freePorts(t, 6)
	var hosts []string
	for i := range 3 {
		hosts = append(hosts, fmt.Sprintf("127.0.0.1:%d", ports[3+i]))
	}
	type line struct {
		member int
		text   string
	}
	lines := make(chan line, 1024)
	var cmds []*exec.Cmd
	var stdins []io.WriteCloser
	var readers sync.WaitGroup
	for i := range 3 {
		cmd := exec.Command(exe, "-test.run=^TestChildMember$", "-test.count=1")
		cmd.Env = append(os.Environ(), childEnv+"=1",
			fmt.Sprintf("REMOTE_PORT=%d", ports[i]), fmt.Sprintf("AM_PORT=%d", ports[3+i]),
			"AM_HOSTS="+strings.Join(hosts, ","))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		in, err := cmd.StdinPipe()
		require.NoError(t, err)
		require.NoError(t, cmd.Start())
		cmds, stdins = append(cmds, cmd), append(stdins, in)
		readers.Add(1)
		go func() {
			defer readers.Done()
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- line{i, sc.Text()}
			}
		}()
	}
	t.Cleanup(func() {
		for i, c := range cmds {
			_ = stdins[i].Close()
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	})
	// window start (ms) -> member -> allowed
	allowed := map[int64]map[int]int{}
	ready := 0
	var killedAt time.Time
	deadline := time.After(60 * time.Second)
	for done := false; !done; {
		select {
		case <-deadline:
			t.Fatalf("timed out: %d ready", ready)
		case l := <-lines:
			f := strings.Fields(l.text)
			switch {
			case len(f) == 1 && f[0] == "ready":
				ready++
				if ready == 3 {
					t.Log("all 3 members ready")
				}
			case len(f) > 0 && f[0] == "err":
				if !killedAt.IsZero() && l.member == 2 {
					continue
				}
				t.Errorf("member %d: %s", l.member, l.text)
			case len(f) == 3 && f[0] == "w" && ready == 3:
				w, _ := strconv.ParseInt(f[1], 10, 64)
				n, _ := strconv.Atoi(f[2])
				if allowed[w] == nil {
					allowed[w] = map[int]int{}
				}
				allowed[w][l.member] = n
				if killedAt.IsZero() && len(allowed) >= 4 {
					require.NoError(t, cmds[2].Process.Kill()) // SIGKILL
					killedAt = time.Now()
					t.Logf("member 2 killed at %s", killedAt.Format("15:04:05.000"))
				}
				if !killedAt.IsZero() && time.Since(killedAt) > 10*time.Second {
					done = true
				}
			}
		}
	}
	bound := procLimit + 2*2*procRate*int(cluster.DefaultSyncEvery)/int(time.Second)
	var ws []int64
	for w := range allowed {
		ws = append(ws, w)
	}
	slices.Sort(ws)
	over := 0
	for _, w := range ws[1 : len(ws)-1] { // the first and last windows are partial
		total := 0
		for _, n := range allowed[w] {
			total += n
		}
		at := time.UnixMilli(w)
		t.Logf("window %s: %v total %d of limit %d (%.3f×), %+.1fs from the kill",
			at.Format("15:04:05"), allowed[w], total, procLimit, float64(total)/procLimit, at.Sub(killedAt).Seconds())
		if at.After(killedAt.Add(8*time.Second)) && total > bound {
			over++
		}
	}
	require.Zero(t, over, "windows over %d after the failure was detected", bound)
}
