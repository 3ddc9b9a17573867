package main

import (
	"io"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestXDSFlags(t *testing.T) {
	f, err := parseFlags([]string{"-config", "x.yaml"}, io.Discard)
	require.NoError(t, err)
	assert.False(t, f.xds.on(), "files by default")

	for _, typ := range []string{"GRPC_XDS_SOTW", "grpc-xds-sotw", "Grpc_Xds_Sotw"} {
		f, err := parseFlags([]string{"-config-type", typ}, io.Discard)
		require.NoError(t, err, "%s needs no -config", typ)
		assert.True(t, f.xds.on(), typ)
	}
	f, err = parseFlags([]string{"-config-type", "FILE", "-config", "x.yaml"}, io.Discard)
	require.NoError(t, err)
	assert.False(t, f.xds.on())

	// envoy ratelimit's defaults.
	f, err = parseFlags([]string{"-config-type", "grpc_xds_sotw"}, io.Discard)
	require.NoError(t, err)
	assert.Equal(t, "localhost:18000", f.xds.server)
	assert.Equal(t, "default", f.xds.nodeID)
	assert.Equal(t, 3*time.Second, f.xds.retry)
	assert.Equal(t, 10*time.Second, f.xds.backoff.Initial)
	assert.Equal(t, 60*time.Second, f.xds.backoff.Max)
	assert.Equal(t, 0.5, f.xds.backoff.RandomFactor)
	assert.True(t, f.xds.backoff.Jitter)
	assert.False(t, f.xds.forceStart || f.xds.tls)

	x := []string{"-config-type", "grpc-xds-sotw"}
	for _, b := range []struct {
		args []string
		msg  string
	}{
		{[]string{"-config-type", "files"}, `-config-type "files": want file or grpc-xds-sotw`},
		{[]string{"-config-type", "file"}, "-config is required"},
		{append(x, "-xds-server", ""), "-xds-server is empty"},
		{append(x, "-xds-retry-interval", "0s"), "-xds-retry-interval must be positive"},
		{append(x, "-xds-max-msg-bytes", "-1"), "-xds-max-msg-bytes must not be negative"},
		{append(x, "-xds-backoff-initial", "0s"), "-xds-backoff-initial must be positive"},
		{append(x, "-xds-backoff-max", "1s"), "-xds-backoff-max must be at least -xds-backoff-initial"},
		{append(x, "-xds-backoff-random-factor", "1.5"), "-xds-backoff-random-factor 1.5: want 0 to 1"},
		{append(x, "-xds-tls", "-xds-tls-cert", "c.pem"), "-xds-tls-cert and -xds-tls-key go together"},
		{append(x, "-xds-node-metadata", "zone"), `-xds-node-metadata: "zone" is not key=value`},
		{append(x, "-xds-headers", "x-token=t"), `-xds-headers: "x-token=t" is not key:value`},
	} {
		_, err := parseFlags(b.args, io.Discard)
		require.Error(t, err, "%v", b.args)
		assert.Contains(t, err.Error(), b.msg, "%v", b.args)
	}
}
