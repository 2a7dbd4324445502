package databaseserver

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

var (
	reachable = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_databaseserver_reachable",
		Help: "1 when Orderly last reached the DatabaseServer as its admin, else 0.",
	}, []string{"server"})
	databasesInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_databaseserver_databases_in_use",
		Help: "Databases Orderly created on the DatabaseServer that still exist.",
	}, []string{"server"})
)

func init() {
	metrics.Registry.MustRegister(reachable, databasesInUse)
}

func recordMetrics(server string, st datav1alpha1.DatabaseServerStatus) {
	v := 0.0
	if st.Reachable {
		v = 1
	}
	reachable.WithLabelValues(server).Set(v)
	databasesInUse.WithLabelValues(server).Set(float64(st.DatabasesInUse))
}

func forgetMetrics(server string) {
	reachable.DeleteLabelValues(server)
	databasesInUse.DeleteLabelValues(server)
}
