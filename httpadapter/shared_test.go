package httpadapter_test

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
	"github.com/actorlimit/actorlimit/httpadapter"
)

// TestSecretKeyWithSharedCounts: a limiter whose counts are shared or kept
// (here persisted) needs a SecretKey, since a key drawn per process would
// count a token apart on every process and after every restart; a limiter
// of the process alone does not.
func TestSecretKeyWithSharedCounts(t *testing.T) {
	kept, err := actorlimit.Start(actorlimit.WithPersistence(t.TempDir(), actorlimit.PersistConfig{}))
	require.NoError(t, err)
	defer kept.Close()
	alone, err := actorlimit.Start()
	require.NoError(t, err)
	defer alone.Close()
	tests := []struct {
		name string
		lim  *actorlimit.Limiter
		key  []byte
		err  string
	}{
		{"kept counts, no key", kept, nil, "SecretKey is empty, and the limiter's counts are shared or kept"},
		{"kept counts, a key", kept, []byte(testKey), ""},
		{"counts of the process, no key", alone, nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := httpadapter.New(tt.lim, httpadapter.Config{SecretKey: tt.key, AllowNoRules: true})
			if tt.err == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, httpadapter.ErrInvalidConfig)
			assert.Contains(t, err.Error(), tt.err)
			assert.Contains(t, err.Error(), "head -c 32 /dev/urandom")
		})
	}
}
