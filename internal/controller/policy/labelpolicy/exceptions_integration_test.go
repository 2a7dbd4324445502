//go:build integration

package labelpolicy

import (
	"context"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// TestExceptionAdmitsUntilItExpires: an exception admits its namespace's workloads and
// keeps the ones already running out of the violations; when it expires, with no edit
// of the policy and no restart, the regenerated policy refuses them again, status
// says Expired, the audit counts the workload as a violation and an Event says so.
func TestExceptionAdmitsUntilItExpires(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "exc-legacy", map[string]string{"test": "exc"})
	createNS(t, "exc-other", map[string]string{"test": "exc"})
	g.Expect(k.Create(ctx, deployment("exc-legacy", "running", nil))).To(Succeed())

	expires := time.Now().Add(12 * time.Second).Truncate(time.Second)
	p := newPolicy("exc", "cc-exc", policyv1alpha1.ActionDeny)
	p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{
		{Name: "migration", Namespaces: []string{"exc-legacy"}, Reason: "moving to the new billing", Expires: metav1.NewTime(expires)},
		{Name: "long", Namespaces: []string{"exc-none"}, Reason: "kept for later", Expires: metav1.NewTime(time.Now().Add(time.Hour))},
	}
	createPolicy(t, p)

	err := waitEnforced(t, func() client.Object { return deployment("exc-other", "probe", nil) })
	g.Expect(err.Error()).To(ContainSubstring("has no label cc-exc"))
	g.Expect(k.Create(ctx, deployment("exc-legacy", "new", nil))).To(Succeed(), "the exception admits its namespace's workloads")

	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "exc")
		g.Expect(got.Status.Exceptions).To(HaveLen(2))
		g.Expect(got.Status.Exceptions[0].Name).To(Equal("migration"))
		g.Expect(got.Status.Exceptions[0].State).To(Equal(policyv1alpha1.ExceptionActive))
		g.Expect(got.Status.Exceptions[0].Workloads).To(BeNumerically(">=", 1))
		g.Expect(got.Status.Excepted).To(BeNumerically(">=", 1))
		g.Expect(got.Status.Violations).To(BeZero(), "an excepted workload is not a violation")
	}, timeout, poll).Should(Succeed())
	g.Expect(time.Now().Before(expires)).To(BeTrue(), "the test was too slow to see the exception active")

	// At the expiry the controller compiles the policy again: no edit, no restart.
	g.Eventually(func() error {
		d := deployment("exc-legacy", "after", nil)
		err := k.Create(ctx, d)
		if err == nil {
			_ = k.Delete(ctx, d)
		}
		return err
	}, timeout, poll).Should(MatchError(ContainSubstring("has no label cc-exc")))
	g.Expect(time.Now().After(expires)).To(BeTrue(), "refused before the exception expired")

	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "exc")
		g.Expect(got.Status.Exceptions[0].State).To(Equal(policyv1alpha1.ExceptionExpired))
		g.Expect(got.Status.Exceptions[0].Workloads).To(BeZero())
		g.Expect(got.Status.Exceptions[1].State).To(Equal(policyv1alpha1.ExceptionActive))
		g.Expect(got.Status.Violations).To(BeNumerically("==", 2), "the workloads the exception admitted are violations now")
		g.Expect(got.Status.Excepted).To(BeZero())
		g.Expect(got.Generation).To(Equal(p.Generation), "nobody edited the policy")
	}, timeout, poll).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(eventNotes(g, p.UID, ReasonExceptionExpired)).To(ContainElement(ContainSubstring("migration")), "no ExceptionExpired Event")
	}, timeout, poll).Should(Succeed())
}

func TestExceptionValidation(t *testing.T) {
	cases := []struct {
		name, exception, wantErr string
	}{
		{"neither namespaces nor selector", "name: x\n  reason: r\n  expires: \"2030-01-01T00:00:00Z\"", "an exception names namespaces, a selector, or both"},
		{"no expiry", "name: x\n  reason: r\n  namespaces: [a]", "expires: Required value"},
		{"no reason", "name: x\n  namespaces: [a]\n  expires: \"2030-01-01T00:00:00Z\"", "reason: Required value"},
		{"bad name", "name: Not_A_Name\n  reason: r\n  namespaces: [a]\n  expires: \"2030-01-01T00:00:00Z\"", "spec.exceptions[0].name"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			g := NewWithT(t)
			raw := "apiVersion: policy.orderly.dev/v1alpha1\nkind: LabelPolicy\nmetadata:\n  name: invalid-exc\nspec:\n  label: cost-center\n  exceptions:\n  - " +
				strings.ReplaceAll(tc.exception, "\n  ", "\n    ") + "\n"
			u := &unstructured.Unstructured{}
			g.Expect(yaml.Unmarshal([]byte(raw), &u.Object)).To(Succeed())
			err := k.Create(context.Background(), u)
			g.Expect(err).To(HaveOccurred())
			g.Expect(err.Error()).To(ContainSubstring(tc.wantErr))
			t.Log(err)
		})
	}
}
