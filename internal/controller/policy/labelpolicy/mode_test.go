package labelpolicy

import (
	"context"
	"sync/atomic"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/event"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/scheme"
)

// When the webhook's CA certificate changes (another replica re-issued it, or
// cert-manager renewed it), every policy is reconciled at the next check, so the
// configurations' caBundle follows within a minute instead of at the next audit.
func TestDiscoveryWatcherWakesEveryPolicyWhenTheCAChanges(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		&policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "a"}},
		&policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
	).Build()
	var ca atomic.Pointer[string]
	ca.Store(ptr.To("ca-1"))
	r := &Reconciler{Client: c, Admission: admission.Config{
		Mode: admission.Webhook, Webhook: &admission.Endpoint{URL: "https://127.0.0.1:9443"},
		CABundle: func() ([]byte, error) { return []byte(*ca.Load()), nil },
	}}
	events := make(chan event.GenericEvent, 10)
	d := newDiscoveryWatcher(r, nil, DefaultDiscoveryInterval, events)
	d.serves = func() (bool, error) { return false, nil }
	ctx := context.Background()

	d.check(ctx)
	if len(events) != 0 {
		t.Fatalf("%d policies woken while nothing changed", len(events))
	}
	ca.Store(ptr.To("ca-2"))
	d.check(ctx)
	woken := map[string]bool{}
	for len(events) > 0 {
		woken[(<-events).Object.GetName()] = true
	}
	if !woken["a"] || !woken["b"] || len(woken) != 2 {
		t.Errorf("woken %v after the CA changed, want a and b", woken)
	}
	d.check(ctx)
	if len(events) != 0 {
		t.Errorf("%d policies woken again for the same CA", len(events))
	}
}
