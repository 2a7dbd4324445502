package imagescan

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	queueLength = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "orderly_imagescan_queue_length",
		Help: "Image resolves and scans waiting for a worker.",
	})
	scanDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "orderly_imagescan_scan_duration_seconds",
		Help:    "Time a successful image scan took: pulling the layers, extracting the packages and matching them.",
		Buckets: []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300},
	})
	scans = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_imagescan_scans_total",
		Help: "Image scans by result: Succeeded or the error's reason (RegistryUnreachable, AuthFailed, NotFound, UnsupportedMediaType, TooLarge, DatabaseMissing, ScanFailed).",
	}, []string{"result"})
	resolves = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_imagescan_resolves_total",
		Help: "Tag to digest resolutions by result: Resolved or the error's reason.",
	}, []string{"result"})
	databaseReloads = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderly_imagescan_database_changes_total",
		Help: "Times the vulnerability database was reloaded with a new version (every image in use is then rescanned).",
	})
	databaseDownloads = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_imagescan_database_downloads_total",
		Help: "Downloads of the vulnerability database from --imagescan-db-url by result: Changed, Unchanged or Failed (the database loaded before stays in use).",
	}, []string{"result"})
	collected = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "orderly_imagescan_collected_total",
		Help: "ImageScans deleted because no pod used their image for the retention period.",
	})
)

func init() {
	metrics.Registry.MustRegister(queueLength, scanDuration, scans, resolves, collected, databaseReloads, databaseDownloads)
}
