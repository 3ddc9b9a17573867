//go:build !race

package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/cluster"
)

// TestMain runs main when the test binary is started as a member of a
// -procs run.
func TestMain(m *testing.M) {
	if os.Getenv(memberEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// TestProcs: -procs runs the 3 members as 3 OS processes that find each
// other and share the limit: every window allows at least 90% of the limit
// (or of the hits decided in it, should a starved machine have offered
// fewer) and at most the predicted bound, plus 10% for a loaded machine.
func TestProcs(t *testing.T) {
	if testing.Short() {
		t.Skip("runs 3 processes for a few seconds")
	}
	s := settings{
		mode:   cluster.LocalFirst,
		policy: actorlimit.Policy{Limit: 300, Period: time.Second}, windows: 2,
		rate: 200, syncEvery: 50 * time.Millisecond,
	}
	counts, err := runProcs(s)
	require.NoError(t, err)
	var out strings.Builder
	report(&out, s, counts)
	t.Log("\n" + out.String())
	for w := range s.windows {
		var total, offered int64
		for i := range counts {
			assert.Positive(t, counts[i][w].allowed, "member %d, window %d", i+1, w+1)
			total += counts[i][w].allowed
			offered += counts[i][w].offered
		}
		assert.GreaterOrEqual(t, total, min(s.policy.Limit, offered)*9/10, "window %d", w+1)
		assert.LessOrEqual(t, total, s.bound()*11/10, "window %d", w+1)
	}
}
