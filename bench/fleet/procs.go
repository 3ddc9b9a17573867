package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	rlqsv3 "github.com/envoyproxy/go-control-plane/envoy/service/rate_limit_quota/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/types/known/durationpb"

	"github.com/actorlimit/actorlimit/bench/internal/promtext"
	"github.com/actorlimit/actorlimit/quota"
)

// Procs makes a run go against actorlimitd processes in a cluster instead
// of an in-process server: RunProcs.
type Procs struct {
	// N is how many processes (3 if 0); Binary the actorlimitd program
	// (BuildActorlimitd's if empty).
	N      int
	Binary string
	// KillAt, if above 0, is when the simulator SIGKILLs process Kill, or
	// the one that owns the bucket (by its actorlimitd_quota_owned_buckets)
	// if Kill is below 0.
	KillAt time.Duration
	Kill   int
	// DeadAfter is the processes' -cluster-dead-after (2 s if 0): how
	// long the others take to drop a killed process and take over what
	// it owned.
	DeadAfter time.Duration
	// Log, if set, gets the processes' output (their logs) as they write it.
	Log io.Writer
}

// Kill is what a multi-process run's kill did, and the windows it covers:
// those that overlap [At, Until), Until being At + DeadAfter + 2 TTL (the
// cluster drops the dead process, and a new owner grants no rise for its
// first TTL/2; the others' grants and the dead one's Envoys' assignments
// live a TTL).
type Kill struct {
	At    time.Duration
	Until time.Duration
	// Proc is the process killed; Owner whether it owned the bucket.
	Proc  int
	Owner bool
	// Envoys is how many Envoys were connected to it, and Shares their
	// shares then, in requests per second (what they may go on applying
	// for a TTL); TTL the rule's.
	Envoys int
	Shares float64
	TTL    time.Duration
	// Moved is the time from the kill until each of its Envoys had an
	// assignment from another process (-1: one never did); Converge until
	// every share was within 5% of max-min fair again (-1: never).
	Moved, Converge time.Duration
	// Excess is the requests admitted over the limit in the kill's
	// windows, summed; Bound one TTL's worth of the killed process's
	// Envoys' shares (Shares × TTL), what the issue allows.
	Excess, Bound float64
	// MaxOver is the largest admitted/limit of the kill's windows.
	MaxOver float64
}

// killWindow reports whether a window starting at start, of interval,
// overlaps k's windows.
func (k *Kill) killWindow(start, interval time.Duration) bool {
	return k != nil && start+interval > k.At && start < k.Until
}

// BuildActorlimitd builds this repository's cmd/actorlimitd into dir and
// returns the program's path. The repository is found from this source
// file's path, so it works from a checkout (go run, go test), not from a
// binary built elsewhere.
func BuildActorlimitd(dir string) (string, error) {
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		return "", errors.New("fleet: cannot tell where the repository is: give the actorlimitd program")
	}
	root := filepath.Join(filepath.Dir(file), "..", "..")
	if _, err := os.Stat(filepath.Join(root, "cmd", "actorlimitd")); err != nil {
		return "", fmt.Errorf("fleet: no cmd/actorlimitd in %s: give the actorlimitd program: %w", root, err)
	}
	out := filepath.Join(dir, "actorlimitd")
	cmd := exec.Command("go", "build", "-o", out, "./cmd/actorlimitd")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("fleet: go build ./cmd/actorlimitd: %w\n%s", err, b)
	}
	return out, nil
}

// process is one actorlimitd of a run.
type process struct {
	cmd               *exec.Cmd
	out               *syncBuffer
	done              chan struct{}
	grpc, http, debug string
}

// syncBuffer is a program's output, kept (its first MiB) for an error.
type syncBuffer struct {
	mu  sync.Mutex
	b   bytes.Buffer
	log io.Writer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.log != nil {
		_, _ = s.log.Write(p)
	}
	if s.b.Len() < 1<<20 {
		s.b.Write(p)
	}
	return len(p), nil
}

func (s *syncBuffer) tail() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	b := s.b.Bytes()
	if len(b) > 4000 {
		b = b[len(b)-4000:]
	}
	return string(b)
}

// freePorts returns n loopback ports that were free a moment ago.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	var out []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		out = append(out, l.Addr().(*net.TCPAddr).Port)
	}
	return out, nil
}

