package servicedomain

import (
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// series holds every per-ServiceDomain metric, so that a deleted ServiceDomain's
// series all go with it (series.Forget).
var series = kit.NamespacedSeries("namespace", "servicedomain")

var (
	conditionGauge = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_servicedomain_condition",
		Help: "1 when a ServiceDomain's condition (DNSReady, CertificateReady, RouteReady, Ready) is True, else 0.",
	}, "condition")
	certExpiry = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_servicedomain_certificate_expiry_timestamp_seconds",
		Help: "When a ServiceDomain's certificate expires (Unix time); absent without one.",
	})
)

// dnsUpdates counts RFC 2136 updates and their outcomes, process-wide.
var dnsUpdates = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "orderly_servicedomain_dns_updates_total",
	Help: "RFC 2136 exchanges of ServiceDomains, by result: created, repaired, deleted, conflict (foreign records left alone), raced (the name changed meanwhile), failed.",
}, []string{"result"})

// withdrawals counts ServiceDomains unregistered because their zone stopped allowing
// their namespace.
var withdrawals = prometheus.NewCounter(prometheus.CounterOpts{
	Name: "orderly_servicedomain_withdrawals_total",
	Help: "ServiceDomains whose record, route and certificate were removed because their DomainZone no longer allows their namespace.",
})

func init() {
	metrics.Registry.MustRegister(dnsUpdates, withdrawals)
}

// recordMetrics sets sd's series from its status.
func recordMetrics(sd *networkv1alpha1.ServiceDomain) {
	key := client.ObjectKeyFromObject(sd)
	for _, t := range []string{networkv1alpha1.ConditionDNSReady, networkv1alpha1.ConditionCertificateReady, networkv1alpha1.ConditionRouteReady, networkv1alpha1.ConditionReady} {
		v := 0.0
		if meta.IsStatusConditionTrue(sd.Status.Conditions, t) {
			v = 1
		}
		conditionGauge.WithLabelValues(series.Values(key, t)...).Set(v)
	}
	if na := sd.Status.Certificate.NotAfter; na != nil {
		certExpiry.WithLabelValues(series.Values(key)...).Set(float64(na.Unix()))
	} else {
		certExpiry.DeleteLabelValues(series.Values(key)...)
	}
}
