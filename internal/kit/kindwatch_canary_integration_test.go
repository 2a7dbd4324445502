//go:build integration

package kit_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/controller/delivery/canary"
	"orderly.dev/orderly/internal/kit"
)

// reconciles is how many reconciles controller has run in this process, whatever
// their result (controller-runtime's controller_runtime_reconcile_total).
func reconciles(g Gomega, controller string) float64 {
	families, err := metrics.Registry.Gather()
	g.Expect(err).NotTo(HaveOccurred())
	total := 0.0
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == controller {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return total
}

// rolloutStandIn reports every Deployment of ns as rolled out, as the Deployment
// controller would (envtest runs none), until ctx ends.
func rolloutStandIn(ctx context.Context, ns string) {
	for ctx.Err() == nil {
		var list appsv1.DeploymentList
		if err := k.List(ctx, &list, client.InNamespace(ns)); err == nil {
			for i := range list.Items {
				d := &list.Items[i]
				n := ptr.Deref(d.Spec.Replicas, 1)
				want := appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n, ReadyReplicas: n, AvailableReplicas: n}
				if !equality.Semantic.DeepEqual(d.Status, want) {
					d.Status = want
					_ = k.Status().Update(ctx, d)
				}
			}
		}
		select {
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// fakePrometheus parses every query, so that a Canary's queries are valid and it has
// nothing to ask Prometheus again for.
func fakePrometheus(t *testing.T) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprintf(w, `{"status":"success","data":%q}`, r.URL.Query().Get("query"))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// virtualServiceCRD is enough of Istio's VirtualService CRD for the API server to serve
// the kind; the Canary reads and writes it as unstructured.
const virtualServiceCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: virtualservices.networking.istio.io
spec:
  group: networking.istio.io
  names: {kind: VirtualService, listKind: VirtualServiceList, plural: virtualservices, singular: virtualservice}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// idleWindow is how long an idle Canary is watched for reconciles.
const idleWindow = 20 * time.Second

// A Canary that has Succeeded and waits for the CRD of its route kind (Istio's
// VirtualService, not installed) is not reconciled again while nothing changes: the
// CRD is watched for, not polled. Installing it brings the Canary back through that
// watch (nothing else would: it has no requeue).
func TestIdleCanaryWaitingForACRDIsNotReconciled(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	requests := &requestCounter{}
	countingEnv(requests).StartManagerForTest(t, kit.Deps{Namespace: "orderly-test-system"}, []kit.Controller{canary.Controller})
	ns := "kit-idle-canary"
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	standIn, stop := context.WithCancel(ctx)
	defer stop()
	go rolloutStandIn(standIn, ns)
	labels := map[string]string{"app": "web"}
	g.Expect(k.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "web:1"}}}}},
	})).To(Succeed())
	c := &deliveryv1alpha1.Canary{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: deliveryv1alpha1.CanarySpec{
			TargetRef: deliveryv1alpha1.TargetRef{Name: "web"},
			Service:   deliveryv1alpha1.CanaryService{Port: 8080},
			Traffic:   deliveryv1alpha1.Traffic{VirtualService: &deliveryv1alpha1.VirtualServiceTraffic{Name: "web"}},
			Steps:     []deliveryv1alpha1.Step{{Weight: ptr.To[int32](50), Interval: &metav1.Duration{Duration: time.Minute}}},
			Analysis: deliveryv1alpha1.Analysis{
				Provider:   deliveryv1alpha1.Provider{Address: fakePrometheus(t), Timeout: metav1.Duration{Duration: 2 * time.Second}},
				Resolution: metav1.Duration{Duration: time.Second},
				Metrics: []deliveryv1alpha1.Metric{{
					Name: "errors", Query: `sum(rate(requests_total{namespace="{{ .Namespace }}",variant="{{ .Variant }}",code=~"5.."}[1m]))`,
					MinSamples: 3, Threshold: &deliveryv1alpha1.Threshold{Max: ptr.To("0.1")},
				}},
				OnProviderError: deliveryv1alpha1.ProviderErrorHold,
				MaxHold:         metav1.Duration{Duration: time.Minute},
				MaxInconclusive: 3,
			},
		},
	}
	g.Expect(k.Create(ctx, c)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), c) })

	get := func(g Gomega) *deliveryv1alpha1.Canary {
		var got deliveryv1alpha1.Canary
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(c), &got)).To(Succeed())
		return &got
	}
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.Phase).To(Equal(deliveryv1alpha1.PhaseSucceeded))
		tr := meta.FindStatusCondition(got.Status.Conditions, deliveryv1alpha1.ConditionTrafficReady)
		g.Expect(tr).NotTo(BeNil())
		g.Expect(tr.Reason).To(Equal("VirtualServiceCRDMissing"))
		q := meta.FindStatusCondition(got.Status.Conditions, deliveryv1alpha1.ConditionQueriesValid)
		g.Expect(q).NotTo(BeNil())
		g.Expect(q.Status).To(Equal(metav1.ConditionTrue))
	}).WithTimeout(time.Minute).Should(Succeed())

	// Settled: the reconciles of the Canary's own writes are over.
	var before float64
	g.Eventually(func(g Gomega) {
		n := reconciles(g, canary.Name)
		g.Consistently(func(g Gomega) float64 { return reconciles(g, canary.Name) }).WithTimeout(3 * time.Second).Should(Equal(n))
		before = n
	}).WithTimeout(time.Minute).Should(Succeed())
	sent := requests.count(nil)
	var during float64
	g.Consistently(func(g Gomega) float64 {
		during = reconciles(g, canary.Name) - before
		return during
	}).WithTimeout(idleWindow).WithPolling(time.Second).Should(BeNumerically("==", 0),
		"an idle Canary waiting for a CRD was reconciled")
	t.Logf("reconciles of the idle Canary in %s: %.0f; requests to the API server: %d", idleWindow, during, requests.count(nil)-sent)

	installCRD(t, virtualServiceCRD)
	g.Eventually(func(g Gomega) {
		got := get(g)
		g.Expect(got.Status.Traffic).To(HaveLen(1))
		g.Expect(got.Status.Traffic[0].Installed).To(BeTrue())
		tr := meta.FindStatusCondition(got.Status.Conditions, deliveryv1alpha1.ConditionTrafficReady)
		g.Expect(tr.Reason).To(Equal("RouteNotFound"))
	}).WithTimeout(time.Minute).Should(Succeed())
}
