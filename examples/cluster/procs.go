package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/actorlimit/actorlimit/cluster"
)

// A -procs run: the parent starts this program once per member with
// -member i and -ports (each member's remote port, then each member's
// automanaged port), reads "ready" from each on its stdout, writes
// "start <Unix ns>" to each one's stdin, and reads back "w <window>
// <offered> <allowed>" lines, one per window.

// memberEnv is set in the members' environment: a test binary that finds
// it runs main, as this program would.
const memberEnv = "ACTORLIMIT_EXAMPLE_MEMBER"

// runProcs runs the three members as three OS processes and returns what
// each did in each window.
func runProcs(s settings) ([][]tally, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	ports, err := freePorts(2 * members)
	if err != nil {
		return nil, err
	}
	var list []string
	for _, p := range ports {
		list = append(list, strconv.Itoa(p))
	}
	type line struct {
		member int
		f      []string
	}
	lines := make(chan line)
	var stdins []io.WriteCloser
	var cmds []*exec.Cmd
	defer func() {
		for i, c := range cmds {
			_ = stdins[i].Close()
			_ = c.Process.Kill()
			_ = c.Wait()
		}
	}()
	for i := range members {
		cmd := exec.Command(exe, append(s.args(), "-member", strconv.Itoa(i), "-ports", strings.Join(list, ","))...)
		cmd.Env = append(os.Environ(), memberEnv+"=1")
		cmd.Stderr = os.Stderr
		out, err := cmd.StdoutPipe()
		if err != nil {
			return nil, err
		}
		in, err := cmd.StdinPipe()
		if err != nil {
			return nil, err
		}
		if err := cmd.Start(); err != nil {
			return nil, err
		}
		cmds, stdins = append(cmds, cmd), append(stdins, in)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				lines <- line{i, strings.Fields(sc.Text())}
			}
			lines <- line{i, nil} // the member exited
		}()
	}
	counts := make([][]tally, members)
	for i := range counts {
		counts[i] = make([]tally, s.windows)
	}
	timeout := time.After(time.Minute + time.Duration(s.windows)*s.policy.Period)
	for ready, exited := 0, 0; exited < members; {
		var l line
		select {
		case l = <-lines:
		case <-timeout:
			return nil, fmt.Errorf("timed out: %d members ready, %d done", ready, exited)
		}
		switch {
		case l.f == nil:
			exited++
		case l.f[0] == "ready":
			if ready++; ready == members {
				// A whole window from now, so each window is whole.
				start := windowAfter(time.Now().Add(max(s.policy.Period, time.Second)), s.policy.Period, 1)
				for _, in := range stdins {
					fmt.Fprintln(in, "start", start.UnixNano())
				}
				fmt.Fprintf(os.Stderr, "3 processes (pids %d, %d, %d) ready; load from %s\n",
					cmds[0].Process.Pid, cmds[1].Process.Pid, cmds[2].Process.Pid, start.Format("15:04:05.000"))
			}
		case l.f[0] == "w" && len(l.f) == 4:
			w, _ := strconv.Atoi(l.f[1])
			offered, _ := strconv.ParseInt(l.f[2], 10, 64)
			allowed, _ := strconv.ParseInt(l.f[3], 10, 64)
			if w >= 0 && w < s.windows {
				counts[l.member][w] = tally{offered: offered, allowed: allowed}
			}
		case l.f[0] == "err":
			fmt.Fprintf(os.Stderr, "member %d: %s\n", l.member+1, strings.Join(l.f[1:], " "))
		}
	}
	return counts, nil
}

// args are the flags that give a member s.
func (s settings) args() []string {
	mode := "local-first"
	if s.mode == cluster.Owner {
		mode = "owner"
	}
	return []string{
		"-mode", mode, "-limit", strconv.FormatInt(s.policy.Limit, 10), "-window", s.policy.Period.String(),
		"-windows", strconv.Itoa(s.windows), "-rate", strconv.Itoa(s.rate), "-sync", s.syncEvery.String(),
		"-strict=" + strconv.FormatBool(s.strict),
	}
}

// runMember is member i of a -procs run.
func runMember(s settings, i int, portList string) error {
	var ports []int
	for _, p := range strings.Split(portList, ",") {
		n, err := strconv.Atoi(p)
		if err != nil {
			return fmt.Errorf("-ports: %w", err)
		}
		ports = append(ports, n)
	}
	if len(ports) != 2*members || i >= members {
		return errors.New("-ports: not one remote and one automanaged port per member, or -member too large")
	}
	var seeds []string
	for j := range members {
		seeds = append(seeds, fmt.Sprintf("127.0.0.1:%d", ports[members+j]))
	}
	m, err := cluster.Start(cluster.Config{
		Name: "example-procs",
		Port: ports[i],
		// The automanaged provider, its health endpoint on loopback only.
		AutoManaged: &cluster.AutoManaged{Port: ports[members+i], Hosts: seeds, Refresh: 200 * time.Millisecond},
		Mode:        s.mode,
		SyncEvery:   s.syncEvery,
		Strict:      s.strict,
	})
	if err != nil {
		return err
	}
	defer m.Limiter.Close()
	for deadline := time.Now().Add(30 * time.Second); len(m.Members()) < members; {
		if time.Now().After(deadline) {
			return fmt.Errorf("member %d sees %v", i+1, m.Members())
		}
		time.Sleep(50 * time.Millisecond) // the members find each other
	}
	fmt.Println("ready")
	var start int64
	if _, err := fmt.Fscanf(os.Stdin, "start %d\n", &start); err != nil {
		return fmt.Errorf("reading the start: %w", err)
	}
	counts := drive(m, s, time.Unix(0, start), func(err error) { fmt.Println("err", err) })
	for w, c := range counts {
		fmt.Println("w", w, c.offered, c.allowed)
	}
	return nil
}

// freePorts returns n ports free on 127.0.0.1 now.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
