package actorlimit_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit"
)

// TestZeroAndNilLimiter: every method of a Limiter not made by Start,
// Spawn or Over (a nil pointer, a zero value) returns an error wrapping
// ErrClosed that says so, or a zero answer; none panics (a zero Limiter
// panicked with "maphash: use of uninitialized Seed").
func TestZeroAndNilLimiter(t *testing.T) {
	ctx := context.Background()
	p := actorlimit.Policy{Limit: 1, Period: time.Second}
	for _, tc := range []struct {
		name string
		lim  *actorlimit.Limiter
	}{{"nil", nil}, {"zero", &actorlimit.Limiter{}}} {
		for _, call := range []struct {
			name string
			do   func(l *actorlimit.Limiter) error
		}{
			{"CheckRate", func(l *actorlimit.Limiter) error { _, err := l.CheckRate("a", 1000, 1); return err }},
			{"Hit", func(l *actorlimit.Limiter) error { _, err := l.Hit(ctx, "a", p); return err }},
			{"HitN", func(l *actorlimit.Limiter) error { _, err := l.HitN(ctx, "a", p, 2); return err }},
			{"Peek", func(l *actorlimit.Limiter) error { _, err := l.Peek(ctx, "a", p); return err }},
			{"Reset", func(l *actorlimit.Limiter) error { return l.Reset(ctx, "a", p) }},
			{"HitMany", func(l *actorlimit.Limiter) error {
				return l.HitMany(ctx, []actorlimit.HitRequest{{ID: "a", Policy: p}}, make([]actorlimit.Result, 1))
			}},
			{"Sweep", func(l *actorlimit.Limiter) error { _, err := l.Sweep(ctx); return err }},
			{"Stats", func(l *actorlimit.Limiter) error { _, err := l.Stats(ctx); return err }},
		} {
			err := call.do(tc.lim)
			require.ErrorIs(t, err, actorlimit.ErrClosed, "%s limiter, %s", tc.name, call.name)
			assert.Contains(t, err.Error(), "not made by Start, Spawn or Over", "%s limiter, %s", tc.name, call.name)
		}
		assert.Nil(t, tc.lim.PID(), tc.name)
		assert.Nil(t, tc.lim.PIDFor("a"), tc.name)
		assert.False(t, tc.lim.Started(), tc.name)
		assert.NoError(t, tc.lim.Close(), "%s: nothing to close", tc.name)
	}
}

// TestZeroValuesOfTheRootPackage: the other exported types' zero values
// either work or are refused with a named error.
func TestZeroValuesOfTheRootPackage(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  func() error
		want error // nil: works
	}{
		{"zero Policy is refused by Validate", func() error { return actorlimit.Policy{}.Validate() }, actorlimit.ErrInvalidArgument},
		{"Over(nil)", func() error { _, err := actorlimit.Over(nil); return err }, actorlimit.ErrInvalidArgument},
		{"Spawn(nil)", func() error { _, err := actorlimit.Spawn(nil); return err }, actorlimit.ErrInvalidArgument},
		{"a nil Option is skipped", func() error {
			l, err := actorlimit.Start(nil)
			if err == nil {
				err = l.Close()
			}
			return err
		}, nil},
		{"zero PersistConfig takes the defaults", func() error {
			l, err := actorlimit.Start(actorlimit.WithPersistence(t.TempDir(), actorlimit.PersistConfig{}))
			if err == nil {
				err = l.Close()
			}
			return err
		}, nil},
		{"WithPersistence with no folder", func() error {
			_, err := actorlimit.Start(actorlimit.WithPersistence("", actorlimit.PersistConfig{}))
			return err
		}, actorlimit.ErrInvalidArgument},
	} {
		err := tc.err()
		if tc.want == nil {
			assert.NoError(t, err, tc.name)
			continue
		}
		assert.ErrorIs(t, err, tc.want, tc.name)
	}
}
