package main

import (
	"crypto/tls"
	"errors"

	"github.com/spf13/pflag"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"orderly.dev/orderly/internal/metricsauth"
	orderlywebhook "orderly.dev/orderly/internal/webhook"
)

// The secure metrics server asks the API server who a scraper is (TokenReview) and
// whether it may get /metrics (SubjectAccessReview).
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// metricsOptions are the flags of the Prometheus endpoint beside its address.
type metricsOptions struct {
	secure  bool
	certDir string
}

func addMetricsFlags(f *pflag.FlagSet, o *metricsOptions) {
	f.BoolVar(&o.secure, "metrics-secure", false,
		"serve metrics over HTTPS (HTTP/1.1 only) to clients whose bearer token may get /metrics (TokenReview and SubjectAccessReview "+
			"against the API server; grant the ClusterRole orderly-metrics-reader); config/manager/manager.yaml sets it. "+
			"Without it, metrics are plain HTTP to anyone who reaches the address")
	f.StringVar(&o.certDir, "metrics-cert-dir", "",
		"directory with tls.crt and tls.key for --metrics-secure, reloaded when they change (default: a self-signed certificate made at start-up)")
}

func (o metricsOptions) validate() error {
	if o.certDir != "" && !o.secure {
		return errors.New("--metrics-cert-dir needs --metrics-secure")
	}
	return nil
}

// registerClientLatency turns on client-go's request latency histogram
// (rest_client_request_duration_seconds, by verb and host), which controller-runtime
// leaves off: it tells a slow API server from a slow controller. The series are few:
// one host and a handful of verbs.
func registerClientLatency() {
	metrics.RegisterRESTClientMetrics(metrics.MetricRequestLatency)
}

// serverOptions are the manager's metrics server options for address addr.
func (o metricsOptions) serverOptions(addr string) metricsserver.Options {
	opts := metricsserver.Options{BindAddress: addr}
	if !o.secure {
		return opts
	}
	opts.SecureServing = true
	opts.FilterProvider = metricsauth.Filter
	opts.CertDir = o.certDir
	opts.TLSOpts = []func(*tls.Config){orderlywebhook.DisableHTTP2}
	return opts
}
