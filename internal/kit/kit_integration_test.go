//go:build integration

package kit_test

import (
	"context"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

var (
	k   client.Client
	env *testenv.Env
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		env, k = e, e.Client
		return nil, nil
	})
}

func newTenant(t *testing.T, name string) {
	t.Helper()
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: tenancyv1alpha1.TenantSpec{Namespaces: []tenancyv1alpha1.TenantNamespace{{Name: name}}}}
	NewWithT(t).Expect(k.Create(context.Background(), tn)).To(Succeed())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), tn)
		_ = kit.RemoveFinalizer(context.Background(), k, k, tn, "test/a")
		_ = kit.RemoveFinalizer(context.Background(), k, k, tn, "test/b")
	})
}

func get(t *testing.T, name string) *tenancyv1alpha1.Tenant {
	t.Helper()
	var tn tenancyv1alpha1.Tenant
	NewWithT(t).Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &tn)).To(Succeed())
	return &tn
}

// A status computed from a stale copy must not overwrite a newer one: PatchStatus loses
// the optimistic lock, reads the latest version and computes again from it.
func TestPatchStatusNeverOverwritesNewerStatus(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	newTenant(t, "kit-stale")
	stale := get(t, "kit-stale")

	// Someone (another reconcile) writes newer status meanwhile.
	newer := get(t, "kit-stale")
	newer.Status.NamespaceCount = 5
	g.Expect(k.Status().Update(ctx, newer)).To(Succeed())

	// A plain merge patch from the stale copy would write 0+1 = 1 over the 5.
	computed := 0
	g.Expect(kit.PatchStatus(ctx, k, k, stale, func(tn *tenancyv1alpha1.Tenant) {
		computed++
		tn.Status.NamespaceCount++
	})).To(Succeed())
	g.Expect(computed).To(Equal(2), "compute runs again on the latest version after the conflict")
	g.Expect(get(t, "kit-stale").Status.NamespaceCount).To(Equal(int32(6)))
	g.Expect(stale.Status.NamespaceCount).To(Equal(int32(6)), "obj holds what was written")
}

func TestPatchStatusWritesNothingWhenUnchanged(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	newTenant(t, "kit-same")
	tn := get(t, "kit-same")
	rv := tn.ResourceVersion
	g.Expect(kit.PatchStatus(ctx, k, k, tn, func(*tenancyv1alpha1.Tenant) {})).To(Succeed())
	g.Expect(get(t, "kit-same").ResourceVersion).To(Equal(rv))
}

// After a spec change the reconcile that the change triggers reports afresh: a status
// computed for the old generation is dropped, not forced in.
func TestPatchStatusDropsStatusOfAnOldGeneration(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	newTenant(t, "kit-gen")
	stale := get(t, "kit-gen")
	changed := get(t, "kit-gen")
	changed.Spec.CostCenter = "cc-1"
	g.Expect(k.Update(ctx, changed)).To(Succeed())

	g.Expect(kit.PatchStatus(ctx, k, k, stale, func(tn *tenancyv1alpha1.Tenant) {
		tn.Status.NamespaceCount = 9
	})).To(Succeed())
	g.Expect(get(t, "kit-gen").Status.NamespaceCount).To(BeZero())
}

// Two writers adding their finalizers from stale copies both keep theirs: a merge
// patch without the lock would replace the whole list.
func TestFinalizersFromStaleCopiesAreNotLost(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	newTenant(t, "kit-fin")
	a, b := get(t, "kit-fin"), get(t, "kit-fin")
	g.Expect(kit.AddFinalizer(ctx, k, k, a, "test/a")).To(Succeed())
	g.Expect(kit.AddFinalizer(ctx, k, k, b, "test/b")).To(Succeed())
	g.Expect(get(t, "kit-fin").Finalizers).To(ConsistOf("test/a", "test/b"))

	rv := get(t, "kit-fin").ResourceVersion
	g.Expect(kit.AddFinalizer(ctx, k, k, b, "test/b")).To(Succeed())
	g.Expect(get(t, "kit-fin").ResourceVersion).To(Equal(rv), "adding a finalizer that is there writes nothing")

	g.Expect(kit.RemoveFinalizer(ctx, k, k, a, "test/a")).To(Succeed())
	g.Expect(get(t, "kit-fin").Finalizers).To(ConsistOf("test/b"))

	g.Expect(k.Delete(ctx, b)).To(Succeed())
	deleting := get(t, "kit-fin")
	g.Expect(kit.AddFinalizer(ctx, k, k, deleting, "test/a")).To(MatchError(kit.ErrDeleting))
	g.Expect(kit.RemoveFinalizer(ctx, k, k, deleting, "test/b")).To(Succeed())
	g.Expect(kit.RemoveFinalizer(ctx, k, k, deleting, "test/b")).To(Succeed(), "removing from an object that is gone is not an error")
}

