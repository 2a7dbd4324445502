//go:build e2e

package attack

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The first line of defence is RBAC: what Orderly's roles (config/rbac/user_roles.yaml,
// aggregated into edit) let a namespace's editor do with each kind. These tests make
// the requests as mallory and beside each one the control: the same request in her
// own namespace, or by the platform team, succeeds. Creates are server-side dry runs
// (authorization comes before validation and admission, so a refusal is RBAC's), except
// where a real object is needed to try its status.

// namespacedKinds are Orderly's namespaced kinds, and whether a namespace's editor may
// create them.
var namespacedKinds = []struct {
	kind      string
	editorMay bool
}{
	{"DevDatabase", true},
	{"SecretRotation", true},
	{"BackupVerification", true},
	{"Canary", true},
	{"ServiceDomain", true},
	// Platform administrators only, until it has run in more fleets
	// (docs/security.md); a namespace's people may read it.
	{"PlacementPolicy", false},
}

// TestAttackNamespacedKindsElsewhere: mallory cannot create or read any of Orderly's
// namespaced kinds in team-b, kube-system or the manager's namespace (so she cannot
// make Orderly act there); in team-a she can (the control), PlacementPolicy aside,
// which only the platform team creates.
func TestAttackNamespacedKindsElsewhere(t *testing.T) {
	ctx := context.Background()
	for _, k := range namespacedKinds {
		t.Run(k.kind, func(t *testing.T) {
			g := NewWithT(t)
			obj := sample(t, k.kind)
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(obj.GroupVersionKind())
			for _, ns := range []string{teamB, "kube-system", managerNamespace} {
				o := obj.DeepCopy()
				o.SetNamespace(ns)
				forbiddenByRBAC(g, attacker.Create(ctx, o, client.DryRunAll))
				forbiddenByRBAC(g, attacker.List(ctx, list, client.InNamespace(ns)))
			}
			// Control: in her own namespace.
			o := obj.DeepCopy()
			o.SetNamespace(teamA)
			if k.editorMay {
				g.Expect(attacker.Create(ctx, o, client.DryRunAll)).To(Succeed())
			} else {
				forbiddenByRBAC(g, attacker.Create(ctx, o, client.DryRunAll))
				g.Expect(admin.Create(ctx, o.DeepCopy(), client.DryRunAll)).To(Succeed(), "the platform team creates it")
			}
			g.Expect(attacker.List(ctx, list, client.InNamespace(teamA))).To(Succeed())
		})
	}
}

// TestAttackStatusIsTheManagers: status is the manager's record, and some of it
// decides what Orderly may touch (a SecretRotation's status.secretUID names the one
// Secret it may overwrite; a DevDatabase's status.database the database it drops).
// Mallory may not write the status of her own objects; the manager does (control).
func TestAttackStatusIsTheManagers(t *testing.T) {
	ctx := context.Background()
	for _, k := range namespacedKinds {
		t.Run(k.kind, func(t *testing.T) {
			g := NewWithT(t)
			o := sample(t, k.kind)
			o.SetNamespace(teamA)
			o.SetName("status-" + o.GetName())
			create(t, admin, o)
			// Control: the manager writes the status (whatever it says: the sample's
			// references do not exist here).
			g.Eventually(func(g Gomega) {
				get(g, o)
				gen, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
				conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
				g.Expect(gen > 0 || len(conds) > 0).To(BeTrue(), "no status written by the manager")
			}, timeout, poll).Should(Succeed())
			forged := []byte(`{"status":{"observedGeneration":99,"secretUID":"forged","database":"orderly_forged","conditions":[]}}`)
			forbiddenByRBAC(g, attacker.Status().Patch(ctx, o, client.RawPatch(types.MergePatchType, forged)))
		})
	}
}

