//go:build integration

package devdatabase

import (
	"context"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/databaseserver"
)

func getServer(g Gomega, s *datav1alpha1.DatabaseServer) *datav1alpha1.DatabaseServer {
	var got datav1alpha1.DatabaseServer
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(s), &got)).To(Succeed())
	return &got
}

func waitGone(t *testing.T, o client.Object) {
	t.Helper()
	NewWithT(t).Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(o), o.DeepCopyObject().(client.Object)))
	}, timeout, poll).Should(BeTrue(), "%s is still there", o.GetName())
}

// A DatabaseServer being deleted stays while DevDatabases use it, says which, takes
// no new DevDatabases, and lets the ones being deleted drop their databases.
func serverBeingDeletedWaitsForItsDevDatabases(t *testing.T, be *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := be.newServer(t, nil)
	ns := newNamespace(t, nil)
	a := waitReason(t, newDevDB(t, ns, "a", s.Name, nil), ReasonReady)
	b := waitReason(t, newDevDB(t, ns, "b", s.Name, nil), ReasonReady)
	g.Eventually(func(g Gomega) {
		g.Expect(getServer(g, s).Finalizers).To(ContainElement("data.orderly.dev/in-use"))
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		got := getServer(g, s)
		g.Expect(got.DeletionTimestamp).NotTo(BeNil())
		c := meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(databaseserver.ReasonInUse))
		g.Expect(c.Message).To(ContainSubstring("waiting for 2 DevDatabase(s)"))
		g.Expect(c.Message).To(ContainSubstring(ns + "/a, " + ns + "/b"))
	}, timeout, poll).Should(Succeed())

	// The DevDatabases already there keep working; a new one gets nothing.
	g.Expect(getDevDB(g, a).Status.Phase).To(Equal(datav1alpha1.PhaseReady))
	late := waitReason(t, newDevDB(t, ns, "late", s.Name, nil), ReasonServerDeleting)
	g.Expect(late.Status.Phase).To(Equal(datav1alpha1.PhasePending))
	g.Expect(be.databaseExists(t, late.Status.Database)).To(BeFalse())
	g.Expect(be.roleExists(t, late.Status.Role)).To(BeFalse())
	err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "late"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getServer(g, s).Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(c.Message).To(ContainSubstring("waiting for 3 DevDatabase(s)"))
	}, timeout, poll).Should(Succeed())

	// Deleting a DevDatabase still drops its database with the server's credentials.
	g.Expect(k.Delete(ctx, a)).To(Succeed())
	waitGone(t, a)
	g.Expect(be.databaseExists(t, a.Status.Database)).To(BeFalse())
	g.Expect(be.roleExists(t, a.Status.Role)).To(BeFalse())
	g.Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getServer(g, s).Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(c.Message).To(ContainSubstring("waiting for 2 DevDatabase(s)"))
		g.Expect(c.Message).To(ContainSubstring(ns + "/b, " + ns + "/late"))
	}, timeout, poll).Should(Succeed())

	// The last one gone, the server goes too.
	g.Expect(k.Delete(ctx, b)).To(Succeed())
	g.Expect(k.Delete(ctx, late)).To(Succeed())
	waitGone(t, b)
	waitGone(t, late)
	g.Expect(be.databaseExists(t, b.Status.Database)).To(BeFalse())
	waitGone(t, s)
}
