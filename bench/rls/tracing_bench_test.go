package rls

import (
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync/atomic"
	"testing"
)

// traceSink is an OTLP/HTTP collector that accepts every export and
// discards it, counting the exports.
type traceSink struct {
	srv     *httptest.Server
	exports atomic.Int64
}

// startTraceSink starts a traceSink on loopback, closed at tb's cleanup.
func startTraceSink(tb testing.TB) *traceSink {
	s := &traceSink{}
	s.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		if r.Method != http.MethodPost || r.URL.Path != "/v1/traces" {
			http.NotFound(w, r)
			return
		}
		s.exports.Add(1)
		w.Header().Set("Content-Type", "application/x-protobuf")
		w.WriteHeader(http.StatusOK) // an empty ExportTraceServiceResponse: all accepted
	}))
	tb.Cleanup(s.srv.Close)
	return s
}

// startActorlimitdBin starts the actorlimitd program bin on cfg's embedded
// table with extra flags and env (NAME=value, added to this process's) and
// returns its gRPC address.
func startActorlimitdBin(tb testing.TB, bin string, cfg configDir, env []string, extra ...string) string {
	tb.Helper()
	grpcPort, httpPort := freePort(tb), freePort(tb)
	args := append([]string{"-config", cfg.Files, "-grpc-addr", addr(grpcPort), "-http-addr", addr(httpPort),
		"-secret-descriptor-keys", ""}, extra...)
	start(tb, "actorlimitd", bin, args, env, httpOK("http://"+addr(httpPort)+"/healthcheck"))
	return addr(grpcPort)
}

// BenchmarkTracing measures what tracing costs actorlimitd (embedded table,
// benchConfig, three descriptors a request) at 1 and 16 clients: tracing
// off (the default: "off"), on with no request sampled
// (-tracing-sampling-rate 0: "unsampled", a span begun and dropped for
// each request) and on with every request sampled (rate 1: "sampled", the
// spans exported by OTLP/HTTP to a sink that accepts and discards them).
// The three servers are started once and measured in turn, round after
// round (RLS_TRACING_ROUNDS, default 3; each round starts with the next of
// them), so that the machine's load falls on all three alike: run it with
// -count 1 and take each one's median over the rounds. It reports req/s, p50-µs and p99-µs, and for "sampled" the exports
// the sink received (exports, which must be above zero once the batcher
// has had a full batch). RLS_TRACING_BASELINE, the path of an actorlimitd
// built from before tracing was added (0676521^), adds it as "pre-tracing":
// what "off" must not be slower than (it has no -debug-addr: the others
// run with their debug listener off, as it has none).
func BenchmarkTracing(b *testing.B) {
	if !hasActorlimitd() {
		b.Skip("this tree has no cmd/actorlimitd yet")
	}
	cfg := writeConfig(b, map[string]string{"bench.yaml": benchConfig})
	sink := startTraceSink(b)
	otlp := []string{"OTEL_EXPORTER_OTLP_ENDPOINT=" + sink.srv.URL, "OTEL_TRACES_EXPORTER=", "OTEL_TRACES_SAMPLER=", "OTEL_SDK_DISABLED="}
	bin := actorlimitdBinary(b)
	impls := []*rlsImpl{
		{name: "off", addr: startActorlimitdBin(b, bin, cfg, otlp, "-debug-addr", "")},
		{name: "unsampled", addr: startActorlimitdBin(b, bin, cfg, otlp, "-debug-addr", "", "-tracing", "-tracing-sampling-rate", "0")},
		{name: "sampled", addr: startActorlimitdBin(b, bin, cfg, otlp, "-debug-addr", "", "-tracing", "-tracing-sampling-rate", "1")},
	}
	if pre := os.Getenv("RLS_TRACING_BASELINE"); pre != "" {
		impls = append(impls, &rlsImpl{name: "pre-tracing", addr: startActorlimitdBin(b, pre, cfg, nil)})
	}
	b.Cleanup(func() {
		for _, im := range impls {
			im.close()
		}
	})
	var sampled atomic.Int64 // requests sent to "sampled"
	for r := range envInt(b, "RLS_TRACING_ROUNDS", 3) {
		for _, c := range []int{1, 16} {
			for k := range impls {
				im := impls[(k+r)%len(impls)] // each round starts with the next one
				b.Run(fmt.Sprintf("clients=%d/tracing=%s/round=%d", c, im.name, r), func(b *testing.B) {
					workers := im.workers(b, c, 3)
					before := sink.exports.Load()
					res := runLoad(b, b.N, workers, func() {})
					res.report(b)
					if im.name == "sampled" {
						sampled.Add(int64(b.N))
						b.ReportMetric(float64(sink.exports.Load()-before), "exports")
					}
				})
			}
		}
	}
	// The "sampled" server traced: its batcher exports each full batch of
	// 512 spans at once, so a few batches' worth of requests must have
	// reached the sink.
	if n := sampled.Load(); n >= 4*512 && sink.exports.Load() == 0 && !b.Failed() {
		b.Errorf("the trace sink received no export after %d sampled requests: -tracing did not trace", n)
	}
}
