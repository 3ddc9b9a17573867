package rls

import (
	"bytes"
	"context"
	"fmt"
	"github.com/stretchr/testify/require"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// The peers' pinned versions, built with go install from the module proxy
// into a directory beside the Go build cache, once per machine.
const (
	envoyModule    = "github.com/envoyproxy/ratelimit/src/service_cmd"
	envoyVersion   = "v1.4.1-0.20260122083618-3fb702589d36"
	gubernatorPkg  = "github.com/gubernator-io/gubernator/v2/cmd/gubernator"
	gubernatorVers = "v2.13.0"
)

// needProgram skips tb when the program cannot be had and CI is unset; with
// CI set it fails tb instead.
func needProgram(tb testing.TB, format string, args ...any) {
	tb.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") != "" {
		tb.Fatalf("%s (CI is set, so this fails instead of skipping)", msg)
	}
	tb.Skip(msg)
}

// builds holds one build per program and process: a benchmark and a test
// that both need a program build it once.
var builds sync.Map // name -> *build

type build struct {
	once sync.Once
	path string
	err  error
}

// binDir is where the programs built from this repository go: a temporary
// directory that TestMain removes.
var binDir = sync.OnceValues(func() (string, error) { return os.MkdirTemp("", "rls-bin-") })

func buildOnce(name string, f func() (string, error)) (string, error) {
	v, _ := builds.LoadOrStore(name, &build{})
	b := v.(*build)
	b.once.Do(func() { b.path, b.err = f() })
	return b.path, b.err
}

// peerCacheDir is the directory beside the Go build cache that keeps the
// peers built at their pinned versions: $(go env GOCACHE)/../NAME/VERSION.
func peerCacheDir(name, version string) (string, error) {
	out, err := exec.Command("go", "env", "GOCACHE").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOCACHE: %w", err)
	}
	cache := strings.TrimSpace(string(out))
	if cache == "" || cache == "off" {
		return "", fmt.Errorf("GOCACHE is %q: no place to keep built peers", cache)
	}
	return filepath.Join(filepath.Dir(cache), name, version), nil
}

// goInstall builds pkg@version with go install into dir (once: a binary
// already there is used) and returns the binary's path. It builds into a
// temporary directory and renames, so that a build cut short leaves nothing.
func goInstall(pkg, version, dir string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	if _, err := os.Stat(bin); err == nil {
		return bin, nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", err
	}
	tmp, err := os.MkdirTemp(dir, "build-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	cmd := exec.Command("go", "install", pkg+"@"+version)
	cmd.Dir = tmp // outside any module: go install pkg@version reads no go.mod
	cmd.Env = append(os.Environ(), "GOBIN="+tmp, "GOWORK=off", "GOFLAGS=-buildvcs=false", "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go install %s@%s: %w\n%s", pkg, version, err, tail(out))
	}
	if err := os.Rename(filepath.Join(tmp, filepath.Base(pkg)), bin); err != nil {
		return "", err
	}
	return bin, nil
}

// envoyBinary returns envoy ratelimit's service_cmd at envoyVersion, built
// on first use (about a minute on two idle cores).
func envoyBinary(tb testing.TB) string {
	tb.Helper()
	p, err := buildOnce("envoy", func() (string, error) {
		dir, err := peerCacheDir("envoy-ratelimit", envoyVersion)
		if err != nil {
			return "", err
		}
		return goInstall(envoyModule, envoyVersion, dir)
	})
	if err != nil {
		needProgram(tb, "envoy ratelimit could not be built: %v", err)
	}
	return p
}

// gubernatorBinary returns gubernator at gubernatorVers, built on first use.
func gubernatorBinary(tb testing.TB) string {
	tb.Helper()
	p, err := buildOnce("gubernator", func() (string, error) {
		dir, err := peerCacheDir("gubernator", gubernatorVers)
		if err != nil {
			return "", err
		}
		return goInstall(gubernatorPkg, gubernatorVers, dir)
	})
	if err != nil {
		needProgram(tb, "gubernator could not be built: %v", err)
	}
	return p
}

// repoRoot is the repository's root: this package is bench/rls.
func repoRoot() string {
	wd, _ := os.Getwd()
	return filepath.Dir(filepath.Dir(wd))
}

// actorlimitdBinary returns cmd/actorlimitd built from this repository, or
// the program RLS_ACTORLIMITD names. It skips tb when there is neither.
func actorlimitdBinary(tb testing.TB) string {
	tb.Helper()
	if p := os.Getenv("RLS_ACTORLIMITD"); p != "" {
		return p
	}
	if !hasActorlimitd() {
		tb.Skip("this tree has no cmd/actorlimitd yet")
	}
	p, err := buildOnce("actorlimitd", func() (string, error) {
		return goBuild(repoRoot(), "./cmd/actorlimitd", "actorlimitd")
	})
	if err != nil {
		tb.Fatalf("building actorlimitd: %v", err)
	}
	return p
}

// hasActorlimitd reports whether there is an actorlimitd to run: this tree
// has cmd/actorlimitd, or RLS_ACTORLIMITD names a program.
func hasActorlimitd() bool {
	if os.Getenv("RLS_ACTORLIMITD") != "" {
		return true
	}
	_, err := os.Stat(filepath.Join(repoRoot(), "cmd", "actorlimitd"))
	return err == nil
}

