package imagepolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// MetricLabel is the label naming the ImagePolicy in every series.
const MetricLabel = "imagepolicy"

var series = kit.ClusterSeries(MetricLabel)

var (
	coverage = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_imagepolicy_images",
		Help: "Distinct images running under the ImagePolicy, by scan state: running (all), scanned, failed, pending. Coverage is scanned/running.",
	}, "state")
	violations = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_imagepolicy_violations",
		Help: "Running workload images that break the ImagePolicy, by reason (Vulnerable, Unscanned, ScanFailed, RegistryNotAllowed, DigestRequired).",
	}, "reason")
	vulnerable = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_imagepolicy_vulnerable_images",
		Help: "Running workload images in violation for vulnerabilities, by the worst severity above maxSeverity.",
	}, "severity")
)

func record(key client.ObjectKey, ev *Evaluation) {
	c := ev.Coverage
	for state, n := range map[string]int32{"running": c.Running, "scanned": c.Scanned, "failed": c.Failed, "pending": c.Pending} {
		coverage.WithLabelValues(series.Values(key, state)...).Set(float64(n))
	}
	byReason := map[string]int{}
	for _, v := range ev.Violations {
		byReason[v.Reason]++
	}
	for _, reason := range []string{policyv1alpha1.ImageReasonVulnerable, policyv1alpha1.ImageReasonUnscanned, policyv1alpha1.ImageReasonScanFailed, policyv1alpha1.ImageReasonRegistryNotAllowed, policyv1alpha1.ImageReasonDigestRequired} {
		violations.WithLabelValues(series.Values(key, reason)...).Set(float64(byReason[reason]))
	}
	for _, s := range []policyv1alpha1.Severity{policyv1alpha1.SeverityCritical, policyv1alpha1.SeverityHigh, policyv1alpha1.SeverityMedium, policyv1alpha1.SeverityLow, policyv1alpha1.SeverityUnknown} {
		vulnerable.WithLabelValues(series.Values(key, string(s))...).Set(float64(ev.Severities[s]))
	}
}
