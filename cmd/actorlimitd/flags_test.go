package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestFlags(t *testing.T) {
	f, err := parseFlags([]string{"-config", "x.yaml"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "127.0.0.1:8081", f.grpcAddr, "envoy ratelimit's gRPC port, on loopback")
	assert.Equal(t, "127.0.0.1:8080", f.httpAddr, "envoy ratelimit's HTTP port, on loopback")
	assert.False(t, f.allOrNothing || f.deniedNotCounted || f.responseHeaders, "what changes decisions is off")

	bad := []struct {
		args []string
		msg  string
	}{
		{nil, "-config is required"},
		{[]string{"-config", "x", "-tls-cert", "c"}, "-tls-cert and -tls-key go together"},
		{[]string{"-config", "x", "-redis", "r:1", "-persist", "d"}, "does not go with -redis"},
		{[]string{"-config", "x", "-cluster-etcd", "e:1", "-redis", "r:1"}, "without -redis and -persist"},
		{[]string{"-config", "x", "-cluster-etcd", "e:1", "-cluster-peers", "p:1"}, "not both"},
		{[]string{"-config", "x", "-cluster-peers", "p:1"}, "needs -cluster-peer-port"},
		{[]string{"-config", "x", "-cluster-mode", "leader"}, `-cluster-mode "leader"`},
		{[]string{"-config", "x", "-log-level", "loud"}, `-log-level "loud"`},
		{[]string{"-config", "x", "extra"}, `unexpected argument "extra"`},
	}
	for _, b := range bad {
		_, err := parseFlags(b.args, io.Discard)
		require.Error(t, err, "%v", b.args)
		assert.Contains(t, err.Error(), b.msg)
	}
	var cfgTLS clusterFlags
	cfgTLS.tlsCert = "c"
	assert.ErrorContains(t, clusterTLS(nil, cfgTLS), "needs all of -cluster-tls-cert, -cluster-tls-key and -cluster-tls-ca")
}

func TestBeyondLoopback(t *testing.T) {
	for host, want := range map[string]bool{
		"127.0.0.1": false, "127.0.0.2": false, "localhost": false, "::1": false,
		"": true, "0.0.0.0": true, "::": true, "10.0.0.1": true, "example.com": true,
	} {
		assert.Equal(t, want, beyondLoopback(host), host)
	}
}