// Apply owns exactly the fields Orderly sets: what it stops setting goes, what another
// writer set stays.
func TestApplyOwnsOnlyWhatOrderlySets(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	want := func(lbls map[string]string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "kit-apply", Labels: lbls}, Data: map[string]string{"k": "v"}}
	}
	g.Expect(kit.Apply(ctx, k, want(map[string]string{"a": "1", "b": "2"}))).To(Succeed())

	// Another writer adds its own label and changes one of Orderly's.
	var cm corev1.ConfigMap
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kit-apply"}, &cm)).To(Succeed())
	cm.Labels["c"] = "3"
	cm.Labels["a"] = "changed"
	g.Expect(k.Update(ctx, &cm, client.FieldOwner("someone"))).To(Succeed())

	g.Expect(kit.Apply(ctx, k, want(map[string]string{"a": "1"}))).To(Succeed())
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "default", Name: "kit-apply"}, &cm)).To(Succeed())
	g.Expect(cm.Labels).To(Equal(map[string]string{"a": "1", "c": "3"}), "b was Orderly's and is no longer wanted; c is someone else's; a is Orderly's value again")
	g.Expect(cm.Data).To(Equal(map[string]string{"k": "v"}))
}

// PatchStatusReplacing tells which version the write replaced, for transition Events,
// and nothing when nothing was written.
func TestPatchStatusReplacingReturnsWhatWasReplaced(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	newTenant(t, "kit-replaced")
	stale := get(t, "kit-replaced")
	newer := get(t, "kit-replaced")
	newer.Status.NamespaceCount = 5
	g.Expect(k.Status().Update(ctx, newer)).To(Succeed())

	replaced, err := kit.PatchStatusReplacing(ctx, k, k, stale, func(tn *tenancyv1alpha1.Tenant) { tn.Status.NamespaceCount = 7 })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(replaced).NotTo(BeNil())
	g.Expect(replaced.Status.NamespaceCount).To(Equal(int32(5)), "the status actually overwritten, not the stale copy's")

	replaced, err = kit.PatchStatusReplacing(ctx, k, k, stale, func(tn *tenancyv1alpha1.Tenant) { tn.Status.NamespaceCount = 7 })
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(replaced).To(BeNil(), "nothing written, nothing replaced")
}

// Events with different notes about one object stay distinct (client-go's
// events.k8s.io recorder kept only the first note); the same note repeated is one
// Event whose series counts the repeats. Writes go to a real API server.
func TestEventWriterKeepsEveryNoteAndCountsRepeats(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	newTenant(t, "kit-events")
	tn := get(t, "kit-events")

	w := kit.NewEventWriter(k, k.Scheme(), "orderly-kit-test")
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = w.Start(runCtx) }()

	r := kit.NewRecorder(w)
	r.Eventf(tn, nil, corev1.EventTypeNormal, "NamespaceCreated", "Create", "created namespace %s", "team-a-dev")
	r.Eventf(tn, nil, corev1.EventTypeNormal, "NamespaceCreated", "Create", "created namespace %s", "team-a-prod")
	for range 3 {
		r.Eventf(tn, nil, corev1.EventTypeWarning, "Failed", "Reconcile", "quota refused")
	}

	// Each Event object's note, with its count (the series', or 1).
	type counted struct {
		objects int
		count   int32
	}
	notes := func() map[string]counted {
		var list eventsv1.EventList
		g.Expect(k.List(ctx, &list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
		got := map[string]counted{}
		for _, ev := range list.Items {
			if ev.Regarding.UID != tn.UID || ev.ReportingController != "orderly-kit-test" {
				continue
			}
			c := got[ev.Note]
			c.objects++
			c.count = 1
			if ev.Series != nil {
				c.count = ev.Series.Count
			}
			got[ev.Note] = c
		}
		return got
	}
	g.Eventually(notes).WithTimeout(10*time.Second).Should(Equal(map[string]counted{
		"created namespace team-a-dev":  {objects: 1, count: 1},
		"created namespace team-a-prod": {objects: 1, count: 1},
		"quota refused":                 {objects: 1, count: 3},
	}), "one Event per distinct note; the repeats counted in the first one's series")

	// A repeat right after a write waits for the next flush (the writer's own, every
	// few seconds, or this one), and is counted in the same Event.
	r.Eventf(tn, nil, corev1.EventTypeWarning, "Failed", "Reconcile", "quota refused")
	g.Eventually(func() map[string]counted { w.Flush(ctx); return notes() }).WithTimeout(10 * time.Second).
		Should(HaveKeyWithValue("quota refused", counted{objects: 1, count: 4}))
}
