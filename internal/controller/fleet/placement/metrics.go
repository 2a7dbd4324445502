package placement

import (
	"github.com/prometheus/client_golang/prometheus"

	"orderly.dev/orderly/internal/kit"
)

var (
	series = kit.NamespacedSeries("namespace", "name")

	policyReplicas = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_placement_replicas",
		Help: "Replicas a PlacementPolicy placed, and of them ready, summed over its clusters.",
	}, "state")
	policyClusters = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_placement_policy_clusters",
		Help: "Clusters a PlacementPolicy chose, by the phase it sees them in.",
	}, "phase")
	placementLatency = series.Histogram(prometheus.HistogramOpts{
		Name:    "orderly_placement_reconcile_seconds",
		Help:    "Time of one PlacementPolicy reconcile: selecting, planning and handing the plans to the members' queues.",
		Buckets: prometheus.ExponentialBuckets(0.001, 4, 8),
	})

	// memberSeries names a member by its ClusterProfile's namespace and name: two
	// profiles of one name are two series.
	memberSeries = kit.NamespacedSeries("namespace", "cluster")

	clusterHealthy = memberSeries.Gauge(prometheus.GaugeOpts{
		Name: "orderly_placement_cluster_healthy",
		Help: "1 when the member cluster's /readyz answered ok at the last probe, 0 when not.",
	})
	applyErrors = memberSeries.Counter(prometheus.CounterOpts{
		Name: "orderly_placement_apply_errors_total",
		Help: "Syncs of a policy to a member cluster that failed.",
	})
	syncSeconds = memberSeries.Histogram(prometheus.HistogramOpts{
		Name:    "orderly_placement_sync_seconds",
		Help:    "Time to apply one policy's objects to one member cluster.",
		Buckets: prometheus.ExponentialBuckets(0.005, 3, 9),
	})
)
