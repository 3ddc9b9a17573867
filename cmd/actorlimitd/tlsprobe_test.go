package main

import (
	"crypto/tls"
	"net"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestTLSProbe: a server that requires a client certificate refuses one
// without it after TLS 1.3's handshake has returned on the client's side;
// the probe reads its alert (a refusal), and reads nothing from a server
// that accepted the client.
func TestTLSProbe(t *testing.T) {
	c := newCerts(t)
	srvCert, srvKey := c.issue(t, "server", 2)
	cliCert, cliKey := c.issue(t, "client", 3)
	sc, err := tls.LoadX509KeyPair(srvCert, srvKey)
	require.NoError(t, err)
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{sc},
		ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: c.pool, MinVersion: tls.VersionTLS13})
	require.NoError(t, err)
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				// As Redis: the handshake, then wait for a command.
				if conn.(*tls.Conn).Handshake() == nil {
					var b [1]byte
					_, _ = conn.Read(b[:])
				}
			}()
		}
	}()
	cc, err := tls.LoadX509KeyPair(cliCert, cliKey)
	require.NoError(t, err)
	for _, tc := range []struct {
		name    string
		cfg     *tls.Config
		refused bool
	}{
		{"with a certificate", &tls.Config{RootCAs: c.pool, Certificates: []tls.Certificate{cc}}, false},
		{"without", &tls.Config{RootCAs: c.pool}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tlsProbe("tcp", ln.Addr().String(), tc.cfg)
			if !tc.refused {
				assert.NoError(t, err)
				return
			}
			require.Error(t, err)
			assert.True(t, refusal(err), "%v is a refusal", err)
			assert.Contains(t, err.Error(), "certificate")
		})
	}
	// Nothing listening: not a refusal (Redis may come later).
	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := free.Addr().String()
	free.Close()
	err = tlsProbe("tcp", addr, &tls.Config{RootCAs: c.pool})
	require.Error(t, err)
	assert.False(t, refusal(err))
}
