package unary

import (
	"context"
	"sync"
	"time"
)

// stream is one call. Its fields other than mu's are the connection's,
// guarded by conn.mu, except what the handler's goroutine reads: method,
// handler and req, set before it starts and not changed until it ends.
//
// A stream's states (conn.mu held for every move):
//
//	open      headers read, request arriving            (reader)
//	ready     END_STREAM read, handler running          (reader dispatches)
//	blocked   answer partly written, waiting for window (handler -> reader drains)
//	gone      answered, reset or refused: not in the map (any)
//
// A handler that ends on a gone stream drops its answer.
type stream struct {
	c       *conn
	id      uint32
	method  string
	handler Handler
	subtype string
	req     *[]byte  // the request's bytes, prefix included (pooled)
	px      *proxied // a call proxied to the fallback; nil for a handler's

	recvWindow int32 // what the client may still send on the stream
	unacked    int32 // read and not yet given back by WINDOW_UPDATE
	sendWindow int64 // what the server may still send
	msgLen     int   // the message's length from its prefix, -1 before
	ended      bool  // END_STREAM read
	started    bool  // the handler runs (or ran)
	finished   bool  // the handler returned
	orphan     bool  // gone while its handler ran
	gone       bool

	out    *[]byte // the answer being written (pooled)
	outMsg []byte  // its message
	prefix [5]byte // its gRPC prefix
	outOff int     // what went, prefix included

	// The call's context.
	mu       sync.Mutex
	done     chan struct{}
	err      error
	deadline time.Time
	timer    *time.Timer
}

var _ context.Context = (*stream)(nil)

// closedChan is the Done of a stream ended before anyone asked for it.
var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// Deadline is the call's grpc-timeout's end, if it has one.
func (st *stream) Deadline() (time.Time, bool) { return st.deadline, !st.deadline.IsZero() }

// Done is closed when the call ends: reset, past its deadline, or its
// connection closed.
func (st *stream) Done() <-chan struct{} {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.done == nil {
		if st.err != nil {
			st.done = closedChan
		} else {
			st.done = make(chan struct{})
		}
	}
	return st.done
}

// Err is nil until Done is closed, then context.Canceled or
// context.DeadlineExceeded.
func (st *stream) Err() error {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.err
}

// Value is Config.BaseContext's (the stream keeps no copy: 16 bytes less
// a call, the stream's size class).
func (st *stream) Value(key any) any { return st.c.cfg.BaseContext.Value(key) }

// cancel ends the call's context with err, once.
func (st *stream) cancel(err error) {
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.err != nil {
		return
	}
	st.err = err
	if st.done != nil && st.done != closedChan {
		close(st.done)
	}
	if st.timer != nil {
		st.timer.Stop()
	}
}

// Buffers of requests and answers: pooled by size class, a class four
// times the one below, from 4 KiB to 4 MiB (a request's buffer is sized
// from its prefix at once, as grpc-go's are; a flood of large requests
// then reuses them).
const (
	pooledBuf  = 4 << 10
	maxPooled  = 4 << 20
	bufClasses = 6 // 4K, 16K, 64K, 256K, 1M, 4M
)

var bufPools [bufClasses]sync.Pool

// class is the pool of buffers of capacity at least n, and that capacity;
// -1 past the largest.
func class(n int) (int, int) {
	size := pooledBuf
	for i := range bufClasses {
		if n <= size {
			return i, size
		}
		size <<= 2
	}
	return -1, n
}

// getBuf returns an empty buffer of capacity pooledBuf at least.
func getBuf() *[]byte { return getSized(pooledBuf) }

// getSized returns an empty buffer of capacity n at least.
func getSized(n int) *[]byte {
	i, size := class(n)
	if i >= 0 {
		if b, ok := bufPools[i].Get().(*[]byte); ok {
			return b
		}
	}
	b := make([]byte, 0, size)
	return &b
}

// putBuf gives a buffer back to its pool, the class its capacity fills.
func putBuf(b *[]byte) {
	if b == nil || cap(*b) < pooledBuf || cap(*b) > maxPooled {
		return
	}
	i, size := class(cap(*b))
	if size != cap(*b) {
		i-- // a buffer between classes serves the one below
	}
	if i < 0 {
		return
	}
	*b = (*b)[:0]
	bufPools[i].Put(b)
}
