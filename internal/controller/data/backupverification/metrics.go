package backupverification

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// series are one BackupVerification's series, forgotten when it goes.
var series = kit.NamespacedSeries("namespace", "name")

var (
	lastSuccess = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_backupverification_last_success_timestamp_seconds",
		Help: "When a BackupVerification's run last passed (Unix seconds); 0 before the first. Alert on time() minus this.",
	})
	restoreSeconds = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_backupverification_restore_duration_seconds",
		Help: "How long the last restore of a BackupVerification took.",
	})
	failures = series.Counter(prometheus.CounterOpts{
		Name: "orderly_backupverification_failures_total",
		Help: "Runs of a BackupVerification that did not pass, by result (Failed: the backup is bad; Error: it could not be judged) and reason.",
	}, "result", "reason")
	runsTotal = series.Counter(prometheus.CounterOpts{
		Name: "orderly_backupverification_runs_total",
		Help: "Runs of a BackupVerification, by result.",
	}, "result")
)

// record sets the gauges from status, which survives restarts.
func record(bv *datav1alpha1.BackupVerification) {
	key := client.ObjectKeyFromObject(bv)
	var ts float64
	if t := bv.Status.LastSuccessTime; t != nil {
		ts = float64(t.Unix())
	}
	lastSuccess.WithLabelValues(series.Values(key)...).Set(ts)
	if r := bv.Status.LastRun; r != nil && r.RestoreDuration != nil {
		restoreSeconds.WithLabelValues(series.Values(key)...).Set(r.RestoreDuration.Seconds())
	}
}

// countRun counts a finished run.
func countRun(bv *datav1alpha1.BackupVerification, run *datav1alpha1.BackupRun) {
	key := client.ObjectKeyFromObject(bv)
	runsTotal.WithLabelValues(series.Values(key, string(run.Result))...).Inc()
	if run.Result != datav1alpha1.RunPassed {
		failures.WithLabelValues(series.Values(key, string(run.Result), run.Reason)...).Inc()
	}
}
