package labelpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	violations = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_labelpolicy_violations",
		Help: "Workloads without an allowed label at a LabelPolicy's last audit, per namespace.",
	}, []string{"labelpolicy", "namespace"})
	remediated = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_labelpolicy_remediated_total",
		Help: "Workloads whose metadata a LabelPolicy labelled (remediate: LabelOnly).",
	}, []string{"labelpolicy"})
	auditDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "orderly_labelpolicy_audit_duration_seconds",
		Help:    "Time one LabelPolicy audit took.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	}, []string{"labelpolicy"})
)

func init() {
	metrics.Registry.MustRegister(violations, remediated, auditDuration)
}

func recordAudit(policy string, res *auditResult, seconds float64) {
	violations.DeletePartialMatch(prometheus.Labels{"labelpolicy": policy})
	for ns, n := range res.byNamespace {
		violations.WithLabelValues(policy, ns).Set(float64(n))
	}
	if res.remediated > 0 {
		remediated.WithLabelValues(policy).Add(float64(res.remediated))
	}
	auditDuration.WithLabelValues(policy).Observe(seconds)
}

func forgetMetrics(policy string) {
	violations.DeletePartialMatch(prometheus.Labels{"labelpolicy": policy})
	remediated.DeleteLabelValues(policy)
	auditDuration.DeleteLabelValues(policy)
}
