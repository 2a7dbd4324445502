package kit

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// Series makes and registers the metric vectors of one kind whose series are per
// object, and forgets every series of an object when it goes: a vector made here
// cannot be left behind by a controller that forgets to clean it up.
//
// Every vector's first labels name the object: one label (its name) for a
// cluster-scoped kind, two (namespace, name) for a namespaced one.
type Series struct {
	objectLabels []string
	vecs         []*prometheus.MetricVec
}

// ClusterSeries is for a cluster-scoped kind whose objects are named by label.
func ClusterSeries(label string) *Series { return &Series{objectLabels: []string{label}} }

// NamespacedSeries is for a namespaced kind whose objects are named by the labels
// namespace and name.
func NamespacedSeries(namespaceLabel, nameLabel string) *Series {
	return &Series{objectLabels: []string{namespaceLabel, nameLabel}}
}

func (s *Series) labels(extra []string) []string {
	return append(append([]string{}, s.objectLabels...), extra...)
}

// Gauge registers a gauge vector with the object's labels followed by extra.
func (s *Series) Gauge(opts prometheus.GaugeOpts, extra ...string) *prometheus.GaugeVec {
	v := prometheus.NewGaugeVec(opts, s.labels(extra))
	metrics.Registry.MustRegister(v)
	s.vecs = append(s.vecs, v.MetricVec)
	return v
}

// Counter registers a counter vector with the object's labels followed by extra.
func (s *Series) Counter(opts prometheus.CounterOpts, extra ...string) *prometheus.CounterVec {
	v := prometheus.NewCounterVec(opts, s.labels(extra))
	metrics.Registry.MustRegister(v)
	s.vecs = append(s.vecs, v.MetricVec)
	return v
}

// Histogram registers a histogram vector with the object's labels followed by extra.
func (s *Series) Histogram(opts prometheus.HistogramOpts, extra ...string) *prometheus.HistogramVec {
	v := prometheus.NewHistogramVec(opts, s.labels(extra))
	metrics.Registry.MustRegister(v)
	s.vecs = append(s.vecs, v.MetricVec)
	return v
}

// Values returns the object's label values followed by extra, for WithLabelValues.
func (s *Series) Values(key client.ObjectKey, extra ...string) []string {
	if len(s.objectLabels) == 1 {
		return append([]string{key.Name}, extra...)
	}
	return append([]string{key.Namespace, key.Name}, extra...)
}

// Forget deletes every series of the object from every vector of s.
func (s *Series) Forget(key client.ObjectKey) {
	match := prometheus.Labels{}
	for i, v := range s.Values(key) {
		match[s.objectLabels[i]] = v
	}
	for _, v := range s.vecs {
		v.DeletePartialMatch(match)
	}
}
