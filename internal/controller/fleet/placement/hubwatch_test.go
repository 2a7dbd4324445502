package placement

import (
	"context"
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func selectingPolicy(ns, name string, sels ...fleetv1alpha1.ResourceSelector) *fleetv1alpha1.PlacementPolicy {
	return &fleetv1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: fleetv1alpha1.PlacementPolicySpec{ResourceSelectors: sels}}
}

// hubMeta is a hub object in the namespace shop, as its metadata watch sees it.
func hubMeta(name string, l map[string]string) *metav1.PartialObjectMetadata {
	return &metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, Labels: l}}
}

// TestEnqueueSelecting: a hub object wakes the policies of its namespace that name
// it or whose label selector matches it before or after the change, and no other.
func TestEnqueueSelecting(t *testing.T) {
	byName := selectingPolicy("shop", "by-name", fleetv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"})
	byLabel := selectingPolicy("shop", "by-label", fleetv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment",
		LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "front"}}})
	otherName := selectingPolicy("shop", "other-name", fleetv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"})
	otherKind := selectingPolicy("shop", "other-kind", fleetv1alpha1.ResourceSelector{APIVersion: "v1", Kind: "ConfigMap", Name: "web"})
	otherNS := selectingPolicy("bank", "by-name", fleetv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"})
	c := fake.NewClientBuilder().WithScheme(scheme.New()).
		WithObjects(byName, byLabel, otherName, otherKind, otherNS).
		WithIndex(&fleetv1alpha1.PlacementPolicy{}, selectorIndex, selectorKeys).Build()
	r := &Reconciler{Client: c}

	for _, tt := range []struct {
		name string
		objs []client.Object
		want []string
	}{
		{name: "named, labels not matching", objs: []client.Object{hubMeta("web", nil)}, want: []string{"shop/by-name"}},
		{name: "named and labelled", objs: []client.Object{hubMeta("web", map[string]string{"tier": "front"})}, want: []string{"shop/by-label", "shop/by-name"}},
		{name: "labelled only", objs: []client.Object{hubMeta("cart", map[string]string{"tier": "front"})}, want: []string{"shop/by-label"}},
		{name: "leaving a selector", objs: []client.Object{hubMeta("cart", map[string]string{"tier": "front"}), hubMeta("cart", nil)}, want: []string{"shop/by-label"}},
		{name: "selected by none", objs: []client.Object{hubMeta("cart", nil)}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[reconcile.Request]())
			defer q.ShutDown()
			r.enqueueSelecting(context.Background(), q, "Deployment", tt.objs...)
			var got []string
			for q.Len() > 0 {
				req, _ := q.Get()
				got = append(got, req.String())
				q.Done(req)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("woken %v, want %v", got, tt.want)
			}
		})
	}
}

func TestSelectorKeys(t *testing.T) {
	pp := selectingPolicy("shop", "p",
		fleetv1alpha1.ResourceSelector{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
		fleetv1alpha1.ResourceSelector{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{}})
	if got := selectorKeys(pp); !slices.Equal(got, []string{"Deployment/web", "ConfigMap/*"}) {
		t.Errorf("keys %v", got)
	}
}