// floorBinary returns bench/cmd/rlsfloor, built on first use.
func floorBinary(tb testing.TB) string {
	tb.Helper()
	p, err := buildOnce("rlsfloor", func() (string, error) {
		return goBuild(filepath.Join(repoRoot(), "bench"), "./cmd/rlsfloor", "rlsfloor")
	})
	if err != nil {
		tb.Fatalf("building rlsfloor: %v", err)
	}
	return p
}

// goBuild builds pkg of the module in dir into binDir as name.
func goBuild(dir, pkg, name string) (string, error) {
	bd, err := binDir()
	if err != nil {
		return "", err
	}
	out := filepath.Join(bd, name)
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %w\n%s", pkg, err, tail(b))
	}
	return out, nil
}

// tail returns the last lines of a program's output, for an error message.
func tail(b []byte) string {
	const max = 4000
	if len(b) > max {
		b = b[len(b)-max:]
	}
	return string(b)
}

// freePort returns a loopback port that was free a moment ago.
func freePort(tb testing.TB) int {
	tb.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		tb.Fatalf("free port: %v", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func addr(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }

// proc is a program a test or benchmark started.
type proc struct {
	name string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{} // closed when the program has exited
}

// syncBuffer is a bytes.Buffer that a program's output and a reader share.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.b.Len() > 1<<20 { // keep the start: a program that logs per request must not eat the memory
		return len(p), nil
	}
	return s.b.Write(p)
}

func (s *syncBuffer) Bytes() []byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bytes.Clone(s.b.Bytes())
}

// start runs bin with args and env (added to this process's), waits until
// ready reports nil (60s at most, failing tb if the program exits first) and
// stops the program at tb's cleanup: SIGTERM, then SIGKILL after 5s.
func start(tb testing.TB, name, bin string, args, env []string, ready func() error) *proc {
	tb.Helper()
	p := &proc{name: name, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Dir = tb.TempDir()
	p.cmd.Stdout = p.out
	p.cmd.Stderr = p.out
	if err := p.cmd.Start(); err != nil {
		tb.Fatalf("start %s: %v", name, err)
	}
	go func() { _ = p.cmd.Wait(); close(p.done) }()
	tb.Cleanup(p.stop)
	deadline := time.Now().Add(60 * time.Second)
	for {
		err := ready()
		if err == nil {
			return p
		}
		select {
		case <-p.done:
			tb.Fatalf("%s exited before it was ready (%v): %v\n%s", name, p.cmd.ProcessState, err, tail(p.out.Bytes()))
		default:
		}
		if time.Now().After(deadline) {
			tb.Fatalf("%s not ready after 60s: %v\n%s", name, err, tail(p.out.Bytes()))
		}
		time.Sleep(20 * time.Millisecond) // polling for the program, not waiting for time to pass
	}
}

func (p *proc) stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// httpOK returns a readiness check: GET url answers 200.
func httpOK(url string) func() error {
	c := &http.Client{Timeout: time.Second}
	return func() error {
		resp, err := c.Get(url)
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("GET %s: %s", url, resp.Status)
		}
		return nil
	}
}

// dialOK returns a readiness check: a TCP connection to addr is accepted.
func dialOK(addr string) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		c, err := (&net.Dialer{}).DialContext(ctx, "tcp", addr)
		if err != nil {
			return err
		}
		return c.Close()
	}
}

// servers maps a started program's gRPC address to its process, so that a
// benchmark can read the CPU time the server spent (serverCPU).
var servers sync.Map // string -> *proc

// served records p as the server at addr.
func served(addr string, p *proc) { servers.Store(addr, p) }

// serverCPU returns the CPU time (user and system, all threads) that the
// server at addr has spent so far, read from /proc; ok is false when it
// is not known (not a program started here, or no /proc).
func serverCPU(addr string) (time.Duration, bool) {
	v, ok := servers.Load(addr)
	if !ok {
		return 0, false
	}
	return processCPU(v.(*proc).cmd.Process.Pid)
}

// serverSyscalls returns the read and write system calls (syscr, syscw in
// /proc/PID/io) of the server at addr so far; ok is false when they are
// not known.
func serverSyscalls(addr string) (reads, writes int64, ok bool) {
	v, ok := servers.Load(addr)
	if !ok {
		return 0, 0, false
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", v.(*proc).cmd.Process.Pid))
	if err != nil {
		return 0, 0, false
	}
	var okR, okW bool
	for _, line := range strings.Split(string(b), "\n") {
		k, val, _ := strings.Cut(line, ": ")
		n, err := strconv.ParseInt(strings.TrimSpace(val), 10, 64)
		switch {
		case err != nil:
		case k == "syscr":
			reads, okR = n, true
		case k == "syscw":
			writes, okW = n, true
		}
	}
	return reads, writes, okR && okW
}

// processCPU returns the CPU time (user and system, all threads) that
// process pid has spent so far, from /proc; ok is false without /proc.
func processCPU(pid int) (time.Duration, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The fields after the command's name, which is in parentheses and
	// may hold spaces: state is the first, utime the 12th, stime the 13th.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0, false
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const ticks = 100 // USER_HZ, 100 on Linux
	return time.Duration(utime+stime) * time.Second / ticks, true
}

// TestEnvoyBuilds: envoy ratelimit, the differential tests' peer, builds
// at its pinned version (into the directory beside the build cache, where
// the other tests find it). CI runs it first, at low priority beside its
// other steps, so that the differential tests do not wait for the build.
func TestEnvoyBuilds(t *testing.T) {
	bin := envoyBinary(t)
	info, err := os.Stat(bin)
	require.NoError(t, err)
	require.NotZero(t, info.Mode()&0o111, "%s is executable", bin)
}
