//go:build integration

package labelpolicy

import (
	"context"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// TestRemediationNamesWhatItLabelled: with remediate LabelOnly, status names each
// workload labelled, with the value written and the audit's time, and the Remediated
// Event names them too, so an auditor can tell which objects Orderly changed.
func TestRemediationNamesWhatItLabelled(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "remn-a", map[string]string{"test": "remn", "cc-remn": "cc-a"})
	createNS(t, "remn-b", map[string]string{"test": "remn"})
	g.Expect(k.Create(ctx, deployment("remn-a", "web", nil))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("remn-b", "api", nil))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("remn-b", "fine", map[string]string{"cc-remn": "cc-b"}))).To(Succeed())

	p := newPolicy("remn", "cc-remn", policyv1alpha1.ActionAudit)
	p.Spec.AllowedPattern = "cc-[a-z]"
	p.Spec.DefaultValue = "cc-z"
	p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
	createPolicy(t, p)

	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "remn")
		g.Expect(got.Status.LastAuditTime).NotTo(BeNil())
		g.Expect(got.Status.RecentlyRemediated).To(ConsistOf(
			And(HaveField("Kind", "Deployment"), HaveField("Namespace", "remn-a"), HaveField("Name", "web"), HaveField("Value", "cc-a")),
			And(HaveField("Kind", "Deployment"), HaveField("Namespace", "remn-b"), HaveField("Name", "api"), HaveField("Value", "cc-z")),
		))
		for _, w := range got.Status.RecentlyRemediated {
			g.Expect(w.Time.IsZero()).To(BeFalse())
		}
	}, timeout, poll).Should(Succeed())

	g.Eventually(func(g Gomega) {
		g.Expect(strings.Join(eventNotes(g, p.UID, ReasonRemediated), "\n")).To(And(ContainSubstring("Deployment remn-a/web"), ContainSubstring("Deployment remn-b/api")))
	}, timeout, poll).Should(Succeed())
}

// TestRemediationReportsGitOpsManagedWorkloads: a workload that Argo CD or Flux manages
// is labelled like any other, and the audit says which tool manages it, counts them
// and warns that the label is not in Git.
func TestRemediationReportsGitOpsManagedWorkloads(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "remg", map[string]string{"test": "remg"})
	argo := deployment("remg", "argo", nil)
	argo.Annotations = map[string]string{"argocd.argoproj.io/tracking-id": "shop:apps/Deployment:remg/argo"}
	g.Expect(k.Create(ctx, argo)).To(Succeed())
	g.Expect(k.Create(ctx, deployment("remg", "flux", map[string]string{"kustomize.toolkit.fluxcd.io/name": "apps"}))).To(Succeed())
	g.Expect(k.Create(ctx, deployment("remg", "plain", nil))).To(Succeed())

	p := newPolicy("remg", "cc-remg", policyv1alpha1.ActionAudit)
	p.Spec.DefaultValue = "cc-z"
	p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
	createPolicy(t, p)

	g.Eventually(func(g Gomega) {
		got := getPolicy(g, "remg")
		g.Expect(got.Status.Remediated).To(BeEquivalentTo(3))
		g.Expect(got.Status.RemediatedGitOpsManaged).To(BeEquivalentTo(2))
		g.Expect(got.Status.RecentlyRemediated).To(ConsistOf(
			And(HaveField("Name", "argo"), HaveField("GitOps", policyv1alpha1.GitOpsTool("ArgoCD"))),
			And(HaveField("Name", "flux"), HaveField("GitOps", policyv1alpha1.GitOpsTool("Flux"))),
			And(HaveField("Name", "plain"), HaveField("GitOps", policyv1alpha1.GitOpsTool(""))),
		))
	}, timeout, poll).Should(Succeed())

	g.Eventually(func(g Gomega) {
		notes := eventNotes(g, p.UID, ReasonRemediatedGitOpsManaged)
		g.Expect(notes).To(HaveLen(1))
		g.Expect(notes[0]).To(And(ContainSubstring("2 of the workload(s) labelled cc-remg are managed by Argo CD or Flux"), ContainSubstring("not in Git")))
	}, timeout, poll).Should(Succeed())
}

// eventNotes are the notes of the Events of reason about the object with uid.
func eventNotes(g Gomega, uid types.UID, reason string) []string {
	var list eventsv1.EventList
	g.Expect(k.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
	var notes []string
	for _, e := range list.Items {
		if e.Regarding.UID == uid && e.Reason == reason {
			notes = append(notes, e.Note)
		}
	}
	return notes
}
