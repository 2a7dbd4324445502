//go:build integration

package databaseserver

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testpg"
)

var seq atomic.Int64

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func newNamespace(t *testing.T) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniq("dbserver")}}
	NewWithT(t).Expect(k.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// adminSecret is the admin credentials Secret of srv, in namespace ns.
func adminSecret(ns string, srv *testpg.Server) *corev1.Secret {
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "admin"},
		StringData: map[string]string{"username": srv.Username, "password": srv.Password}}
}

// newServer registers srv as a DatabaseServer, with its admin Secret in the
// manager's namespace.
func newServer(t *testing.T, srv *testpg.Server) (*datav1alpha1.DatabaseServer, *corev1.Secret) {
	t.Helper()
	g := NewWithT(t)
	sec := adminSecret(managerNamespace, srv)
	sec.Name = uniq("admin")
	g.Expect(k.Create(context.Background(), sec)).To(Succeed())
	s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("pg")}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: datav1alpha1.EnginePostgres, Host: srv.Host, Port: srv.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: sec.Namespace, Name: sec.Name},
	}}
	g.Expect(k.Create(context.Background(), s)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), s) })
	return s, sec
}

// eventsAbout lists the Events regarding the object with uid. Events about a
// cluster-scoped object are in the default namespace.
func eventsAbout(g Gomega, uid string) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if string(e.Regarding.UID) == uid {
			out = append(out, e)
		}
	}
	return out
}

// occurrences counts how often an Event with reason was recorded about the object
// with uid: a repeated Event is one object whose series counts the repeats.
func occurrences(g Gomega, uid, reason string) int {
	n := 0
	for _, e := range eventsAbout(g, uid) {
		if e.Reason != reason {
			continue
		}
		if e.Series != nil {
			n += int(e.Series.Count)
		} else {
			n++
		}
	}
	return n
}

// Events say when a server becomes reachable, unreachable or unusable for want of
// credentials, once per transition (not on every check), when DevDatabases hold its
// deletion, and when it is released.
func TestEventsOnTransitions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv, err := testpg.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(srv.Close)
	s, sec := newServer(t, srv)
	uid := string(s.UID)
	counts := func(reachable, unreachable, credentials int) func(g Gomega) {
		return func(g Gomega) {
			g.Expect(occurrences(g, uid, ReasonReachable)).To(Equal(reachable), "Reachable Events")
			g.Expect(occurrences(g, uid, ReasonUnreachable)).To(Equal(unreachable), "Unreachable Events")
			g.Expect(occurrences(g, uid, ReasonCredentialsMissing)).To(Equal(credentials), "CredentialsMissing Events")
		}
	}
	// Several rechecks of a server that stays as it is add no Event.
	steady := 5 * recheck

	g.Eventually(counts(1, 0, 0), timeout, poll).Should(Succeed())
	g.Consistently(counts(1, 0, 0), steady, poll).Should(Succeed())
	reachable := eventsAbout(g, uid)[0]
	g.Expect(reachable.Type).To(Equal(corev1.EventTypeNormal))
	g.Expect(reachable.ReportingController).To(Equal("orderly-databaseserver"))

	g.Expect(srv.Stop()).To(Succeed())
	g.Eventually(counts(1, 1, 0), timeout, poll).Should(Succeed())
	g.Consistently(counts(1, 1, 0), steady, poll).Should(Succeed())

	g.Expect(srv.StartAgain()).To(Succeed())
	g.Eventually(counts(2, 1, 0), timeout, poll).Should(Succeed())

	g.Expect(k.Delete(ctx, sec)).To(Succeed())
	g.Eventually(counts(2, 1, 1), timeout, poll).Should(Succeed())
	g.Consistently(counts(2, 1, 1), steady, poll).Should(Succeed())
	again := adminSecret(sec.Namespace, srv)
	again.Name = sec.Name
	g.Expect(k.Create(ctx, again)).To(Succeed())
	g.Eventually(counts(3, 1, 1), timeout, poll).Should(Succeed())

	// A DevDatabase holds the server's deletion; it goes, and the server with it.
	ns := newNamespace(t)
	user := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}, Spec: datav1alpha1.DevDatabaseSpec{ServerRef: s.Name}}
	g.Expect(k.Create(ctx, user)).To(Succeed())
	g.Expect(k.Delete(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(occurrences(g, uid, ReasonInUse)).To(Equal(1))
	}, timeout, poll).Should(Succeed())
	g.Consistently(func(g Gomega) {
		g.Expect(occurrences(g, uid, ReasonInUse)).To(Equal(1))
		g.Expect(occurrences(g, uid, ReasonReleased)).To(BeZero())
	}, steady, poll).Should(Succeed())
	for _, e := range eventsAbout(g, uid) {
		if e.Reason == ReasonInUse {
			g.Expect(e.Note).To(ContainSubstring(ns + "/app"))
		}
	}
	g.Expect(k.Delete(ctx, user)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(occurrences(g, uid, ReasonReleased)).To(Equal(1))
		g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(s), &datav1alpha1.DatabaseServer{}))).To(BeTrue())
	}, timeout, poll).Should(Succeed())

	// The admin password is in no Event.
	for _, e := range eventsAbout(g, uid) {
		g.Expect(e.Note).NotTo(ContainSubstring(srv.Password))
	}
}

// A server's series go with it.
func TestMetricSeriesGoWithTheServer(t *testing.T) {
	g := NewWithT(t)
	s, _ := newServer(t, pg)
	server := map[string]string{"server": s.Name}
	g.Eventually(func(g Gomega) {
		var got datav1alpha1.DatabaseServer
		g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(s), &got)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, datav1alpha1.ConditionReachable)).To(BeTrue())
		g.Expect(testenv.SeriesOf(g, "orderly_databaseserver_reachable", server)).To(Equal(1))
		g.Expect(testenv.SeriesOf(g, "orderly_databaseserver_databases_in_use", server)).To(Equal(1))
	}, timeout, poll).Should(Succeed())

	g.Expect(k.Delete(context.Background(), s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(s), &datav1alpha1.DatabaseServer{}))).To(BeTrue())
		g.Expect(testenv.SeriesOf(g, "orderly_databaseserver_reachable", server)).To(BeZero())
		g.Expect(testenv.SeriesOf(g, "orderly_databaseserver_databases_in_use", server)).To(BeZero())
	}, timeout, poll).Should(Succeed())
}
