package canary

import (
	"errors"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// series holds every per-Canary metric, so that a deleted Canary's series all go with
// it (series.Forget).
var series = kit.NamespacedSeries("namespace", "canary")

// phases are the values of the phase label, each set to 1 for the current phase and
// 0 for the others.
var phases = []deliveryv1alpha1.CanaryPhase{
	deliveryv1alpha1.PhaseInitializing, deliveryv1alpha1.PhaseProgressing, deliveryv1alpha1.PhasePaused,
	deliveryv1alpha1.PhaseHolding, deliveryv1alpha1.PhasePromoting, deliveryv1alpha1.PhaseSucceeded, deliveryv1alpha1.PhaseRolledBack,
}

var (
	phaseGauge = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_canary_phase",
		Help: "1 for a Canary's current phase, 0 for the others.",
	}, "phase")
	stepGauge = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_canary_step",
		Help: "Index of the step a Canary is at.",
	})
	weightGauge = series.Gauge(prometheus.GaugeOpts{
		Name: "orderly_canary_weight",
		Help: "Percentage of traffic a Canary sends to its canary.",
	})
	verdicts = series.Counter(prometheus.CounterOpts{
		Name: "orderly_canary_verdicts_total",
		Help: "Step decisions of a Canary, by result (Pass, Fail, Inconclusive, Promoted, Aborted, HoldExpired, ProviderError).",
	}, "result")
)

// Process-wide metrics of the analysis, not per Canary.
var (
	analysisLag = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "orderly_canary_analysis_lag_seconds",
		Help:    "How late a step's analysis ran after its scheduled time (its interval after the step's weight was in place).",
		Buckets: []float64{0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30},
	})
	queries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "orderly_canary_prometheus_queries_total",
		Help: "Requests to Prometheus servers, by result (ok, invalid: the query was refused, unavailable).",
	}, []string{"result"})
	queryDuration = prometheus.NewHistogram(prometheus.HistogramOpts{
		Name:    "orderly_canary_prometheus_query_duration_seconds",
		Help:    "How long requests to Prometheus servers took.",
		Buckets: prometheus.ExponentialBuckets(0.001, 2.5, 12),
	})
)

func init() {
	metrics.Registry.MustRegister(analysisLag, queries, queryDuration)
}

func recordQuery(err error, took time.Duration) {
	var qe *QueryError
	switch {
	case err == nil:
		queries.WithLabelValues("ok").Inc()
	case errors.As(err, &qe):
		queries.WithLabelValues("invalid").Inc()
	default:
		queries.WithLabelValues("unavailable").Inc()
	}
	queryDuration.Observe(took.Seconds())
}

// recordMetrics sets the Canary's series from st, counting the decisions that prev
// did not have.
func recordMetrics(key client.ObjectKey, prev, st *deliveryv1alpha1.CanaryStatus) {
	for _, p := range phases {
		v := 0.0
		if st.Phase == p {
			v = 1
		}
		phaseGauge.WithLabelValues(series.Values(key, string(p))...).Set(v)
	}
	stepGauge.WithLabelValues(series.Values(key)...).Set(float64(st.CurrentStep))
	weightGauge.WithLabelValues(series.Values(key)...).Set(float64(st.CanaryWeight))
	for _, d := range newDecisions(prev.Decisions, st.Decisions) {
		verdicts.WithLabelValues(series.Values(key, string(d.Verdict))...).Inc()
	}
}

// newDecisions are the decisions of now (newest first) that were not in before.
func newDecisions(before, now []deliveryv1alpha1.StepDecision) []deliveryv1alpha1.StepDecision {
	if len(before) == 0 {
		return now
	}
	for i := range now {
		if now[i].Time.Equal(&before[0].Time) && now[i].Step == before[0].Step && now[i].Revision == before[0].Revision {
			return now[:i]
		}
	}
	return now
}