// startProcesses starts p.N actorlimitd processes in one cluster (found
// through -cluster-peers on loopback) with the rule file config, and
// returns them once each counts p.N members.
func startProcesses(p Procs, config string) ([]*process, error) {
	ports, err := freePorts(5 * p.N)
	if err != nil {
		return nil, err
	}
	var peers []string
	for i := range p.N {
		peers = append(peers, "127.0.0.1:"+strconv.Itoa(ports[5*i+4]))
	}
	addr := func(port int) string { return "127.0.0.1:" + strconv.Itoa(port) }
	name := "rlqssim" + strconv.Itoa(ports[0])
	var ps []*process
	for i := range p.N {
		at := ports[5*i:]
		pr := &process{out: &syncBuffer{log: p.Log}, done: make(chan struct{}), grpc: addr(at[0]), http: addr(at[1]), debug: addr(at[2])}
		pr.cmd = exec.Command(p.Binary, "-config", config, "-grpc-addr", pr.grpc, "-http-addr", pr.http, "-debug-addr", pr.debug,
			"-secret-descriptor-keys", "", "-cluster-name", name, "-cluster-port", strconv.Itoa(at[3]),
			"-cluster-peers", strings.Join(peers, ","), "-cluster-peer-port", strconv.Itoa(at[4]),
			"-cluster-dead-after", p.DeadAfter.String())
		pr.cmd.Stdout, pr.cmd.Stderr = pr.out, pr.out
		if err := pr.cmd.Start(); err != nil {
			stopProcesses(ps)
			return nil, fmt.Errorf("fleet: starting %s: %w", p.Binary, err)
		}
		go func() { _ = pr.cmd.Wait(); close(pr.done) }()
		ps = append(ps, pr)
	}
	c := &http.Client{Timeout: time.Second}
	deadline := time.Now().Add(60 * time.Second)
	for i, pr := range ps {
		for promtext.Value(c, pr.debug, "actorlimitd_cluster_members") != float64(p.N) {
			select {
			case <-pr.done:
				stopProcesses(ps)
				return nil, fmt.Errorf("fleet: actorlimitd %d exited (%v):\n%s", i, pr.cmd.ProcessState, pr.out.tail())
			default:
			}
			if time.Now().After(deadline) {
				stopProcesses(ps)
				return nil, fmt.Errorf("fleet: actorlimitd %d does not count %d members after 60 s:\n%s", i, p.N, pr.out.tail())
			}
			time.Sleep(50 * time.Millisecond) // polling a process
		}
	}
	return ps, nil
}

