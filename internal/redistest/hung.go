package redistest

import (
	"io"
	"net"
	"testing"
)

// Hung returns the address of a TCP listener on loopback that accepts
// connections, reads what they send and never answers: a Redis that hangs.
// It is closed when t ends.
func Hung(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("redistest: %v", err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() { _, _ = io.Copy(io.Discard, c); _ = c.Close() }()
		}
	}()
	return ln.Addr().String()
}
