//go:build e2e

package e2e

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testprom"
)

// TestAlertRulesOnARealPrometheus: a real Prometheus scrapes the running manager as
// job="orderly" and loads config/prometheus/rules.yaml. Every rule evaluates without
// error against the manager's real series, the manager-down and no-leader alerts stay
// quiet while it runs and leads, and the controller-runtime series the rules and the
// dashboard read exist. (That every metric name they use is registered at all is
// config/monitoring_test.go's check.)
func TestAlertRulesOnARealPrometheus(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	u, err := url.Parse(metricsURL)
	g.Expect(err).NotTo(HaveOccurred())
	rules := filepath.Join(testenv.RepoRoot(), "config", "prometheus", "rules.yaml")
	prom, err := testprom.Start(testprom.Options{Targets: []string{u.Host}, Job: "orderly", RuleFiles: []string{rules}})
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(prom.Close)
	g.Expect(prom.WaitForData(ctx, `up{job="orderly"} == 1`)).To(Succeed())
	// Something to reconcile, so that the per-reconcile series exist even when this
	// test runs alone.
	const ns = "e2e-monitoring"
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	g.Expect(k.Create(ctx, &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: datav1alpha1.DevDatabaseSpec{ServerRef: "e2e-monitoring-no-such-server"}})).To(Succeed())

	raw, err := os.ReadFile(rules)
	g.Expect(err).NotTo(HaveOccurred())
	var file struct {
		Groups []struct {
			Rules []struct {
				Alert string `json:"alert"`
			} `json:"rules"`
		} `json:"groups"`
	}
	g.Expect(yaml.Unmarshal(raw, &file)).To(Succeed())
	var want int
	for _, gr := range file.Groups {
		want += len(gr.Rules)
	}

	type ruleState struct {
		Name           string    `json:"name"`
		Health         string    `json:"health"`
		LastError      string    `json:"lastError"`
		State          string    `json:"state"`
		LastEvaluation time.Time `json:"lastEvaluation"`
	}
	g.Eventually(func(g Gomega) {
		var got struct {
			Groups []struct {
				Rules []ruleState `json:"rules"`
			} `json:"groups"`
		}
		g.Expect(prom.Get(ctx, "/api/v1/rules", &got)).To(Succeed())
		var n int
		for _, gr := range got.Groups {
			for _, r := range gr.Rules {
				n++
				g.Expect(r.LastEvaluation.IsZero()).To(BeFalse(), "%s not evaluated yet", r.Name)
				g.Expect(r.Health).To(Equal("ok"), "%s: %s", r.Name, r.LastError)
				if r.Name == "OrderlyManagerDown" || r.Name == "OrderlyNoLeader" {
					g.Expect(r.State).To(Equal("inactive"), "%s while the manager runs and leads", r.Name)
				}
			}
		}
		g.Expect(n).To(Equal(want), "rules loaded")
	}, 90*time.Second, time.Second).Should(Succeed())

	for _, q := range []string{
		`leader_election_master_status{job="orderly", name="orderly-manager"} == 1`,
		`controller_runtime_reconcile_total{job="orderly"}`,
		`controller_runtime_reconcile_errors_total{job="orderly"}`,
		`controller_runtime_reconcile_time_seconds_bucket{job="orderly"}`,
		`workqueue_depth{job="orderly"}`,
		`workqueue_longest_running_processor_seconds{job="orderly"}`,
		`rest_client_requests_total{job="orderly"}`,
	} {
		g.Expect(prom.WaitForData(ctx, q)).To(Succeed(), q)
	}
}