// stopProcesses stops ps: SIGTERM, then SIGKILL after 5 s.
func stopProcesses(ps []*process) {
	for _, pr := range ps {
		_ = pr.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, pr := range ps {
		select {
		case <-pr.done:
		case <-time.After(5 * time.Second):
			_ = pr.cmd.Process.Kill()
			<-pr.done
		}
	}
}

// penvoy is a simulated Envoy of a multi-process run: the enforcing
// envoy, and its stream to one of the processes, which its own goroutine
// (connect) opens, reads, and opens again to another process when it
// breaks.
type penvoy struct {
	*envoy

	smu        sync.Mutex // guards what follows, written by connect too
	st         grpc.BidiStreamingClient[rlqsv3.RateLimitQuotaUsageReports, rlqsv3.RateLimitQuotaResponse]
	proc       int           // the process it is, or was last, connected to
	acts       int           // responses received since its last (re)connection
	allowed    uint64        // since its last report (shadows envoy's: this one is guarded by smu)
	denied     uint64        // since its last report
	lastReport time.Duration // when it last reported; -1: never
	reported   bool          // the stream has had its first report (with the domain)
	gone       bool          // it left the fleet: no reconnection
	cancel     context.CancelFunc
	nextReport time.Duration
	done       chan struct{} // closed when connect returns
}

// psim is one multi-process run's state.
type psim struct {
	cfg    Config
	p      Procs
	ps     []*process
	rule   *quota.Rule
	start  time.Time
	ctx    context.Context
	envoys []*penvoy

	sent atomic.Int64 // reports sent

	mu   sync.Mutex // guards down
	down []bool
}

// RunProcs runs one simulation against p.N actorlimitd processes in a
// cluster, in real time: the processes have their own clocks. Envoy i's
// stream goes to process i mod p.N; when a stream breaks, the Envoy goes
// on applying its last assignment (until it expires, then
// cfg.Expired) and opens a stream to the next process that is up, with
// its usage since its last report: a model of Envoy's client, whose own
// reconnection timing may differ. cfg.Tick is
// the simulator's step (10 ms if 0); a window is a reporting interval.
func RunProcs(cfg Config, p Procs) (*Result, error) {
	if err := cfg.check(); err != nil {
		return nil, err
	}
	if p.N == 0 {
		p.N = 3
	}
	if p.N < 2 || (p.KillAt > 0 && p.Kill >= p.N) {
		return nil, fmt.Errorf("fleet: %d processes, kill %d: want at least 2 processes and a kill among them", p.N, p.Kill)
	}
	if p.DeadAfter <= 0 {
		p.DeadAfter = 2 * time.Second
	}
	if cfg.Tick <= 0 {
		cfg.Tick = 10 * time.Millisecond
	}
	qc, err := quota.Parse(map[string][]byte{"sim.yaml": []byte(cfg.rule())})
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "rlqssim")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if p.Binary == "" {
		if p.Binary, err = BuildActorlimitd(dir); err != nil {
			return nil, err
		}
	}
	config := filepath.Join(dir, "sim.yaml")
	if err := os.WriteFile(config, []byte(cfg.rule()), 0o600); err != nil {
		return nil, err
	}
	ps, err := startProcesses(p, config)
	if err != nil {
		return nil, err
	}
	defer stopProcesses(ps)
	ctx, cancel := context.WithCancel(context.Background())
	s := &psim{cfg: cfg, p: p, ps: ps, rule: qc.Rules()[0], ctx: ctx, down: make([]bool, p.N)}
	for i := range cfg.Envoys {
		s.envoys = append(s.envoys, &penvoy{envoy: &envoy{i: i}, proc: i % p.N, lastReport: -1})
	}
	defer func() {
		cancel()
		for _, e := range s.envoys {
			if e.done != nil {
				<-e.done
			}
		}
	}()
	return s.run()
}

// isDown reports whether process i was killed.
func (s *psim) isDown(i int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.down[i]
}

