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
	driftRepairs = series.Counter(prometheus.CounterOpts{
		Name: "orderly_tenant_drift_repairs_total",
		Help: "Objects Orderly restored after they were changed or deleted behind its back.",
	}, "kind")
)

func recordMetrics(t *tenancyv1alpha1.Tenant, refused int) {
	key := client.ObjectKeyFromObject(t)
	refusedBindingsGauge.WithLabelValues(series.Values(key)...).Set(float64(refused))
	namespacesReady.WithLabelValues(series.Values(key)...).Set(float64(t.Status.ReadyNamespaces))
	namespacesDeclared.WithLabelValues(series.Values(key)...).Set(float64(t.Status.NamespaceCount))
	selfServiceNamespaces.WithLabelValues(series.Values(key)...).Set(float64(t.Status.SelfServiceNamespaces))
}