// TestAttackClusterScopedKinds: every cluster-scoped kind is the platform team's (or,
// ImageScan and HostnameClaim, Orderly's own): mallory can neither create, change,
// delete nor read them, so she cannot write a policy exception, a database server
// with her own host, a zone, a claim on a hostname or a clean scan result. Control:
// the platform team creates each (dry run) and reads them.
func TestAttackClusterScopedKinds(t *testing.T) {
	ctx := context.Background()
	for _, kind := range []string{"Tenant", "SleepSchedule", "LabelPolicy", "LabelValueSet", "DatabaseServer", "ImagePolicy", "DomainZone", "ImageScan", "HostnameClaim"} {
		t.Run(kind, func(t *testing.T) {
			g := NewWithT(t)
			var obj *unstructured.Unstructured
			switch kind {
			case "ImageScan":
				obj = &unstructured.Unstructured{}
				obj.SetAPIVersion("policy.orderly.dev/v1alpha1")
				obj.SetKind(kind)
				obj.SetName("sha256-forged")
			case "HostnameClaim":
				obj = &unstructured.Unstructured{}
				obj.SetAPIVersion("network.orderly.dev/v1alpha1")
				obj.SetKind(kind)
				obj.SetName("shop.b.attack.test")
			default:
				obj = sample(t, kind)
				// Control: the platform team may create it.
				g.Expect(admin.Create(ctx, obj.DeepCopy(), client.DryRunAll)).To(Succeed())
			}
			forbiddenByRBAC(g, attacker.Create(ctx, obj.DeepCopy(), client.DryRunAll))
			forbiddenByRBAC(g, attacker.Patch(ctx, obj.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"forged":"yes"}}}`))))
			forbiddenByRBAC(g, attacker.Delete(ctx, obj.DeepCopy()))
			forbiddenByRBAC(g, attacker.Get(ctx, client.ObjectKeyFromObject(obj), obj.DeepCopy()))
			list := &unstructured.UnstructuredList{}
			list.SetGroupVersionKind(obj.GroupVersionKind())
			forbiddenByRBAC(g, attacker.List(ctx, list))
			g.Expect(admin.List(ctx, list)).To(Succeed())
		})
	}
}

// TestAttackNamespaceLabels: the platform's cluster-scoped objects select namespaces
// by label (a DatabaseServer's allowedNamespaces, a DomainZone's, a policy's
// namespaceSelector, a Tenant's label that other tenants' NetworkPolicies trust).
// Mallory cannot relabel her namespace to be let in, or to be left out, nor another
// one; the platform team can (control).
func TestAttackNamespaceLabels(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{teamA, teamB} {
		for _, patch := range []string{
			`{"metadata":{"labels":{"` + teamLabel + `":"b"}}}`,                     // into team-b's allow-lists
			`{"metadata":{"labels":{"tenancy.orderly.dev/tenant":"tenant-b"}}}`,     // into another tenant
			`{"metadata":{"labels":{"` + teamLabel + `":null}}}`,                    // out of a policy's selector
			`{"metadata":{"annotations":{"tenancy.orderly.dev/adopt":"tenant-a"}}}`, // handed to a tenant
			`{"metadata":{"labels":{"pod-security.kubernetes.io/enforce":"privileged"}}}`,
		} {
			forbiddenByRBAC(g, attacker.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch))))
		}
	}
	// Control: the platform team labels namespaces.
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: teamA}}
	g.Expect(admin.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"attack.orderly.dev/touched":"yes"}}}`)))).To(Succeed())
	g.Expect(admin.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"attack.orderly.dev/touched":null}}}`)))).To(Succeed())
}

// TestAttackOtherNamespacesSecrets is the baseline Orderly must not undercut: mallory
// cannot read or write team-b's or the manager's Secrets herself; she can her own.
func TestAttackOtherNamespacesSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	for _, ns := range []string{teamB, managerNamespace, "kube-system"} {
		forbiddenByRBAC(g, attacker.List(ctx, &corev1.SecretList{}, client.InNamespace(ns)))
		forbiddenByRBAC(g, attacker.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "planted"}}, client.DryRunAll))
	}
	g.Expect(attacker.List(ctx, &corev1.SecretList{}, client.InNamespace(teamA))).To(Succeed())
	g.Expect(attacker.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "mine"}}, client.DryRunAll)).To(Succeed())
}
