//go:build !race

package cluster_test

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/asynkron/protoactor-go/cluster/clusterproviders/test"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/cluster/clusterpb"
)

// TestReceiveBound: a member's server takes a gRPC message of
// MaxMessageBytes and refuses, unanswered, one of twice that, under
// gRPC's own 4 MiB.
func TestReceiveBound(t *testing.T) {
	m := startTLSMembers(t, cluster.Config{Clock: newFakeClock(), Partitions: 16}, nil)[0]
	o := newOutsider(t, nil)
	tests := []struct {
		name     string
		size     int
		answered bool
	}{
		{"MaxMessageBytes less some", cluster.MaxMessageBytes - 1<<10, true},
		{"twice MaxMessageBytes", 2 * cluster.MaxMessageBytes, false},
		{"MaxMessageBytes again", cluster.MaxMessageBytes - 1<<10, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// An ask whose part carries a window of a long id: the member
			// answers it (an empty answer, the id being over its bound)
			// once it has it.
			h := &clusterpb.HandOff{From: "127.0.0.1:1", Ask: true, Parts: []*clusterpb.PartState{{Partition: 0,
				Windows: []*clusterpb.Window{{Id: strings.Repeat("x", tt.size)}}}}}
			resp, err := o.send(m.Address(), h, 2*time.Second)
			if tt.answered {
				require.NoError(t, err)
				assert.IsType(t, &clusterpb.HandOffReply{}, resp)
			} else {
				assert.Error(t, err, "answered: %v", resp)
			}
		})
	}
}

// TestStartRefusesOpenMember: beyond loopback, Start refuses a member
// without TLS unless TrustedNetwork says that only the members reach its
// port; on loopback, or with TLS, it needs neither.
func TestStartRefusesOpenMember(t *testing.T) {
	key := bytes.Repeat([]byte{7}, cluster.MinPartitionKeyLen)
	ca := newTestCA(t, t.TempDir(), "members")
	tests := []struct {
		name string
		cfg  cluster.Config
		err  string // "": the config is taken
	}{
		{"routable host without TLS", cluster.Config{Host: "10.1.2.3", PartitionKey: key}, `TLS is nil and Host "10.1.2.3" is not loopback`},
		{"every interface without TLS", cluster.Config{Host: "0.0.0.0", PartitionKey: key}, `TLS is nil and Host "0.0.0.0" is not loopback`},
		{"a name without TLS", cluster.Config{Host: "member-1.example", PartitionKey: key}, `TLS is nil and Host "member-1.example" is not loopback`},
		{"trusted network", cluster.Config{Host: "10.1.2.3", PartitionKey: key, TrustedNetwork: true}, ""},
		{"TLS", cluster.Config{Host: "10.1.2.3", PartitionKey: key, TLS: ca.issue(t, "m")}, ""},
		{"loopback", cluster.Config{Host: "127.0.0.1"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.cfg.Clock = newFakeClock()
			if tt.err != "" {
				tt.cfg.Provider = test.NewTestProvider(test.NewInMemAgent())
				m, err := cluster.Start(tt.cfg)
				require.ErrorIs(t, err, actorlimit.ErrInvalidArgument)
				assert.Nil(t, m)
				assert.ErrorContains(t, err, tt.err)
				assert.ErrorContains(t, err, "TrustedNetwork", "the error names the way out")
				return
			}
			m, err := cluster.Detached(tt.cfg, "node", nil)
			require.NoError(t, err)
			m.Kill()
		})
	}
}
