package testkit

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// A process test runs members (of a cluster, say) as child processes of
// the test binary: each child is one test of the binary, which does the
// work only when its environment says so, talks on stdout a line at a
// time and reads commands on stdin; it stops when its stdin is closed.

// Proc is a child process of the test binary: Cmd runs it, In is its
// stdin, Lines its stdout, a line at a time (the testing package's own
// "=== " and "--- " lines left out), closed when it ends.
type Proc struct {
	Cmd   *exec.Cmd
	In    io.WriteCloser
	Lines chan string
}

// StartProc starts the test binary running the tests that match test (an
// anchored -test.run pattern), with env added to its environment and its
// stderr to stderr (nil: discarded). The process is stopped when t ends:
// its stdin closed, then killed (a stopped process too), then waited for.
func StartProc(t testing.TB, test string, env []string, stderr io.Writer) *Proc {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	cmd := exec.Command(exe, "-test.run="+test, "-test.count=1")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	p := &Proc{Cmd: cmd, In: in, Lines: make(chan string, 1024)}
	go func() {
		defer close(p.Lines)
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		for sc.Scan() {
			if l := sc.Text(); !strings.HasPrefix(l, "=== ") && !strings.HasPrefix(l, "--- ") {
				p.Lines <- l
			}
		}
	}()
	t.Cleanup(func() {
		_ = in.Close()
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	})
	return p
}

// AskWait is how long Ask waits for an answer.
const AskWait = 60 * time.Second

// Ask sends cmd, a line, to p and returns the fields of the line it
// answers; no answer in AskWait, or a process that ended, fails t.
func (p *Proc) Ask(t testing.TB, cmd string) []string {
	t.Helper()
	if _, err := fmt.Fprintln(p.In, cmd); err != nil {
		t.Fatalf("testkit: asking %q: %v", cmd, err)
	}
	select {
	case l, ok := <-p.Lines:
		if !ok {
			t.Fatalf("testkit: the child ended before answering %q", cmd)
		}
		return strings.Fields(l)
	case <-time.After(AskWait):
		t.Fatalf("testkit: no answer to %q in %v", cmd, AskWait)
		return nil
	}
}

// FreePorts returns n ports on loopback that were free a moment ago.
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatalf("testkit: %v", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	for _, l := range ls {
		_ = l.Close()
	}
	return ports
}

// Members are the loopback addresses of n cluster members run as
// processes: each member's remote port and the port of its health
// endpoint (the automanaged provider's), and every member's health
// endpoint as host:port.
type Members struct {
	Remote, Health []int
	Hosts          []string
}

// NewMembers returns the addresses of n members, on free ports.
func NewMembers(t testing.TB, n int) Members {
	t.Helper()
	ports := FreePorts(t, 2*n)
	m := Members{Remote: ports[:n], Health: ports[n:]}
	for _, p := range m.Health {
		m.Hosts = append(m.Hosts, fmt.Sprintf("127.0.0.1:%d", p))
	}
	return m
}

// The environment of a member process, as Env sets it and MemberEnv reads
// it.
const (
	envRemote = "REMOTE_PORT"
	envHealth = "AM_PORT"
	envHosts  = "AM_HOSTS"
)

// Env returns the environment that tells member i its addresses, for
// StartProc; the child reads it with MemberEnv.
func (m Members) Env(i int) []string {
	return []string{fmt.Sprint(envRemote, "=", m.Remote[i]), fmt.Sprint(envHealth, "=", m.Health[i]),
		envHosts + "=" + strings.Join(m.Hosts, ",")}
}

// MemberEnv returns, in a member process, its remote port, the port of its
// health endpoint and every member's health endpoint, from the environment
// Members.Env set.
func MemberEnv() (remote, health int, hosts []string) {
	remote, _ = strconv.Atoi(os.Getenv(envRemote))
	health, _ = strconv.Atoi(os.Getenv(envHealth))
	return remote, health, strings.Split(os.Getenv(envHosts), ",")
}
