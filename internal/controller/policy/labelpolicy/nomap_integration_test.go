//go:build integration

package labelpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/testenv"
)

// TestWithoutMutatingAdmissionPolicy runs against a second API server that does not
// serve MutatingAdmissionPolicy: discovery sees that, the status says honestly that
// labels cannot be filled in, and a Default policy still rejects a missing label.
func TestWithoutMutatingAdmissionPolicy(t *testing.T) {
	g := NewWithT(t)
	env, cfg, err := testenv.StartWithoutMutatingAdmissionPolicy()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = env.Stop() })

	served, err := ServesMutatingAdmissionPolicy(cfg)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served).To(BeFalse(), "the API server still serves MutatingAdmissionPolicy")

	c, err := client.New(cfg, client.Options{Scheme: k.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:  k.Scheme(),
		Metrics: metricsserver.Options{BindAddress: "0"},
		Cache:   cache.Options{ByObject: CacheByObject()},
	})
	g.Expect(err).NotTo(HaveOccurred())
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader()}
	skip := true
	g.Expect(r.SetupWithManager(ctx, mgr, controller.Options{SkipNameValidation: &skip})).To(Succeed())
	go func() { _ = mgr.Start(ctx) }()

	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "nomap", Labels: map[string]string{"test": "nomap", "cc-nomap": "from-ns"}}})).To(Succeed())
	p := newPolicy("nomap", "cc-nomap", policyv1alpha1.ActionDefault)
	p.Spec.DefaultValue = "shared"
	g.Expect(c.Create(ctx, p)).To(Succeed())

	g.Eventually(func(g Gomega) {
		var got policyv1alpha1.LabelPolicy
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "nomap"}, &got)).To(Succeed())
		g.Expect(got.Status.AdmissionMode).To(Equal(policyv1alpha1.AdmissionModeValidationOnly))
		cond := meta.FindStatusCondition(got.Status.Conditions, policyv1alpha1.ConditionDefaultingAvailable)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(cond.Reason).To(Equal(ReasonMutationUnavailable))
		g.Expect(cond.Message).To(ContainSubstring("missing labels are rejected instead of filled in"))
	}, timeout, poll).Should(Succeed())

	// Nothing fills the label in, so the validating policy rejects it.
	g.Eventually(func() error {
		d := deployment("nomap", "", nil)
		d.GenerateName = "web-"
		err := c.Create(ctx, d)
		if err == nil {
			_ = c.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("has no label cc-nomap")))
}
