package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	ratelimitv3 "github.com/envoyproxy/go-control-plane/envoy/extensions/common/ratelimit/v3"
	rlsv3 "github.com/envoyproxy/go-control-plane/envoy/service/ratelimit/v3"
	"github.com/stretchr/testify/require"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/actorlimit/actorlimit/internal/testkit"
)

// daemonEnv, set in a child's environment, makes the test binary run
// actorlimitd's main with the arguments it was given: the tests drive the
// real program as processes without building it apart.
const daemonEnv = "ACTORLIMITD_TEST_DAEMON"

func TestMain(m *testing.M) {
	if os.Getenv(daemonEnv) == "1" {
		os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
	}
	os.Exit(m.Run())
}

// daemon is an actorlimitd process a test started.
type daemon struct {
	t          *testing.T
	cmd        *exec.Cmd
	grpc, http string
	debug      string // the debug listener's address, empty without one
	logs       *testkit.Buffer
	done       chan struct{}
	exitCode   int
	conn       *grpc.ClientConn
}

// startDaemon runs actorlimitd with args (on free loopback ports unless
// args give them) and waits until it serves (at most 30 s).
func startDaemon(t *testing.T, args ...string) *daemon {
	t.Helper()
	d, err := spawn(t, args...)
	require.NoError(t, err)
	return d
}

func spawn(t *testing.T, args ...string) (*daemon, error) {
	t.Helper()
	return spawnEnv(t, nil, args...)
}

// spawnEnv is spawn with env added to the process's environment; with env,
// the addresses are not added to args (the environment may give them).
func spawnEnv(t *testing.T, env []string, args ...string) (*daemon, error) {
	t.Helper()
	joined := strings.Join(args, " ")
	if env != nil {
		joined = "-grpc-addr -http-addr -debug-addr"
	}
	if !strings.Contains(joined, "-grpc-addr") {
		args = append(args, "-grpc-addr", "127.0.0.1:0")
	}
	if !strings.Contains(joined, "-http-addr") {
		args = append(args, "-http-addr", "127.0.0.1:0")
	}
	if !strings.Contains(joined, "-debug-addr") {
		args = append(args, "-debug-addr", "127.0.0.1:0")
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(append(os.Environ(), daemonEnv+"=1"), env...)
	d := &daemon{t: t, cmd: cmd, logs: &testkit.Buffer{}, done: make(chan struct{})}
	cmd.Stderr = d.logs
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	served := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if a, ok := strings.CutPrefix(sc.Text(), "actorlimitd debug on "); ok {
				d.debug = a
			}
			if strings.HasPrefix(sc.Text(), "actorlimitd serving") {
				served <- sc.Text()
			}
		}
		_, _ = io.Copy(io.Discard, out)
	}()
	go func() {
		_ = cmd.Wait()
		d.exitCode = cmd.ProcessState.ExitCode()
		close(d.done)
	}()
	t.Cleanup(func() {
		if d.conn != nil {
			d.conn.Close()
		}
		_ = cmd.Process.Kill()
		<-d.done
		if t.Failed() {
			t.Logf("actorlimitd %s logs:\n%s", strings.Join(args, " "), d.logs.String())
		}
	})
	select {
	case line := <-served:
		// "actorlimitd serving gRPC on A, HTTP on B (backend)"
		if _, err := fmt.Sscanf(line, "actorlimitd serving gRPC on %s HTTP on %s", &d.grpc, &d.http); err != nil {
			return nil, fmt.Errorf("reading %q: %w", line, err)
		}
		d.grpc = strings.TrimSuffix(d.grpc, ",")
		return d, nil
	case <-d.done:
		return d, fmt.Errorf("actorlimitd exited with %d before serving:\n%s", d.exitCode, d.logs.String())
	case <-time.After(30 * time.Second):
		return nil, fmt.Errorf("actorlimitd did not serve within 30 s:\n%s", d.logs.String())
	}
}

// client returns a RateLimitService client of d.
func (d *daemon) client() rlsv3.RateLimitServiceClient {
	d.t.Helper()
	if d.conn == nil {
		conn, err := grpc.NewClient(d.grpc, grpc.WithTransportCredentials(insecure.NewCredentials()))
		require.NoError(d.t, err)
		d.conn = conn
	}
	return rlsv3.NewRateLimitServiceClient(d.conn)
}

// ask sends one request over gRPC.
func (d *daemon) ask(req *rlsv3.RateLimitRequest) (*rlsv3.RateLimitResponse, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	return d.client().ShouldRateLimit(ctx, req)
}

// get returns the status and body of GET path on d's HTTP listener.
func (d *daemon) get(path string) (int, string) {
	d.t.Helper()
	resp, err := http.Get("http://" + d.http + path)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(b)
}

// getDebug returns the status and body of GET path on d's debug listener.
func (d *daemon) getDebug(path string) (int, string) {
	d.t.Helper()
	require.NotEmpty(d.t, d.debug, "no debug listener")
	resp, err := http.Get("http://" + d.debug + path)
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(b)
}

// post returns the status and body of POST /json with body.
func (d *daemon) post(body string) (int, string) {
	d.t.Helper()
	resp, err := http.Post("http://"+d.http+"/json", "application/json", strings.NewReader(body))
	require.NoError(d.t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	require.NoError(d.t, err)
	return resp.StatusCode, string(b)
}

// signal sends sig to d.
func (d *daemon) signal(sig syscall.Signal) {
	d.t.Helper()
	require.NoError(d.t, d.cmd.Process.Signal(sig))
}

// wait waits for d to exit, at most timeout, and returns its exit code.
func (d *daemon) wait(timeout time.Duration) int {
	d.t.Helper()
	select {
	case <-d.done:
		return d.exitCode
	case <-time.After(timeout):
		d.t.Fatalf("actorlimitd did not exit within %v", timeout)
		return -1
	}
}

// eventually polls cond every 20 ms until it holds or within passes, and
// returns how long it took.
func eventually(t *testing.T, within time.Duration, what string, cond func() bool) time.Duration {
	t.Helper()
	start := time.Now()
	for !cond() {
		if time.Since(start) > within {
			t.Fatalf("%s: not within %v", what, within)
		}
		time.Sleep(20 * time.Millisecond) // polling a process, not waiting for a window
	}
	return time.Since(start)
}

func desc(kv ...string) *ratelimitv3.RateLimitDescriptor {
	d := &ratelimitv3.RateLimitDescriptor{}
	for i := 0; i+1 < len(kv); i += 2 {
		d.Entries = append(d.Entries, &ratelimitv3.RateLimitDescriptor_Entry{Key: kv[i], Value: kv[i+1]})
	}
	return d
}

func request(domain string, ds ...*ratelimitv3.RateLimitDescriptor) *rlsv3.RateLimitRequest {
	return &rlsv3.RateLimitRequest{Domain: domain, Descriptors: ds}
}

// writeFile writes text to path.
func writeFile(t *testing.T, path, text string) {
	t.Helper()
	require.NoError(t, os.WriteFile(path, []byte(text), 0o644))
}

// transports are -grpc-transport's values.
var transports = []string{transportGRPC, transportDirect}

// forTransports runs test once a transport, as a subtest named after it.
func forTransports(t *testing.T, test func(t *testing.T, transport string)) {
	for _, tr := range transports {
		t.Run("transport="+tr, func(t *testing.T) { test(t, tr) })
	}
}
