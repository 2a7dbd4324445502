package databaseserver

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// series are the per-server metric series, forgotten when the server goes.
var series = kit.ClusterSeries("server")

var (
	reachable = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_databaseserver_reachable",
		Help: "1 when Orderly last reached the DatabaseServer as its admin, else 0.",
	})
	databasesInUse = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_databaseserver_databases_in_use",
		Help: "Databases Orderly created on the DatabaseServer that still exist.",
	})
)

func recordMetrics(server string, st datav1alpha1.DatabaseServerStatus) {
	v := 0.0
	if st.Reachable {
		v = 1
	}
	key := client.ObjectKey{Name: server}
	reachable.WithLabelValues(series.Values(key)...).Set(v)
	databasesInUse.WithLabelValues(series.Values(key)...).Set(float64(st.DatabasesInUse))
}
