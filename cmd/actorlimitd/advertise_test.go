package main

import (
	"io"
	"log/slog"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestClusterAdvertiseFlag: -cluster-advertise reaches the member's
// config: a value that is no host:port is refused by the member's Start,
// naming Advertise.
func TestClusterAdvertiseFlag(t *testing.T) {
	f, err := parseFlags([]string{"-config", "x", "-cluster-peers", "127.0.0.1:1", "-cluster-peer-port", "1", "-cluster-advertise", "127.0.0.2"}, io.Discard)
	require.NoError(t, err)
	_, err = openCluster(f.cluster, slog.New(slog.DiscardHandler))
	require.ErrorContains(t, err, `Advertise "127.0.0.2" is not host:port`)
}
