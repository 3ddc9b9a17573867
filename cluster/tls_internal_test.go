package cluster

import (
	"log/slog"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/actorlimit/actorlimit/internal/logtest"
)

// TestWarnOpen: a member that listens beyond loopback without TLS logs one
// warning at start; on loopback, or with TLS, it logs nothing.
func TestWarnOpen(t *testing.T) {
	for _, tc := range []struct {
		host string
		tls  *TLS
		warn bool
	}{
		{"127.0.0.1", nil, false},
		{"::1", nil, false},
		{"localhost", nil, false},
		{"127.0.0.2", nil, false},
		{"0.0.0.0", nil, true},
		{"10.0.0.7", nil, true},
		{"member-1.example", nil, true},
		{"10.0.0.7", &TLS{}, false},
	} {
		logs := &logtest.Recorder{}
		Config{Host: tc.host, TLS: tc.tls}.warnOpen(slog.New(logs))
		if tc.warn {
			assert.Len(t, logs.Records(), 1, tc.host)
			for _, r := range logs.Records() {
				assert.Contains(t, r, "WARN actorlimit cluster: the member listens beyond loopback without TLS")
			}
		} else {
			assert.Empty(t, logs.Records(), tc.host)
		}
	}
}
