package cluster

import (
	"context"
	"net"
)

// WithDial returns c whose member makes its connections to the other
// members with dial (wan_test.go puts a proxy between every two members).
func WithDial(c Config, dial func(ctx context.Context, addr string) (net.Conn, error)) Config {
	c.dial = dial
	return c
}
