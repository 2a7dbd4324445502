package labelpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
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
		Help: "Workloads without an allowed label at a LabelPolicy's last audit, per namespace: the 20 namespaces with the most, the rest summed in namespace=\"(other)\".",
	}, "namespace")
	workloads = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_labelpolicy_workloads",
		Help: "Workloads a LabelPolicy matched at its last audit, compliant or not.",
	})
	tenantViolations = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_labelpolicy_tenant_violations",
		Help: "Workloads without an allowed label at a LabelPolicy's last audit, per tenant (the namespace's tenancy.orderly.dev/tenant label; \"(none)\" without one): the 20 tenants with the most, the rest summed in tenant=\"(other)\".",
	}, "tenant")
	tenantWorkloads = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_labelpolicy_tenant_workloads",
		Help: "Workloads a LabelPolicy matched at its last audit, per tenant, for the tenants of orderly_labelpolicy_tenant_violations.",
	}, "tenant")
	tenantDrift = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_labelpolicy_tenant_drift_namespaces",
		Help: "Namespaces whose cost-center label was missing or differed from their Tenant's spec.costCenter at a LabelPolicy's last audit (policies with spec.defaultFromTenant only).",
	})
	remediated = series.Counter(prometheus.CounterOpts{
		Name: "orderly_labelpolicy_remediated_total",
		Help: "Workloads whose metadata a LabelPolicy labelled (remediate: LabelOnly).",
	})
	admissionReady = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_labelpolicy_admission_ready",
		Help: "1 when a LabelPolicy's admission objects are in place (its AdmissionReady condition is True), else 0.",
	})
	auditDuration = series.Histogram(prometheus.HistogramOpts{
		Name:    "orderly_labelpolicy_audit_duration_seconds",
		Help:    "Time one LabelPolicy audit took.",
		Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
	})
)

// recordAdmission exports whether the policy is enforced at admission, so that an
// alert can say when it is not (its condition alone is seen only by who looks).
func recordAdmission(key client.ObjectKey, conds []metav1.Condition) {
	v := 0.0
	if meta.IsStatusConditionTrue(conds, policyv1alpha1.ConditionAdmissionReady) {
		v = 1
	}
	admissionReady.WithLabelValues(series.Values(key)...).Set(v)
}

func recordAudit(key client.ObjectKey, res *auditResult, seconds float64) {
	// A namespace without violations now must not keep the count of an earlier audit.
	violations.DeletePartialMatch(prometheus.Labels{MetricLabel: key.Name})
	// Only namespaces with violations get a series (as before), and at most
	// summaryTopN of them: the label's cardinality is bounded whatever the cluster.
	withViolations := map[string]tally{}
	for ns, t := range res.namespaces {
		if t.violations > 0 {
			withViolations[ns] = t
		}
	}
	top, other := summarize(withViolations, nil, summaryTopN)
	if other != nil {
		top = append(top, *other)
	}
	for _, s := range top {
		violations.WithLabelValues(series.Values(key, s.Name)...).Set(float64(s.Violations))
	}
	workloads.WithLabelValues(series.Values(key)...).Set(float64(res.workloads))
	tenantViolations.DeletePartialMatch(prometheus.Labels{MetricLabel: key.Name})
	tenantWorkloads.DeletePartialMatch(prometheus.Labels{MetricLabel: key.Name})
	tenants, counted := byTenant(res.namespaces, res.tenants)
	top, other = summarize(tenants, counted, summaryTopN)
	if other != nil {
		top = append(top, *other)
	}
	for _, s := range top {
		tenantViolations.WithLabelValues(series.Values(key, s.Name)...).Set(float64(s.Violations))
		tenantWorkloads.WithLabelValues(series.Values(key, s.Name)...).Set(float64(s.Workloads))
	}
	if res.tenantsRead {
		tenantDrift.WithLabelValues(series.Values(key)...).Set(float64(res.driftCount))
	} else {
		tenantDrift.DeletePartialMatch(prometheus.Labels{MetricLabel: key.Name})
	}
	if res.remediated > 0 {
		remediated.WithLabelValues(series.Values(key)...).Add(float64(res.remediated))
	}
	auditDuration.WithLabelValues(series.Values(key)...).Observe(seconds)
}
