package redisstore_test

import (
	"log/slog"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/algo"
	"github.com/actorlimit/actorlimit/internal/logtest"
	"github.com/actorlimit/actorlimit/internal/redistest"
	"github.com/actorlimit/actorlimit/redisstore"
)

// TestOutageLoggedOnce kills and restarts a real Redis under a store with a
// logger: the outage is logged once however many checks it spans, and the
// recovery once.
func TestOutageLoggedOnce(t *testing.T) {
	srv := redistest.Start(t)
	logs := &logtest.Recorder{}
	s, err := redisstore.New(srv.Client(func(o *redis.Options) { o.MaxRetries = -1 }),
		redisstore.WithCallerTime(), redisstore.WithLogger(slog.New(logs)),
		redisstore.WithTimeout(200*time.Millisecond), redisstore.WithProbeInterval(time.Second))
	require.NoError(t, err)
	c := hit(algo.FixedWindow, "logged", 100, 1, time.Hour)
	decide(t, s, t0, c)
	assert.Empty(t, logs.Records(), "a store that works says nothing")

	srv.Kill()
	for i := range 5 { // the first fails, the others wait for the probe interval
		decide(t, s, t0+int64(i)*int64(time.Millisecond), c)
	}
	srv.Restart()
	decide(t, s, t0+int64(2*time.Second), c) // probes, answers
	decide(t, s, t0+int64(3*time.Second), c)
	assert.Equal(t, []string{
		"WARN redisstore: redis unavailable; deciding by the outage mode until it answers again (logged once per outage)",
		"INFO redisstore: redis answers again",
	}, logs.Records())
}

func TestWithLoggerNil(t *testing.T) {
	_, err := redisstore.New(redis.NewClient(&redis.Options{}), redisstore.WithLogger(nil))
	require.ErrorIs(t, err, redisstore.ErrInvalid)
	assert.Contains(t, err.Error(), "logger is nil")
}
