//go:build e2e

package attack

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// LabelPolicy and LabelValueSet: the platform requires a cost-center label from a
// LabelValueSet that finance keeps, in team-a. Mallory tries to run a workload without
// it, to except herself (the policy's exceptions, its selector, the value list), to
// take the label off a workload that was admitted, and to slip a bare pod past the
// policy as if a controller had made it (owned by her ConfigMap, by a ReplicaSet
// without being its controller's, by a controller the policy does not trust, or by a
// ReplicaSet that does not exist).
func TestAttackLabelPolicy(t *testing.T) {
	ctx := context.Background()
	set := &policyv1alpha1.LabelValueSet{ObjectMeta: metav1.ObjectMeta{Name: "attack-cost-centers"}, Spec: policyv1alpha1.LabelValueSetSpec{
		Values: []policyv1alpha1.LabelValue{{Value: "cc-0042"}}}}
	create(t, admin, set)
	p := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "attack-cost-center"}, Spec: policyv1alpha1.LabelPolicySpec{
		Label:             "cost-center",
		AllowedValuesFrom: &policyv1alpha1.AllowedValuesSource{LabelValueSet: set.Name},
		Action:            policyv1alpha1.ActionDeny,
		Match:             policyv1alpha1.LabelPolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{teamLabel: "a"}}},
	}}
	// When the test ends: the policy goes, then (once the garbage collector removed
	// its binding, which would otherwise refuse every workload in team-a for want of
	// the set) the set.
	t.Cleanup(func() {
		binding := &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "orderly-labelpolicy-" + p.Name}}
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(context.Background(), client.ObjectKeyFromObject(binding), binding))
		}, timeout, poll).Should(BeTrue())
	})
	create(t, admin, p)
	withLabel := func(name, value string) *corev1.Pod {
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}}, Tolerations: kwokTolerations}}
		if value != "" {
			pod.Labels = map[string]string{"cost-center": value}
		}
		return pod
	}

	g := NewWithT(t)
	// The policy reaches admission a moment after Ready: wait on a dry run.
	g.Eventually(func(g Gomega) {
		refused(g, attacker.Create(ctx, withLabel("probe", ""), client.DryRunAll), "cost-center")
	}, timeout, poll).Should(Succeed())

	t.Run("a workload without an allowed label", func(t *testing.T) {
		g := NewWithT(t)
		for _, v := range []string{"", "cc-9999"} {
			refused(g, attacker.Create(ctx, withLabel("unlabelled", v)), "cost-center")
			d := deployment(teamA, "unlabelled")
			if v != "" {
				d.Labels = map[string]string{"cost-center": v}
			}
			refused(g, attacker.Create(ctx, d), "cost-center")
		}
		// Control: with an allowed value it is admitted; taking the label off later is
		// refused too.
		d := deployment(teamA, "labelled")
		d.Labels = map[string]string{"cost-center": "cc-0042"}
		create(t, attacker, d)
		refused(g, attacker.Patch(ctx, d, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"cost-center":null}}}`))), "cost-center")
		get(g, d)
		g.Expect(d.Labels).To(HaveKeyWithValue("cost-center", "cc-0042"))
	})

	t.Run("excepting herself", func(t *testing.T) {
		g := NewWithT(t)
		for _, patch := range []string{
			`{"spec":{"exceptions":[{"name":"mine","namespaces":["` + teamA + `"],"reason":"mallory","expires":"2099-01-01T00:00:00Z"}]}}`,
			`{"spec":{"match":{"namespaceSelector":{"matchLabels":{"nobody":"here"}}}}}`,
			`{"spec":{"action":"Audit"}}`,
		} {
			forbiddenByRBAC(g, attacker.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))))
		}
		forbiddenByRBAC(g, attacker.Patch(ctx, set.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"values":[{"value":"cc-0042"},{"value":"mallory"}]}}`))))
		forbiddenByRBAC(g, attacker.Delete(ctx, p.DeepCopy()))
		// The generated admission objects are not hers either.
		forbiddenByRBAC(g, attacker.Delete(ctx, &admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "orderly-labelpolicy-" + p.Name}}))
		// Control: the platform's exception admits her workload until it expires.
		g.Expect(admin.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"exceptions":[{"name":"migration","namespaces":["`+teamA+`"],"reason":"FIN-1","expires":"2099-01-01T00:00:00Z"}]}}`)))).To(Succeed())
		t.Cleanup(func() {
			_ = admin.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"exceptions":null}}`)))
		})
		g.Eventually(func() error { return attacker.Create(ctx, withLabel("excepted", ""), client.DryRunAll) }, timeout, poll).Should(Succeed())
		g.Expect(admin.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"exceptions":null}}`)))).To(Succeed())
		g.Eventually(func(g Gomega) {
			refused(g, attacker.Create(ctx, withLabel("excepted", ""), client.DryRunAll), "cost-center")
		}, timeout, poll).Should(Succeed())
	})

	t.Run("a bare pod dressed as a controller's", func(t *testing.T) {
		g := NewWithT(t)
		owner := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "fake-owner"}}
		create(t, attacker, owner)
		// Judged as bare pods: any owner that is not a trusted controller.
		for name, ref := range map[string]metav1.OwnerReference{
			"disguised":            {APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID},
			"disguised-control":    {APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: ptr.To(true)},
			"disguised-rs":         {APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-1", UID: owner.UID},
			"disguised-old-api":    {APIVersion: "apps/v1beta2", Kind: "ReplicaSet", Name: "web-1", UID: owner.UID, Controller: ptr.To(true)},
			"disguised-operator":   {APIVersion: "postgresql.cnpg.io/v1", Kind: "Cluster", Name: "db", UID: owner.UID, Controller: ptr.To(true)},
			"disguised-deployment": {APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: owner.UID, Controller: ptr.To(true)},
		} {
			pod := withLabel(name, "")
			pod.OwnerReferences = []metav1.OwnerReference{ref}
			refused(g, attacker.Create(ctx, pod), "cost-center")
		}
		// Contained: a controller reference to a ReplicaSet that does not exist is
		// admitted (the policy cannot see owners), and the garbage collector deletes
		// the pod.
		ghost := withLabel("ghost-owned", "")
		ghost.OwnerReferences = []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "ghost", UID: "00000000-0000-0000-0000-00000000dead", Controller: ptr.To(true)}}
		create(t, attacker, ghost)
		g.Eventually(func() bool {
			return apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(ghost), &corev1.Pod{}))
		}, timeout, poll).Should(BeTrue(), "the pod of a ReplicaSet that does not exist is garbage-collected")
		// Control: a labelled Deployment whose template does not carry the label runs
		// its pods: its ReplicaSet's pods are judged through it.
		d := deployment(teamA, "controlled")
		d.Labels = map[string]string{"cost-center": "cc-0042"}
		create(t, attacker, d)
		g.Eventually(func(g Gomega) {
			var pods corev1.PodList
			g.Expect(admin.List(ctx, &pods, client.InNamespace(teamA), client.MatchingLabels{"app": "controlled"})).To(Succeed())
			g.Expect(pods.Items).NotTo(BeEmpty())
			g.Expect(pods.Items[0].Labels).NotTo(HaveKey("cost-center"))
		}, timeout, poll).Should(Succeed())
	})
}