// up returns the process up from i on, round the ring, that has the
// fewest Envoys connected: where a load balancer sends a new stream.
func (s *psim) up(i int) int {
	load := make([]int, len(s.ps))
	for _, e := range s.envoys {
		e.smu.Lock()
		if e.st != nil {
			load[e.proc]++
		}
		e.smu.Unlock()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	best := -1
	for k := range len(s.down) {
		if j := (i + k) % len(s.down); !s.down[j] && (best < 0 || load[j] < load[best]) {
			best = j
		}
	}
	if best < 0 {
		return i % len(s.down)
	}
	return best
}

// connect is Envoy e's stream: it opens one to process e.proc (the next
// up if that fails), sends its first report, applies what it receives,
// and when the stream breaks opens one to the next process up, until the
// run ends or e leaves.
func (s *psim) connect(e *penvoy) {
	defer close(e.done)
	client := func(addr string) (*grpc.ClientConn, error) {
		return grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	}
	next, first := e.proc, true
	for s.ctx.Err() == nil {
		p := next
		if !first || s.isDown(p) {
			p = s.up(next)
		}
		first = false
		cc, err := client(s.ps[p].grpc)
		if err != nil {
			return // only a bad address fails here
		}
		ctx, cancel := context.WithCancel(s.ctx)
		st, err := rlqsv3.NewRateLimitQuotaServiceClient(cc).StreamRateLimitQuotas(ctx)
		if err == nil {
			e.smu.Lock()
			if e.gone {
				e.smu.Unlock()
				cancel()
				_ = cc.Close()
				return
			}
			e.st, e.cancel, e.proc, e.reported, e.acts = st, cancel, p, false, 0
			err = s.send(e, time.Since(s.start))
			e.smu.Unlock()
		}
		if err == nil {
			for {
				r, err := st.Recv()
				if err != nil {
					break
				}
				now := time.Now()
				for _, a := range r.GetBucketAction() {
					e.apply(a, now, s.cfg.CarryTokens)
				}
				e.smu.Lock()
				e.acts++
				e.smu.Unlock()
			}
		}
		cancel()
		_ = cc.Close()
		e.smu.Lock()
		e.st = nil
		gone := e.gone
		e.smu.Unlock()
		if gone {
			return
		}
		next = p + 1
		time.Sleep(10 * time.Millisecond) // pacing reconnections, as Envoy's backoff does
	}
}

// send reports e's usage since its last report, at t. e.smu is held.
func (s *psim) send(e *penvoy, t time.Duration) error {
	elapsed := time.Duration(0)
	if e.lastReport >= 0 {
		elapsed = t - e.lastReport
	}
	msg := &rlqsv3.RateLimitQuotaUsageReports{BucketQuotaUsages: []*rlqsv3.RateLimitQuotaUsageReports_BucketQuotaUsage{{
		BucketId: &rlqsv3.BucketId{Bucket: bucketID}, TimeElapsed: durationpb.New(elapsed),
		NumRequestsAllowed: e.allowed, NumRequestsDenied: e.denied}}}
	if !e.reported {
		msg.Domain = domain
		e.reported = true
	}
	e.allowed, e.denied, e.lastReport = 0, 0, t
	s.sent.Add(1)
	return e.st.Send(msg)
}

// join starts e's life in the fleet at t.
func (s *psim) join(e *penvoy, t time.Duration) {
	e.present = true
	// Its reports come at its phase of each interval, as in process.
	e.nextReport = time.Duration(e.i) * s.cfg.Interval / time.Duration(s.cfg.Envoys)
	for e.nextReport <= t {
		e.nextReport += s.cfg.Interval
	}
	e.done = make(chan struct{})
	go s.connect(e)
}

// leave ends e's stream for good.
func (s *psim) leave(e *penvoy) {
	e.present = false
	e.smu.Lock()
	e.gone = true
	if e.cancel != nil {
		e.cancel()
	}
	e.smu.Unlock()
}

func (s *psim) run() (*Result, error) {
	cfg := s.cfg
	res := newResult(len(cfg.Changes))
	rate := float64(cfg.LimitPerMinute) / 60
	margin := s.rule.Margin
	tick := time.NewTicker(cfg.Tick)
	defer tick.Stop()
	s.start = time.Now()
	window := func(start time.Duration) *Window {
		return &Window{Start: start, Rate: rate, Limit: rate * cfg.Interval.Seconds(), Envoys: make([]EnvoyWindow, cfg.Envoys)}
	}
	w := window(0)
	var last, wake time.Duration
	var kill *Kill
	for {
		now := time.Now()
		t := now.Sub(s.start)
		res.MaxStep = max(res.MaxStep, t-wake)
		wake = t
		// A step at each tick's time up to now, the ticks the loop missed
		// (the machine's load stalls it) included, and at each window's
		// end: the Envoys' requests come on time, and a window holds what
		// their demand brought in it.
		for {
			u := min((last/cfg.Tick+1)*cfg.Tick, w.Start+cfg.Interval)
			if u > t {
				break
			}
			s.step(w, u, s.start.Add(u), u-last)
			last = u
			if u == w.Start+cfg.Interval {
				s.closeWindow(w, u, s.start.Add(u), rate, margin)
				res.Windows = append(res.Windows, *w)
				w = window(u)
			}
		}
		if w.Start >= cfg.Duration {
			break
		}
		if s.p.KillAt > 0 && kill == nil && t >= s.p.KillAt {
			var err error
			if kill, err = s.kill(t); err != nil {
				return nil, err
			}
			res.Kill = kill
		}
		for i, c := range cfg.Changes {
			if res.Converge[i] < 0 && t >= c && s.converged(t, now, rate, margin) {
				res.Converge[i] = t - c
			}
		}
		if kill != nil {
			if kill.Moved < 0 && s.moved(kill.Proc) {
				kill.Moved = t - kill.At
			}
			// Converged once its Envoys are assigned elsewhere: until then
			// they apply the shares they had, which were fair.
			if kill.Moved >= 0 && kill.Converge < 0 && s.converged(t, now, rate, margin) {
				kill.Converge = t - kill.At
			}
		}
		<-tick.C
	}
	if kill != nil {
		for _, w := range res.Windows {
			if kill.killWindow(w.Start, cfg.Interval) {
				kill.Excess += math.Max(0, float64(w.Admitted)-w.Limit)
				kill.MaxOver = math.Max(kill.MaxOver, float64(w.Admitted)/w.Limit)
			}
		}
	}
	res.Reports = s.sent.Load()
	return res, nil
}

// step moves the fleet on by dt to t (now on the clock, at most the
// real clock's now), counting what
// its Envoys admit in w: joins and leaves, demand, admission, reports.
func (s *psim) step(w *Window, t time.Duration, now time.Time, dt time.Duration) {
	for _, e := range s.envoys {
		d := s.cfg.Demand(e.i, t)
		switch {
		case d >= 0 && !e.present && !e.gone:
			s.join(e, t)
		case d < 0 && e.present:
			s.leave(e)
		}
		if !e.present {
			continue
		}
		e.acc += d * dt.Seconds()
		n := int(e.acc)
		e.acc -= float64(n)
		k := e.admit(n, now, &s.cfg)
		w.Admitted += k
		w.Envoys[e.i].Admitted += k
		e.smu.Lock()
		e.allowed += uint64(k)
		e.denied += uint64(n - k)
		if t >= e.nextReport {
			if e.st != nil {
				_ = s.send(e, t) // a broken stream is connect's to mend
			}
			for e.nextReport <= t {
				e.nextReport += s.cfg.Interval
			}
		}
		e.smu.Unlock()
	}
}

// kill SIGKILLs a process at t: s.p.Kill, or the bucket's owner.
func (s *psim) kill(t time.Duration) (*Kill, error) {
	k := &Kill{At: t, Proc: s.p.Kill, TTL: s.rule.TTL, Moved: -1, Converge: -1}
	k.Until = t + s.p.DeadAfter + 2*k.TTL
	c := &http.Client{Timeout: 3 * time.Second} // a loaded machine answers late
	for i, pr := range s.ps {
		if promtext.Value(c, pr.debug, "actorlimitd_quota_owned_buckets") >= 1 {
			k.Owner = k.Proc == i
			if k.Proc < 0 {
				k.Proc, k.Owner = i, true
			}
		}
	}
	if k.Proc < 0 {
		k.Proc = 0 // no process says it owns the bucket: kill the first
	}
	now := time.Now()
	for _, e := range s.envoys {
		e.smu.Lock()
		if e.present && e.st != nil && e.proc == k.Proc {
			k.Envoys++
			k.Shares += e.share(now, &s.cfg)
		}
		e.smu.Unlock()
	}
	k.Bound = k.Shares * k.TTL.Seconds()
	s.mu.Lock()
	s.down[k.Proc] = true
	s.mu.Unlock()
	if err := s.ps[k.Proc].cmd.Process.Signal(syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("fleet: killing actorlimitd %d: %w", k.Proc, err)
	}
	return k, nil
}

// moved reports whether every present Envoy is on a process other than
// dead and has had an assignment there.
func (s *psim) moved(dead int) bool {
	for _, e := range s.envoys {
		e.smu.Lock()
		ok := !e.present || (e.st != nil && e.proc != dead && e.acts > 0)
		e.smu.Unlock()
		if !ok {
			return false
		}
	}
	return true
}

// presentDemands returns the present Envoys and their demands at t.
func (s *psim) presentDemands(t time.Duration) ([]*penvoy, []float64) {
	var es []*penvoy
	var ds []float64
	for _, e := range s.envoys {
		if d := s.cfg.Demand(e.i, t); e.present && d >= 0 {
			es = append(es, e)
			ds = append(ds, d)
		}
	}
	return es, ds
}

// converged is sim.converged's test over the processes' Envoys (none
// present yet: not converged).
func (s *psim) converged(t time.Duration, now time.Time, rate, margin float64) bool {
	es, ds := s.presentDemands(t)
	if len(es) == 0 {
		return false
	}
	fair := Fair(rate, margin, ds)
	equal := rate / float64(len(es))
	for j, e := range es {
		if math.Abs(e.share(now, &s.cfg)-fair[j]) > 0.05*math.Max(fair[j], equal) {
			return false
		}
	}
	return true
}

// closeWindow fills w's demand, shares, fair shares and processes at its
// end t (now on the clock).
func (s *psim) closeWindow(w *Window, t time.Duration, now time.Time, rate, margin float64) {
	es, ds := s.presentDemands(t - 1)
	for j, f := range Fair(rate, margin, ds) {
		e := es[j]
		ew := &w.Envoys[e.i]
		ew.Present, ew.Demand, ew.Fair, ew.Share = true, ds[j], f, e.share(now, &s.cfg)
		ew.Changes = e.newChanges()
		e.smu.Lock()
		ew.Proc = e.proc
		e.smu.Unlock()
		w.Demand += ds[j]
	}
}
