// Command httpserver serves the HTTP benchmarks' handler
// (internal/httpbench.Handler: 200 and a short body) for a load generator,
// with or without actorlimit's middleware. wrk.sh runs it.
//
//	httpserver -limit=actorlimit -addr=127.0.0.1:0
//
// -limit=none serves the handler alone; -limit=actorlimit puts httpadapter
// in front of it with one block rule per client IP whose limit (2^40 an
// hour) is never reached. It prints "listening on HOST:PORT" once it
// accepts connections (with port 0 the system picks a free one), and stops
// on SIGINT or SIGTERM.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/bench/internal/httpbench"
)

func main() {
	limit := flag.String("limit", "none", "middleware in front of the handler: none or actorlimit")
	addr := flag.String("addr", "127.0.0.1:0", "address to listen on (port 0: a free port)")
	flag.Parse()
	if err := run(*limit, *addr); err != nil {
		log.Fatal("httpserver: ", err)
	}
}

func run(limit, addr string) error {
	h := httpbench.Handler()
	switch limit {
	case "none":
	case "actorlimit":
		lim, err := actorlimit.Start()
		if err != nil {
			return err
		}
		defer lim.Close()
		mw, err := httpbench.Actorlimit(lim, 1<<40, time.Hour)
		if err != nil {
			return err
		}
		h = mw(h)
	default:
		return fmt.Errorf("-limit=%q: want none or actorlimit", limit)
	}

	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 10 * time.Second}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Printf("listening on %s\n", ln.Addr())

	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdown); err != nil {
		return err
	}
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}
