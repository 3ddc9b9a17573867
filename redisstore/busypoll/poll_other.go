//go:build !linux

package busypoll

import "time"

// poll does not poll here: the read parks as the socket's does.
func (c *conn) poll(b []byte, end time.Time) (n int, got, tried bool) { return 0, false, false }

// try does not poll here.
func (c *conn) try(fd uintptr) bool { return true }
