package redisstore

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"
)

// ownIdle is how long the store's own connection may stay unused and still
// be used without a look at its health: past it, the connection goes back
// to the client's pool, and the next round trip takes one from the pool,
// which checks it (go-redis peeks at the socket of every connection it
// hands out: a syscall and three allocations). It is well below the probe
// interval's default, so that a connection Redis closed while the store
// was idle, or during an outage, is never used.
const ownIdle = 100 * time.Millisecond

// ownConn is a connection of the client's pool that the store keeps for
// itself (a redis.Conn), so that a round trip on it skips the pool: no
// health check, no pool lock. One round trip at a time holds it (it
// takes it out of Store.own with a swap, and puts it back); the others use
// the pool as before.
type ownConn struct {
	conn *redis.Conn
	pipe redis.Pipeliner // conn's pipeline, reused: Exec leaves it empty
	used int64           // the wall clock when its last round trip took it, Unix ns
	born int64           // the wall clock when conn was made, Unix ns
}

// newOwn sets up the store's own connection, for a client of one server
// (Sentinel's too) that ends a round trip at its context's deadline (the
// round trip then runs on the caller's goroutine: none is abandoned while
// it holds the connection) and speaks RESP2 (Options.Protocol 2). Other
// clients keep using the pool alone. On RESP3, go-redis peeks at a
// connection's socket for push notifications before a command once the
// connection has not been back in the pool for 5s, which a connection
// kept out of it never is; and the handshake of a connection that a
// redis.Conn dials writes the client's shared options (maintenance
// notifications turned off on a server without them) under a lock of the
// redis.Conn's own, a data race with the client's pool. RESP2 has neither,
// and the scripts' replies (integers, strings and arrays of them) read
// the same in both.
//
// The connection it holds is one of the pool's: the other round trips
// (other limiters on the store, the probe, loading the scripts) share the
// rest of the pool, so a pool of one connection keeps it all. A connection
// the client's options give a lifetime (ConnMaxLifetime) goes back to the
// pool once that has passed, as the pool would retire it.
func (s *Store) newOwn() {
	c, ok := s.client.(*redis.Client)
	if !ok || !s.honors || c.Options().Protocol != 2 || c.Options().PoolSize < 2 {
		return
	}
	s.single, s.ownLife = c, int64(c.Options().ConnMaxLifetime)
	conn := c.Conn()
	s.own.Store(&ownConn{conn: conn, pipe: conn.Pipeline(), born: s.wall()})
}

// renew gives oc's connection back to the pool (which drops it if it is
// broken, and checks it before its next use otherwise) and gives oc a new
// one, which takes a connection from the pool at its first command.
func (s *Store) renew(oc *ownConn, now int64) {
	_ = oc.conn.Close()
	oc.conn, oc.born = s.single.Conn(), now
	oc.pipe = oc.conn.Pipeline()
}

// takeOwn returns the store's own connection if no round trip holds it,
// else nil. One not taken for longer than ownIdle (a slow round trip
// counts as idle time: a connection is at worst renewed once too often)
// goes back to the pool, and the round trip gets a new one, which takes a
// connection from the pool, checked, at its first command.
func (s *Store) takeOwn() *ownConn {
	oc := s.own.Swap(nil)
	if oc == nil {
		return nil
	}
	now := s.wall()
	if now-oc.used > int64(ownIdle) || now < oc.used || s.ownLife > 0 && now-oc.born >= s.ownLife {
		s.renew(oc, now)
	}
	oc.used = now // the idle time counts from here: one clock read a round trip
	return oc
}

// putOwn gives the store's own connection back after a round trip that
// ended with err. A round trip that failed (not for commands that failed
// alone, see failedAlone) leaves it broken or in doubt: it is closed
// (go-redis drops a broken connection from its pool) and replaced by a new
// one, which takes a connection from the pool, checked, at its first
// command.
func (s *Store) putOwn(oc *ownConn, err error, cmds []redis.Cmder) {
	if err != nil && !failedAlone(cmds) {
		s.renew(oc, oc.used)
	}
	s.own.Store(oc)
}

// ownRoundTrip sends cmds on the store's own connection oc, as roundTrip
// does on the pool.
func (s *Store) ownRoundTrip(ctx context.Context, oc *ownConn, cmds []redis.Cmder) error {
	if len(cmds) == 1 {
		return oc.conn.Process(ctx, cmds[0])
	}
	_ = oc.pipe.BatchProcess(ctx, cmds...)
	_, err := oc.pipe.Exec(ctx)
	return err
}
