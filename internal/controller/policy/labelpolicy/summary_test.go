package labelpolicy

import (
	"fmt"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

func TestSummarize(t *testing.T) {
	groups := map[string]tally{"a": {5, 1}, "b": {3, 3}, "c": {9, 1}, "d": {1, 0}}
	top, other := summarize(groups, nil, 2)
	want := []policyv1alpha1.ComplianceSummary{{Name: "b", Workloads: 3, Violations: 3}, {Name: "c", Workloads: 9, Violations: 1}}
	if len(top) != 2 || top[0] != want[0] || top[1] != want[1] {
		t.Errorf("top = %+v", top)
	}
	if other == nil || *other != (policyv1alpha1.ComplianceSummary{Name: otherName, Workloads: 6, Violations: 1, Namespaces: 2}) {
		t.Errorf("other = %+v", other)
	}
	if top, other := summarize(groups, nil, 10); len(top) != 4 || other != nil {
		t.Errorf("under the bound: %+v, %+v", top, other)
	}
	if top, other := summarize(nil, nil, 10); top != nil || other != nil {
		t.Errorf("empty: %+v, %+v", top, other)
	}

	tenants, counted := byTenant(groups, map[string]string{"a": "shop", "b": "shop", "c": noTenant})
	if tenants["shop"] != (tally{8, 4}) || counted["shop"] != 2 || tenants[noTenant] != (tally{10, 1}) || counted[noTenant] != 2 {
		t.Errorf("byTenant = %+v %+v", tenants, counted)
	}
	if got := tenantOf(map[string]string{"tenancy.orderly.dev/tenant": "shop"}); got != "shop" {
		t.Errorf("tenantOf = %q", got)
	}
	if got := tenantOf(nil); got != noTenant {
		t.Errorf("tenantOf(nil) = %q", got)
	}
}

// However many namespaces and tenants an audit sees, a policy has at most
// summaryTopN+1 series per label, and the sum over them is the total.
func TestMetricsCardinalityIsBounded(t *testing.T) {
	key := client.ObjectKey{Name: "bounded"}
	defer series.Forget(key)
	res := &auditResult{namespaces: map[string]tally{}, tenants: map[string]string{}}
	for i := range 500 {
		ns := fmt.Sprintf("ns-%03d", i)
		res.namespaces[ns] = tally{workloads: 2, violations: 1}
		res.tenants[ns] = fmt.Sprintf("tenant-%03d", i%100)
		res.workloads += 2
		res.violations++
	}
	recordAudit(key, res, 0.1)
	if n := seriesOfPolicy(t, violations, key.Name); n != summaryTopN+1 {
		t.Errorf("%d namespace series, want %d", n, summaryTopN+1)
	}
	if n := seriesOfPolicy(t, tenantViolations, key.Name); n != summaryTopN+1 {
		t.Errorf("%d tenant series, want %d", n, summaryTopN+1)
	}
	if other := testutil.ToFloat64(violations.WithLabelValues(series.Values(key, otherName)...)); other != 500-summaryTopN {
		t.Errorf("(other) = %v, want %d: the sum over the series must stay the total", other, 500-summaryTopN)
	}
	if got := testutil.ToFloat64(workloads.WithLabelValues(series.Values(key)...)); got != 1000 {
		t.Errorf("workloads = %v", got)
	}
}

// seriesOfPolicy counts c's series of one policy: other tests (and, in the integration
// run, the suite's manager) record series of their own policies in the same vectors.
func seriesOfPolicy(t *testing.T, c prometheus.Collector, policy string) int {
	t.Helper()
	ch := make(chan prometheus.Metric, 1024)
	c.Collect(ch)
	close(ch)
	n := 0
	for m := range ch {
		var d dto.Metric
		if err := m.Write(&d); err != nil {
			t.Fatal(err)
		}
		for _, l := range d.GetLabel() {
			if l.GetName() == MetricLabel && l.GetValue() == policy {
				n++
			}
		}
	}
	return n
}
