//go:build integration

package labelpolicy

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

// TestWithoutMutatingAdmissionPolicy runs against a second API server that does not
// serve MutatingAdmissionPolicy: discovery sees that, the status says honestly that
// labels cannot be filled in, and a Default policy still rejects a missing label.
func TestWithoutMutatingAdmissionPolicy(t *testing.T) {
	g := NewWithT(t)
	env := testenv.StartForTest(t, testenv.WithoutMutatingAdmissionPolicy())

	served, err := admission.ServesMutatingAdmissionPolicy(env.Config)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(served).To(BeFalse(), "the API server still serves MutatingAdmissionPolicy")

	c, ctx := env.Client, context.Background()
	env.StartManagerForTest(t, kit.Deps{Admission: admission.Config{MAPServed: served}}, []kit.Controller{Controller})

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
