package devdatabase

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// objectSeries are the series of one DevDatabase, forgotten when it goes;
// serverSeries those of one DatabaseServer, forgotten when the server goes.
var (
	objectSeries = kit.NamespacedSeries("namespace", "name")
	serverSeries = kit.ClusterSeries("server")
)

var (
	created = serverSeries.Counter(prometheus.CounterOpts{
		Name: "orderly_devdatabase_created_total",
		Help: "Databases Orderly created for DevDatabases.",
	})
	dropped = serverSeries.Counter(prometheus.CounterOpts{
		Name: "orderly_devdatabase_dropped_total",
		Help: "DevDatabases' databases dropped (or released, with Retain) on expiry or deletion.",
	})
	initRuns = serverSeries.Counter(prometheus.CounterOpts{
		Name: "orderly_devdatabase_init_runs_total",
		Help: "Init SQL runs of DevDatabases (spec.init), by result (succeeded, failed).",
	}, "result")
	terminated = serverSeries.Counter(prometheus.CounterOpts{
		Name: "orderly_devdatabase_terminated_connections_total",
		Help: "Sessions ended by the drop of DevDatabases' databases and roles.",
	})
	phases = objectSeries.Gauge(prometheus.GaugeOpts{
		Name: "orderly_devdatabase_info",
		Help: "1 for each DevDatabase, labelled with its phase.",
	}, "server", "phase")
	// readySeconds is one histogram for all DevDatabases: no per-object series.
	readySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "orderly_devdatabase_ready_seconds",
		Help:    "Time from a DevDatabase's creation to its database and Secret being ready.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
)

func init() {
	metrics.Registry.MustRegister(readySeconds)
}

// recordPhase keeps one info series per DevDatabase, with its current phase.
func recordPhase(d *datav1alpha1.DevDatabase) {
	key := client.ObjectKeyFromObject(d)
	objectSeries.Forget(key)
	phases.WithLabelValues(objectSeries.Values(key, d.Spec.ServerRef, string(d.Status.Phase))...).Set(1)
}

func countCreated(server string) {
	created.WithLabelValues(serverSeries.Values(client.ObjectKey{Name: server})...).Inc()
}

func countDropped(server string) {
	dropped.WithLabelValues(serverSeries.Values(client.ObjectKey{Name: server})...).Inc()
}

func countInit(server string, succeeded bool) {
	result := "failed"
	if succeeded {
		result = "succeeded"
	}
	initRuns.WithLabelValues(serverSeries.Values(client.ObjectKey{Name: server}, result)...).Inc()
}

func countTerminated(server string, n int) {
	terminated.WithLabelValues(serverSeries.Values(client.ObjectKey{Name: server})...).Add(float64(n))
}
