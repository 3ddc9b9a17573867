package testkit

import (
	"bytes"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// A kill -9 test runs a child process (the test binary itself, running
// one test that does the work only when its environment says so) that
// writes each decision its callers are told to stdout, one line each:
// "id allowed count unix-ns", in whole lines of atomic writes. The parent
// reads the output raw (so that reading never slows the child down), kills
// the child with SIGKILL when it is due, restarts the work on what the
// child left behind and compares with what the child's callers were told.

// PipeBuf is the size up to which a write to a pipe is atomic: a child's
// callers write whole lines in writes no larger.
const PipeBuf = 4096

// Child is a kill -9 child to run: Test is the test the child runs (an
// anchored -test.run pattern), Env is added to the child's environment,
// and Due says, after the child's first output at started, whether it is
// time to kill it (GiveUp after started, it is killed anyway).
type Child struct {
	Test   string
	Env    []string
	Due    func(started time.Time) bool
	GiveUp time.Duration
}

// Killed is what a killed child left: all it wrote, when its output began
// and when it was killed, and whether it was killed because the parent
// gave up waiting for Due.
type Killed struct {
	Data            []byte
	Started, Killed time.Time
	GaveUp          bool
}

// RunChild runs c and kills it with SIGKILL once it is due. It fails t if
// the child stopped before it was killed.
func RunChild(t testing.TB, c Child) Killed {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run="+c.Test, "-test.count=1")
	cmd.Env = append(os.Environ(), c.Env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("testkit: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("testkit: %v", err)
	}
	var k Killed
	buf := make([]byte, 1<<16)
	for {
		n, rerr := out.Read(buf)
		k.Data = append(k.Data, buf[:n]...)
		if n > 0 && k.Started.IsZero() {
			k.Started = time.Now() // the child is up and under load
		}
		if !k.Started.IsZero() && k.Killed.IsZero() {
			due := c.Due(k.Started)
			if due || c.GiveUp > 0 && time.Since(k.Started) > c.GiveUp {
				k.Killed, k.GaveUp = time.Now(), !due
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatalf("testkit: %v", err)
				}
			}
		}
		if rerr != nil {
			break
		}
	}
	werr := cmd.Wait()
	if k.Killed.IsZero() {
		t.Fatalf("testkit: the child stopped after %d bytes: %v", len(k.Data), werr)
	}
	return k
}

// Told is what a child's callers were told about one id.
type Told struct {
	Allowed int
	Counts  []int64 // each decision's count
	At      []int64 // when each was told, Unix ns
}

// ParseTold reads a child's lines, by id; a last line cut by the kill is
// left out.
func ParseTold(t testing.TB, data []byte) map[string]*Told {
	t.Helper()
	byID := map[string]*Told{}
	lines := 0
	for line := range bytes.Lines(data) {
		if line[len(line)-1] != '\n' {
			break // a write cut by the kill
		}
		f := bytes.Fields(line)
		if len(f) != 4 {
			t.Fatalf("testkit: line %q", line)
		}
		tl := byID[string(f[0])]
		if tl == nil {
			tl = &Told{}
			byID[string(f[0])] = tl
		}
		if string(f[1]) == "true" {
			tl.Allowed++
		}
		count, err1 := strconv.ParseInt(string(f[2]), 10, 64)
		at, err2 := strconv.ParseInt(string(f[3]), 10, 64)
		if err1 != nil || err2 != nil {
			t.Fatalf("testkit: line %q", line)
		}
		tl.Counts, tl.At = append(tl.Counts, count), append(tl.At, at)
		lines++
	}
	t.Logf("%d told decisions read", lines)
	return byID
}

// Stalled returns the longest time between from and to in which none of
// the child's callers was told anything, less gap: the child did not run
// (a loaded machine gave its processors to others), or was busy. Callers
// are told something every few microseconds while the child runs; gap is
// the pause that is normal (a flush interval), which does not count.
func Stalled(byID map[string]*Told, from, to time.Time, gap time.Duration) time.Duration {
	var at []int64
	for _, tl := range byID {
		for _, ns := range tl.At {
			if ns >= from.UnixNano() && ns <= to.UnixNano() {
				at = append(at, ns)
			}
		}
	}
	slices.Sort(at)
	longest := time.Duration(0)
	for i := 1; i < len(at); i++ {
		longest = max(longest, time.Duration(at[i]-at[i-1]))
	}
	return max(0, longest-gap)
}
