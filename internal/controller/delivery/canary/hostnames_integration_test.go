//go:build integration

package canary

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

// createdRoute reads the HTTPRoute Orderly created for a Canary; nil when there is none.
func createdRoute(g Gomega, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(httpRouteKind.WithVersion("v1"))
	err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, u)
	if apierrors.IsNotFound(err) {
		return nil
	}
	g.Expect(err).NotTo(HaveOccurred())
	return u
}

// A created route carries only hostnames a ServiceDomain of the Canary's namespace
// holds: another namespace's hostname creates nothing (HostnameNotClaimed), and the
// route is created as soon as the namespace claims it (the claim's watch brings the
// Canary back); when the namespace lets the hostname go, the route is taken off its
// Gateways. A route without hostnames is never created (HostnameRequired).
func TestCreatedRouteOnlyForHeldHostnames(t *testing.T) {
	ns, other := newNamespace(t), newNamespace(t)
	host := hostnameOf(ns, "shop")
	theirs := claim(t, other, host)
	c := canaryFor(ns, "shop", 4*time.Second, 50)
	newTarget(t, ns, "shop", "shop:1", 1)
	NewWithT(t).Expect(k.Create(context.Background(), c)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), c) })

	eventually(t, func(g Gomega) {
		got := getCanary(g, ns, "shop")
		ready := condition(got, deliveryv1alpha1.ConditionReady)
		g.Expect(ready.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(ready.Reason).To(Equal(reasonHostnameNotClaimed))
		g.Expect(ready.Message).To(ContainSubstring(host + " is held by a ServiceDomain of another namespace"))
		g.Expect(ready.Message).NotTo(ContainSubstring(other))
		g.Expect(condition(got, deliveryv1alpha1.ConditionTrafficReady).Reason).To(Equal(reasonHostnameNotClaimed))
		// Initialization goes on: only the route waits.
		getDeployment(g, ns, "shop-primary")
	})
	NewWithT(t).Consistently(func(g Gomega) { g.Expect(createdRoute(g, ns, "shop")).To(BeNil()) }, 2*time.Second, poll).Should(Succeed())

	// The other namespace lets it go and this one claims it: the route is created.
	NewWithT(t).Expect(k.Delete(context.Background(), &networkv1alpha1.HostnameClaim{ObjectMeta: metav1.ObjectMeta{Name: host}})).To(Succeed())
	NewWithT(t).Expect(k.Delete(context.Background(), theirs)).To(Succeed())
	mine := claim(t, ns, host)
	eventually(t, func(g Gomega) {
		route := createdRoute(g, ns, "shop")
		g.Expect(route).NotTo(BeNil())
		hosts, _, _ := unstructured.NestedStringSlice(route.Object, "spec", "hostnames")
		g.Expect(hosts).To(Equal([]string{host}))
		parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
		g.Expect(parents).To(HaveLen(1))
		g.Expect(condition(getCanary(g, ns, "shop"), deliveryv1alpha1.ConditionTrafficReady).Status).To(Equal(metav1.ConditionTrue))
	})

	// Its ServiceDomain goes (and with it the claim): the route is detached at once.
	NewWithT(t).Expect(k.Delete(context.Background(), &networkv1alpha1.HostnameClaim{ObjectMeta: metav1.ObjectMeta{Name: host}})).To(Succeed())
	NewWithT(t).Expect(k.Delete(context.Background(), mine)).To(Succeed())
	eventually(t, func(g Gomega) {
		route := createdRoute(g, ns, "shop")
		g.Expect(route).NotTo(BeNil())
		parents, _, _ := unstructured.NestedSlice(route.Object, "spec", "parentRefs")
		g.Expect(parents).To(BeEmpty())
		ready := condition(getCanary(g, ns, "shop"), deliveryv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(reasonHostnameNotClaimed))
		g.Expect(ready.Message).To(ContainSubstring(host + " is not claimed"))
	})

	// No hostname at all: nothing is created.
	bare := canaryFor(ns, "bare", 4*time.Second, 50)
	bare.Spec.Traffic.HTTPRoute.Hostnames = nil
	newTarget(t, ns, "bare", "bare:1", 1)
	create(t, bare)
	eventually(t, func(g Gomega) {
		ready := condition(getCanary(g, ns, "bare"), deliveryv1alpha1.ConditionReady)
		g.Expect(ready.Reason).To(Equal(reasonHostnameRequired))
		g.Expect(createdRoute(g, ns, "bare")).To(BeNil())
	})
}
