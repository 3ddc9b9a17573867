package metrics_test

import (
	"fmt"
	"net/http/httptest"
	"strings"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/actorlimit/actorlimit/cluster"
	"github.com/actorlimit/actorlimit/metrics"
)

// A cluster member's SyncStats, read at each scrape. Here syncStats
// returns fixed values; with a running member m (from cluster.Start) it is
// m.SyncStats.
func ExampleCollector_SetCluster() {
	syncStats := func() cluster.SyncStats {
		return cluster.SyncStats{Fallbacks: 4, Rounds: 120, Requests: 240, Failures: 2, Outages: 1, Recoveries: 1,
			HandOffs: 85, Refusals: 3, Backups: 900, OwnerFallbacks: 40, Charged: 40, Retries: 2, Deduplicated: 1}
	}

	col, err := metrics.New(metrics.Config{})
	if err != nil {
		panic(err)
	}
	col.SetCluster(metrics.ClusterStatsFunc(func() metrics.ClusterStats {
		s := syncStats()
		return metrics.ClusterStats{Fallbacks: s.Fallbacks,
			Rounds: s.Rounds, Requests: s.Requests, Failures: s.Failures,
			Outages: s.Outages, Recoveries: s.Recoveries, Rebuilds: s.Rebuilds,
			QueuedResets: s.QueuedResets, HandOffs: s.HandOffs, Refusals: s.Refusals,
			TakeOvers: s.TakeOvers, Backups: s.Backups, Rejected: s.Rejected,
			OwnerFallbacks: s.OwnerFallbacks, Charged: s.Charged, ChargesDropped: s.ChargesDropped,
			Retries: s.Retries, Deduplicated: s.Deduplicated}
	}))
	reg := prometheus.NewRegistry()
	reg.MustRegister(col)

	w := httptest.NewRecorder()
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{}).ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	for _, line := range strings.Split(w.Body.String(), "\n") {
		if strings.HasPrefix(line, "actorlimit_cluster_") {
			fmt.Println(line)
		}
	}
	// Output:
	// actorlimit_cluster_backups_total 900
	// actorlimit_cluster_decide_deduplicated_total 1
	// actorlimit_cluster_decide_retries_total 2
	// actorlimit_cluster_fallbacks_total 4
	// actorlimit_cluster_hand_offs_total 85
	// actorlimit_cluster_outages_total 1
	// actorlimit_cluster_owner_charged_total 40
	// actorlimit_cluster_owner_charges_dropped_total 0
	// actorlimit_cluster_owner_fallbacks_total 40
	// actorlimit_cluster_queued_resets_total 0
	// actorlimit_cluster_rebuilds_total 0
	// actorlimit_cluster_recoveries_total 1
	// actorlimit_cluster_refusals_total 3
	// actorlimit_cluster_rejected_total 0
	// actorlimit_cluster_sync_failures_total 2
	// actorlimit_cluster_sync_requests_total 240
	// actorlimit_cluster_sync_rounds_total 120
	// actorlimit_cluster_take_overs_total 0
}
