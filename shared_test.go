package actorlimit_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/internal/redistest"
)

// sharedBackend is a Backend that says its counts are shared.
type sharedBackend struct{ fakeBackend }

func (*sharedBackend) SharedCounts() bool { return true }

// TestSharedCounts: a limiter says its counts are shared or kept when it
// persists them, keeps them in Redis, or decides over a Backend that says
// so; not otherwise.
func TestSharedCounts(t *testing.T) {
	start := func(opts ...actorlimit.Option) *actorlimit.Limiter {
		lim, err := actorlimit.Start(opts...)
		require.NoError(t, err)
		t.Cleanup(func() { lim.Close() })
		return lim
	}
	over := func(b actorlimit.Backend) *actorlimit.Limiter {
		lim, err := actorlimit.Over(b)
		require.NoError(t, err)
		return lim
	}
	tests := []struct {
		name   string
		lim    func() *actorlimit.Limiter
		shared bool
	}{
		{"nil", func() *actorlimit.Limiter { return nil }, false},
		{"the embedded table", func() *actorlimit.Limiter { return start() }, false},
		{"persisted", func() *actorlimit.Limiter {
			return start(actorlimit.WithPersistence(t.TempDir(), actorlimit.PersistConfig{}), actorlimit.WithShards(2))
		}, true},
		{"on Redis", func() *actorlimit.Limiter { lim, _ := startOnRedis(t, redistest.Start(t), nil); return lim }, true},
		{"over a backend", func() *actorlimit.Limiter { return over(&fakeBackend{}) }, false},
		{"over a shared backend", func() *actorlimit.Limiter { return over(&sharedBackend{}) }, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.Equal(t, tt.shared, tt.lim().SharedCounts())
		})
	}
}
