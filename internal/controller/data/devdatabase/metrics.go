package devdatabase

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

var (
	created = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_devdatabase_created_total",
		Help: "Databases Orderly created for DevDatabases.",
	}, []string{"server"})
	dropped = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_devdatabase_dropped_total",
		Help: "DevDatabases' databases dropped (or released, with Retain) on expiry or deletion.",
	}, []string{"server"})
	readySeconds = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "orderly_devdatabase_ready_seconds",
		Help:    "Time from a DevDatabase's creation to its database and Secret being ready.",
		Buckets: prometheus.ExponentialBuckets(0.05, 2, 12),
	})
	phases = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_devdatabase_info",
		Help: "1 for each DevDatabase, labelled with its phase.",
	}, []string{"namespace", "name", "server", "phase"})
)

func init() {
	metrics.Registry.MustRegister(created, dropped, readySeconds, phases)
}

func recordPhase(d *datav1alpha1.DevDatabase, phase datav1alpha1.DevDatabasePhase) {
	phases.DeletePartialMatch(prometheus.Labels{"namespace": d.Namespace, "name": d.Name})
	if d.DeletionTimestamp.IsZero() {
		phases.WithLabelValues(d.Namespace, d.Name, d.Spec.ServerRef, string(phase)).Set(1)
	}
}
