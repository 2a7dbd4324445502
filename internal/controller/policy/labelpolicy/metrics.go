package labelpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/kit"
)

// MetricLabel is the label that names the LabelPolicy in every per-policy series.
const MetricLabel = "labelpolicy"

// series holds every per-policy series of the controller; Reconcile forgets a
// policy's series when the policy is gone.
var series = kit.ClusterSeries(MetricLabel)

var (
	violations = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_labelpolicy_violations",
		Help: "Workloads without an allowed label at a LabelPolicy's last audit, per namespace.",
	}, "namespace")
	remediated = series.Counter(prometheus.CounterOpts{
		Name: "orderly_labelpolicy_remediated_total",
		Help: "Workloads whose metadata a LabelPolicy labelled (remediate: LabelOnly).",
	})
	auditDuration = series.Histogram(prometheus.HistogramOpts{
		Name:    "orderly_labelpolicy_audit_duration_seconds",
		Help:    "Time one LabelPolicy audit took.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
)

func recordAudit(key client.ObjectKey, res *auditResult, seconds float64) {
	// A namespace without violations now must not keep the count of an earlier audit.
	violations.DeletePartialMatch(prometheus.Labels{MetricLabel: key.Name})
	for ns, n := range res.byNamespace {
		violations.WithLabelValues(series.Values(key, ns)...).Set(float64(n))
	}
	if res.remediated > 0 {
		remediated.WithLabelValues(series.Values(key)...).Add(float64(res.remediated))
	}
	auditDuration.WithLabelValues(series.Values(key)...).Observe(seconds)
}
