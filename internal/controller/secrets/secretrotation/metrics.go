package secretrotation

import (
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// objectSeries are the series of one SecretRotation, forgotten when it goes.
var objectSeries = kit.NamespacedSeries("namespace", "name")

var (
	rotations = objectSeries.Counter(prometheus.CounterOpts{
		Name: "orderly_secretrotation_rotations_total",
		Help: "Rotations that ended, by result: Done, RolledBack or Held.",
	}, "result")
	phase = objectSeries.Gauge(prometheus.GaugeOpts{
		Name: "orderly_secretrotation_phase",
		Help: "1 for each SecretRotation with a rotation in flight, labelled with its phase; no series when none is.",
	}, "phase")
	sinceSuccess = &sinceCollector{last: map[client.ObjectKey]time.Time{}, desc: prometheus.NewDesc(
		"orderly_secretrotation_seconds_since_last_success",
		"Seconds since each SecretRotation's last rotation ended Done (computed at scrape time).",
		[]string{"namespace", "name"}, nil)}
)

func init() {
	metrics.Registry.MustRegister(sinceSuccess)
}

// sinceCollector reports, at each scrape, the seconds since each object's last
// success: an alert on it needs no clock arithmetic in PromQL.
type sinceCollector struct {
	mu   sync.Mutex
	last map[client.ObjectKey]time.Time
	desc *prometheus.Desc
	now  func() time.Time
}

func (c *sinceCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *sinceCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	for k, t := range c.last {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, now.Sub(t).Seconds(), k.Namespace, k.Name)
	}
}

func (c *sinceCollector) set(k client.ObjectKey, t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.last[k] = t
}

func (c *sinceCollector) forget(k client.ObjectKey) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.last, k)
}

// record sets the series of sr from its status.
func record(sr *secretsv1alpha1.SecretRotation, _ time.Time) {
	key := client.ObjectKeyFromObject(sr)
	phase.DeletePartialMatch(prometheus.Labels{"namespace": key.Namespace, "name": key.Name})
	if inFlight(sr.Status.Phase) {
		phase.WithLabelValues(objectSeries.Values(key, string(sr.Status.Phase))...).Set(1)
	}
	if t := sr.Status.LastSuccessTime; t != nil {
		sinceSuccess.set(key, t.Time)
	}
}

func countRotation(key client.ObjectKey, result secretsv1alpha1.Phase) {
	rotations.WithLabelValues(objectSeries.Values(key, string(result))...).Inc()
}

// forget removes every series of a SecretRotation that is gone.
func forget(key client.ObjectKey) {
	objectSeries.Forget(key)
	sinceSuccess.forget(key)
}
