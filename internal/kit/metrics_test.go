package kit

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestSeriesForgetsEveryVectorOfOneObject(t *testing.T) {
	s := NamespacedSeries("namespace", "name")
	info := s.Gauge(prometheus.GaugeOpts{Name: "kit_test_info", Help: "test"}, "phase")
	count := s.Counter(prometheus.CounterOpts{Name: "kit_test_total", Help: "test"})
	took := s.Histogram(prometheus.HistogramOpts{Name: "kit_test_seconds", Help: "test"})

	a, b := client.ObjectKey{Namespace: "ns", Name: "a"}, client.ObjectKey{Namespace: "ns", Name: "b"}
	for _, key := range []client.ObjectKey{a, b} {
		info.WithLabelValues(s.Values(key, "Ready")...).Set(1)
		count.WithLabelValues(s.Values(key)...).Inc()
		took.WithLabelValues(s.Values(key)...).Observe(1)
	}
	s.Forget(a)
	if n := testutil.CollectAndCount(info); n != 1 {
		t.Errorf("info series = %d, want 1 (b's)", n)
	}
	if n := testutil.CollectAndCount(count); n != 1 {
		t.Errorf("counter series = %d, want 1", n)
	}
	if n := testutil.CollectAndCount(took); n != 1 {
		t.Errorf("histogram series = %d, want 1", n)
	}
	if v := testutil.ToFloat64(count.WithLabelValues(s.Values(b)...)); v != 1 {
		t.Errorf("b's counter = %v, want 1", v)
	}

	cs := ClusterSeries("server")
	up := cs.Gauge(prometheus.GaugeOpts{Name: "kit_test_up", Help: "test"})
	up.WithLabelValues(cs.Values(client.ObjectKey{Name: "pg"})...).Set(1)
	cs.Forget(client.ObjectKey{Name: "pg"})
	if n := testutil.CollectAndCount(up); n != 0 {
		t.Errorf("cluster-scoped series = %d after Forget, want 0", n)
	}
}
