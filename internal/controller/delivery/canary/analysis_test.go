package canary

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
)

func TestRenderQuery(t *testing.T) {
	got, err := renderQuery(`rate(http_errors{app="{{ .Target }}",ns="{{.Namespace}}",variant="{{ .Variant }}"}[1m])`, queryVars{Target: "web", Namespace: "shop", Variant: "canary"})
	if err != nil || got != `rate(http_errors{app="web",ns="shop",variant="canary"}[1m])` {
		t.Fatalf("got %q, %v", got, err)
	}
	// A loop held a manager's worker as long as it ran ({{range 100000000000}}), and
	// printf could make a query of any size: refused (found writing FuzzRenderQuery).
	for _, bad := range []string{`up{x="{{ .Nope }}"}`, `up{x="{{ .Target }"}`, `{{ call .Target }}`, `{{range 100000000000}}{{end}}`,
		`{{printf "%0999999d" 0}}`} {
		if _, err := renderQuery(bad, queryVars{Target: "web"}); err == nil {
			t.Errorf("no error for %q", bad)
		}
	}
}

func TestJudgeStepRecordsEveryMetric(t *testing.T) {
	c := newCanary(weightStep(10, 10*time.Second))
	c.Status.Revision, c.Status.CurrentStep, c.Status.CanaryWeight = "r2", 0, 10
	c.Spec.Analysis.Metrics = []deliveryv1alpha1.Metric{
		{Name: "errors", Query: "q", MinSamples: 5, Baseline: &deliveryv1alpha1.BaselineComparison{Direction: deliveryv1alpha1.HigherIsWorse, MaxRelativeShift: "0.1", MaxAbsoluteShift: "0.01", Alpha: "0.05"}},
		{Name: "latency", Query: "q", MinSamples: 5, Threshold: &deliveryv1alpha1.Threshold{Max: ptr.To("0.5")}},
	}
	samples := map[string][]float64{
		"errors/canary":   {0.2, 0.3, 0.25, 0.22, 0.28, 0.31},
		"errors/primary":  {0, 0.01, 0, 0, 0.01, 0},
		"latency/canary":  {0.1, 0.1, 0.2, 0.1, 0.1},
		"latency/primary": {},
	}
	out := judgeStep(c, t0, t0.Add(10*time.Second), samples)
	d := out.decision
	if out.verdict != deliveryv1alpha1.VerdictFail || d.Verdict != deliveryv1alpha1.VerdictFail || len(d.Metrics) != 2 {
		t.Fatalf("decision %+v", d)
	}
	e := d.Metrics[0]
	if e.Verdict != deliveryv1alpha1.VerdictFail || e.Statistic != "36" || e.PValue == "" || e.Canary.Count != 6 || e.Baseline.Count != 6 || !strings.Contains(d.Reason, "errors") {
		t.Fatalf("errors metric %+v, reason %q", e, d.Reason)
	}
	if l := d.Metrics[1]; l.Verdict != deliveryv1alpha1.VerdictPass || l.Baseline != nil || l.PValue != "" {
		t.Fatalf("latency metric %+v", l)
	}
	if d.Revision != "r2" || d.Weight != 10 || d.WindowStart == nil || !d.WindowStart.Time.Equal(t0) {
		t.Fatalf("decision header %+v", d)
	}
	// Too few samples (NaN ones do not count) is inconclusive, not a pass.
	nan := map[string][]float64{"errors/canary": {0.1, 0.1}, "errors/primary": {0, 0, 0, 0, 0, 0}, "latency/canary": {0.1, 0.1, 0.1, 0.1, 0.1}}
	if out := judgeStep(c, t0, t0.Add(time.Minute), nan); out.verdict != deliveryv1alpha1.VerdictInconclusive {
		t.Fatalf("verdict %s", out.verdict)
	}
	_ = metav1.Now
}

// A Prometheus busy with other Canaries' analyses is no outage: the analysis comes
// back later instead of holding. One that does not answer is an outage.
func TestBusyPrometheusIsNotAnOutage(t *testing.T) {
	c := newCanary(weightStep(10, 10*time.Second))
	c.Spec.Analysis.Provider.Address = "http://127.0.0.1:1"
	c.Spec.Analysis.Metrics = []deliveryv1alpha1.Metric{{Name: "m", Query: `up{v="{{ .Variant }}"}`, MinSamples: 3, Threshold: &deliveryv1alpha1.Threshold{Max: ptr.To("1")}}}
	c.Status.StepStartedAt = &metav1.Time{Time: t0}
	r := &Reconciler{gate: newGate(1, time.Minute), prom: newPrometheusClients()}
	leave, err := r.gate.enter(c.Spec.Analysis.Provider.Address, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	out, err := r.analyse(context.Background(), c, t0.Add(10*time.Second))
	if !errors.Is(err, errBusy) || out != nil {
		t.Fatalf("busy: outcome %+v, err %v; want errBusy and no outcome", out, err)
	}
	leave()
	out, err = r.analyse(context.Background(), c, t0.Add(10*time.Second))
	if err != nil || out == nil || out.providerErr == nil {
		t.Fatalf("unreachable: outcome %+v, err %v; want a provider error", out, err)
	}
}
