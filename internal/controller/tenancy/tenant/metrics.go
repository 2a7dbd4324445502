package tenant

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

var (
	namespacesReady = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_tenant_namespaces_ready",
		Help: "Number of a Tenant's namespaces that are Ready.",
	}, []string{"tenant"})
	namespacesDeclared = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "orderly_tenant_namespaces",
		Help: "Number of namespaces a Tenant declares.",
	}, []string{"tenant"})
	driftRepairs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_tenant_drift_repairs_total",
		Help: "Objects Orderly restored after they were changed or deleted behind its back.",
	}, []string{"tenant", "kind"})
)

func init() {
	metrics.Registry.MustRegister(namespacesReady, namespacesDeclared, driftRepairs)
}

func recordMetrics(tenant string, st tenancyv1alpha1.TenantStatus) {
	namespacesReady.WithLabelValues(tenant).Set(float64(st.ReadyNamespaces))
	namespacesDeclared.WithLabelValues(tenant).Set(float64(st.NamespaceCount))
}

func forgetMetrics(tenant string) {
	namespacesReady.DeleteLabelValues(tenant)
	namespacesDeclared.DeleteLabelValues(tenant)
	driftRepairs.DeletePartialMatch(prometheus.Labels{"tenant": tenant})
}
