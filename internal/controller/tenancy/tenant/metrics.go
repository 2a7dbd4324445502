package tenant

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// series holds every per-Tenant metric, labelled tenant, so that all of a Tenant's
// series go with it.
var series = kit.ClusterSeries("tenant")

var (
	namespacesReady = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_tenant_namespaces_ready",
		Help: "Number of a Tenant's namespaces that are Ready.",
	})
	namespacesDeclared = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_tenant_namespaces",
		Help: "Number of a Tenant's namespaces: listed in its spec and created through self-service.",
	})
	refusedBindingsGauge = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_tenant_refused_role_bindings",
		Help: "Number of a Tenant's additionalRoleBindings not created because Tenants may not bind their role.",
	})
	selfServiceNamespaces = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_tenant_self_service_namespaces",
		Help: "Number of namespaces a Tenant's owners created through spec.selfService.",
	})
	totalQuotaHard = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_tenant_total_quota_hard",
		Help: "A Tenant's spec.totalQuota limit, by resource (cores for cpu, bytes for memory and storage, a count for the others).",
	}, "resource")
	totalQuotaUsed = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_tenant_total_quota_used",
		Help: "What a Tenant's namespaces use together of each spec.totalQuota resource, as their ResourceQuotas report it.",
	}, "resource")
	resourcesMissing = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_tenant_resources_missing",
		Help: "Objects of a Tenant's spec.resources that are not as declared in one of its namespaces: one per entry and namespace (see the ExtraResourcesApplied condition).",
	})
	driftRepairs = series.Counter(prometheus.CounterOpts{
		Name: "orderly_tenant_drift_repairs_total",
		Help: "Objects Orderly restored after they were changed or deleted behind its back.",
	}, "kind")
)

func recordMetrics(t *tenancyv1alpha1.Tenant, refused int, extra resourceOutcome) {
	key := client.ObjectKeyFromObject(t)
	resourcesMissing.WithLabelValues(series.Values(key)...).Set(float64(missingResources(extra.entries)))
	refusedBindingsGauge.WithLabelValues(series.Values(key)...).Set(float64(refused))
	namespacesReady.WithLabelValues(series.Values(key)...).Set(float64(t.Status.ReadyNamespaces))
	namespacesDeclared.WithLabelValues(series.Values(key)...).Set(float64(t.Status.NamespaceCount))
	selfServiceNamespaces.WithLabelValues(series.Values(key)...).Set(float64(t.Status.SelfServiceNamespaces))
	// A resource dropped from totalQuota takes its series with it.
	for _, g := range []*prometheus.GaugeVec{totalQuotaHard, totalQuotaUsed} {
		g.DeletePartialMatch(prometheus.Labels{"tenant": t.Name})
	}
	if tq := t.Status.TotalQuota; tq != nil {
		for name, q := range tq.Hard {
			totalQuotaHard.WithLabelValues(series.Values(key, string(name))...).Set(q.AsApproximateFloat64())
		}
		for name, q := range tq.Used {
			totalQuotaUsed.WithLabelValues(series.Values(key, string(name))...).Set(q.AsApproximateFloat64())
		}
	}
}
