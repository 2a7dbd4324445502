package tenant

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"
)

func namespaceNamed(name string) *corev1.Namespace {
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

func TestOwnCreatesDropsOnlyTheFirstCreateEventOfExpectedObjects(t *testing.T) {
	o := newOwnCreates()
	p := o.notOwnCreate(kindNamespace)
	o.expect(kindNamespace, namespaceNamed("ours"))
	if p.Create(event.CreateEvent{Object: namespaceNamed("ours")}) {
		t.Error("the create event of a namespace this controller created passed")
	}
	if !p.Create(event.CreateEvent{Object: namespaceNamed("ours")}) {
		t.Error("a second create event of the same namespace (a relist) was dropped")
	}
	if !p.Create(event.CreateEvent{Object: namespaceNamed("theirs")}) {
		t.Error("the create event of someone else's namespace was dropped")
	}
	// Keys are per kind: a RoleBinding's watch does not consume a namespace's entry.
	o.expect(kindNamespace, namespaceNamed("ours"))
	if !o.notOwnCreate(kindRoleBinding).Create(event.CreateEvent{Object: namespaceNamed("ours")}) {
		t.Error("another kind's watch dropped the event")
	}
	if !p.Update(event.UpdateEvent{ObjectOld: namespaceNamed("ours"), ObjectNew: namespaceNamed("ours")}) || !p.Delete(event.DeleteEvent{Object: namespaceNamed("ours")}) {
		t.Error("an update or delete of a namespace this controller created was dropped")
	}
	// A failed create takes its entry back.
	if !o.take(kindNamespace, namespaceNamed("ours")) || o.len() != 0 {
		t.Errorf("entries left after take: %d", o.len())
	}
}

func TestOwnCreatesForgetsEntriesWhoseEventNeverCame(t *testing.T) {
	now := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	o := newOwnCreates()
	o.now = func() time.Time { return now }
	o.expect(kindNamespace, namespaceNamed("deleted-before-the-watch-saw-it"))
	now = now.Add(ownCreateTTL + time.Second)
	o.expect(kindNamespace, namespaceNamed("fresh"))
	if o.len() != 1 || !o.take(kindNamespace, namespaceNamed("fresh")) {
		t.Errorf("after the TTL only the fresh entry should be left; entries = %d", o.len())
	}
}
