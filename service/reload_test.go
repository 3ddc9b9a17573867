package service_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/actorlimit/actorlimit/service"
)

// TestReloadDuringWatch: Reload (a SIGHUP) called while Watch looks at the
// same path every millisecond, with the file replaced (by rename) between
// the calls (run with -race): every load succeeds, and the last file is the
// one in force once both are done.
func TestReloadDuringWatch(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "c.yaml")
	write := func(n int) {
		tmp := filepath.Join(dir, ".new")
		require.NoError(t, os.WriteFile(tmp, []byte(ruleOf(fmt.Sprintf("{unit: hour, requests_per_unit: %d}", n))), 0o644))
		require.NoError(t, os.Rename(tmp, path))
	}
	write(1)
	f := newFixture(t, ruleOf("{unit: hour, requests_per_unit: 1}"), service.Options{})
	r := service.NewReloader(path, f.srv, nil, nil)
	require.NoError(t, r.Reload())
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { r.Watch(ctx, time.Millisecond) })
	const last = 60
	for n := 2; n <= last; n++ {
		write(n)
		assert.NoError(t, r.Reload(), "reload %d", n)
	}
	limit := func() uint32 {
		resp, err := f.srv.ShouldRateLimit(context.Background(), request("swap", withHits(desc("k", "x"), 0)))
		require.NoError(t, err)
		return resp.Statuses[0].CurrentLimit.RequestsPerUnit
	}
	assert.Equal(t, uint32(last), limit(), "the last Reload's file, before the watcher stops")
	cancel()
	wg.Wait()
	assert.Equal(t, uint32(last), limit(), "the last file, once the watcher has stopped")
}
