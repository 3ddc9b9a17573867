package cluster_test

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestStartRejectsBadConfig: each bad field is named, and nothing starts.
func TestStartRejectsBadConfig(t *testing.T) {
	for _, tc := range []struct {
		name string
		cfg  cluster.Config
		want string
	}{
		{"no provider", cluster.Config{}, "Provider"},
		{"mode", cluster.Config{Provider: noProvider{}, Mode: 7}, "Mode"},
		{"partitions", cluster.Config{Provider: noProvider{}, Partitions: -1}, "Partitions"},
		{"too many partitions", cluster.Config{Provider: noProvider{}, Partitions: cluster.MaxPartitions + 1}, "Partitions"},
		{"sync", cluster.Config{Provider: noProvider{}, SyncEvery: -time.Second}, "SyncEvery"},
		{"timeout", cluster.Config{Provider: noProvider{}, RequestTimeout: -1}, "RequestTimeout"},
		{"owner wait", cluster.Config{Provider: noProvider{}, OwnerWait: -1}, "OwnerWait"},
		{"owner wait not under the timeout", cluster.Config{Provider: noProvider{}, OwnerWait: time.Second}, "OwnerWait 1s is not shorter than RequestTimeout 1s"},
		{"dead after", cluster.Config{Provider: noProvider{}, DeadAfter: -1}, "DeadAfter"},
		{"max entries", cluster.Config{Provider: noProvider{}, MaxEntries: -1}, "MaxEntries"},
		{"port", cluster.Config{Provider: noProvider{}, Port: 70000}, "Port"},
		{"two providers", cluster.Config{Provider: noProvider{}, AutoManaged: &cluster.AutoManaged{Port: 1, Hosts: []string{"h:1"}}}, "both"},
		{"automanaged port", cluster.Config{AutoManaged: &cluster.AutoManaged{Hosts: []string{"h:1"}}}, "AutoManaged.Port"},
		{"automanaged hosts", cluster.Config{AutoManaged: &cluster.AutoManaged{Port: 1}}, "AutoManaged.Hosts"},
		{"automanaged refresh", cluster.Config{AutoManaged: &cluster.AutoManaged{Port: 1, Hosts: []string{"h:1"}, Refresh: -1}}, "AutoManaged.Refresh"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := cluster.Start(tc.cfg)
			require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
			assert.Nil(t, m)
			assert.True(t, strings.Contains(err.Error(), tc.want), err.Error())
		})
	}
}
