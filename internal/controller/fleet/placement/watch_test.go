package placement

import (
	"context"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllertest"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/scheme"
)

var deploymentGVK = schema.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}

// memberCopyOf is a Deployment copy on a member as the API server returns it.
func memberCopyOf(rv, orderlyFieldsJSON string, ready int32) *appsv1.Deployment {
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "shop", UID: "member-uid", ResourceVersion: rv,
			Labels: map[string]string{
				"app": "web", labels.ManagedBy: labels.ManagedByValue,
				fleetv1alpha1.PolicyNamespaceLabel: "shop", fleetv1alpha1.PolicyNameLabel: "p", fleetv1alpha1.PolicyUIDLabel: "pp-uid",
			},
			Annotations: map[string]string{"team": "a"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: fleetv1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(orderlyFieldsJSON), Time: &metav1.Time{Time: time.Now()}},
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, Subresource: "status",
					FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:status":{}}`)},
			},
		},
		Spec:   appsv1.DeploymentSpec{Replicas: ptr.To[int32](3)},
		Status: appsv1.DeploymentStatus{Replicas: 3, UpdatedReplicas: 3, ReadyReplicas: ready, ObservedGeneration: 4},
	}
}

// newSpec is d with a spec its member's controller has not seen yet.
func newSpec(d *appsv1.Deployment) *appsv1.Deployment {
	d.Generation = d.Status.ObservedGeneration + 1
	return d
}

// Regression: the ready replicas of a copy counted whatever spec they ran, before the
// member's controller had seen the one Orderly applied: a cluster was Ready straight
// after a new template was placed, its old pods still serving.
func TestReadyCountsOnlyTheAppliedSpec(t *testing.T) {
	for _, tt := range []struct {
		name string
		obj  client.Object
		want int32
	}{
		{"rolled out", memberCopyOf("5", `{}`, 3), 3},
		{"new spec not seen yet", newSpec(memberCopyOf("5", `{}`, 3)), 0},
		{"rolling: one pod updated", func() client.Object {
			d := memberCopyOf("5", `{}`, 3)
			d.Status.UpdatedReplicas = 1
			return d
		}(), 1},
		{"surplus pods count up to the declared replicas", func() client.Object {
			d := memberCopyOf("5", `{}`, 4)
			d.Status.UpdatedReplicas = 4
			return d
		}(), 3},
		{"not a workload", &metav1.PartialObjectMetadata{}, 0},
	} {
		slim, _ := slimCopy(tt.obj)
		for what, o := range map[string]client.Object{"the member's copy": tt.obj, "the watch's slim copy": slim.(client.Object)} {
			if got := readyOf(o); got != tt.want {
				t.Errorf("%s, %s: ready %d, want %d", tt.name, what, got, tt.want)
			}
		}
	}
}

func TestSlimCopy(t *testing.T) {
	in := memberCopyOf("5", `{"f:spec":{}}`, 2)
	out, err := slimCopy(in)
	if err != nil {
		t.Fatal(err)
	}
	d := out.(*appsv1.Deployment)
	if d.Status.ReadyReplicas != 2 || d.Status.Replicas != 0 || d.ResourceVersion != "5" || d.UID != "member-uid" {
		t.Errorf("kept %+v", d)
	}
	if _, ok := d.Labels["app"]; ok || d.Labels[fleetv1alpha1.PolicyUIDLabel] != "pp-uid" || d.Annotations != nil {
		t.Errorf("labels %v annotations %v", d.Labels, d.Annotations)
	}
	if len(d.ManagedFields) != 1 || d.ManagedFields[0].Time != nil || orderlyFields(d) != `{"f:spec":{}}` {
		t.Errorf("managed fields %+v", d.ManagedFields)
	}
	again, _ := slimCopy(d)
	if orderlyFields(again.(client.Object)) != orderlyFields(d) || again.(*appsv1.Deployment).Status.ReadyReplicas != 2 {
		t.Error("not idempotent")
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: *memberCopyOf("5", `{}`, 0).ObjectMeta.DeepCopy()}
	if out, _ := slimCopy(meta); len(out.(*metav1.PartialObjectMetadata).Annotations) != 0 {
		t.Error("metadata copy keeps annotations")
	}
}

// watchedSyncer is a member syncer holding one policy's plan for the Deployment web.
func watchedSyncer() (*memberSyncer, types.NamespacedName) {
	m := newMemberSyncer(types.NamespacedName{Namespace: "fleet", Name: "eu1"}, "h", &rest.Config{}, nil, clocktesting.NewFakePassiveClock(time.Now()), defaultTimings(), nil)
	key := types.NamespacedName{Namespace: "shop", Name: "p"}
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(deploymentGVK)
	obj.SetName("web")
	m.plans[key] = &plan{UID: "pp-uid", Namespace: "shop", Objects: []*unstructured.Unstructured{obj}}
	return m, key
}

func TestCopyEventsQueueOnlyWhatMatters(t *testing.T) {
	const fields = `{"f:spec":{"f:template":{"f:spec":{"f:containers":{"k:{\"name\":\"web\"}":{"f:image":{}}}}}}}`
	tests := []struct {
		name      string
		old, cur  *appsv1.Deployment
		wroteRV   string
		mutate    func(*memberSyncer, types.NamespacedName)
		wantQueue bool
	}{
		{name: "a field taken from Orderly", old: memberCopyOf("5", fields, 0), cur: memberCopyOf("6", `{"f:spec":{}}`, 0), wantQueue: true},
		{name: "readiness changed", old: memberCopyOf("5", fields, 0), cur: memberCopyOf("6", fields, 3), wantQueue: true},
		{name: "status only, readiness the same", old: memberCopyOf("5", fields, 1), cur: memberCopyOf("6", fields, 1)},
		{name: "a new spec the member has not rolled out", old: memberCopyOf("5", fields, 3), cur: newSpec(memberCopyOf("6", fields, 3)), wantQueue: true},
		{name: "Orderly's own write", old: memberCopyOf("5", fields, 0), cur: memberCopyOf("6", `{"f:spec":{}}`, 0), wroteRV: "6"},
		{name: "a copy the plan no longer places", old: memberCopyOf("5", fields, 0), cur: memberCopyOf("6", fields, 3),
			mutate: func(m *memberSyncer, k types.NamespacedName) { m.plans[k].Objects = nil }},
		{name: "another policy's UID on the labels", old: memberCopyOf("5", fields, 0), cur: memberCopyOf("6", fields, 3),
			mutate: func(m *memberSyncer, k types.NamespacedName) { m.plans[k].UID = "other" }},
		{name: "member failed: paused", old: memberCopyOf("5", fields, 0), cur: memberCopyOf("6", fields, 3),
			mutate: func(m *memberSyncer, k types.NamespacedName) { m.plans[k].Paused = true }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, key := watchedSyncer()
			defer m.queue.ShutDown()
			if tt.wroteRV != "" {
				m.wrote[key] = map[string]applied{objKey(deploymentGVK, "web"): {resourceVersion: tt.wroteRV}}
			}
			if tt.mutate != nil {
				tt.mutate(m, key)
			}
			old, _ := slimCopy(tt.old)
			cur, _ := slimCopy(tt.cur)
			m.copyUpdated(deploymentGVK, old, cur)
			if got := m.queue.Len() == 1; got != tt.wantQueue {
				t.Errorf("queued = %v, want %v", got, tt.wantQueue)
			}
		})
	}
}

func TestCopyDeletedQueuesThePolicy(t *testing.T) {
	m, _ := watchedSyncer()
	defer m.queue.ShutDown()
	m.copyDeleted(deploymentGVK, memberCopyOf("5", `{}`, 0))
	if m.queue.Len() != 1 {
		t.Fatalf("queue holds %d, want the policy", m.queue.Len())
	}
}

func TestRefusedWatchFallsBackToTheShortResync(t *testing.T) {
	m, _ := watchedSyncer()
	defer m.queue.ShutDown()
	if d := m.resyncAfter(); d < m.timings.Resync || d > m.timings.Resync*3/2 {
		t.Errorf("resync after %s, want between %s and 1.5 times that", d, m.timings.Resync)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, "", nil)
	m.watchFailed(context.Background(), nil, forbidden)
	if d := m.resyncAfter(); d != m.timings.FallbackResync {
		t.Errorf("resync after %s with the watch refused, want %s", d, m.timings.FallbackResync)
	}
	if refused, _ := m.watchState(); len(refused) != 1 || refused[0] != "secrets" {
		t.Errorf("refused = %v", refused)
	}
	// The refusal wears off on the injected clock.
	m.clock.(*clocktesting.FakePassiveClock).SetTime(m.clock.Now().Add(refusalMemory - time.Second))
	if d := m.resyncAfter(); d != m.timings.FallbackResync {
		t.Errorf("resync after %s with the watch refused just under %s ago, want %s", d, refusalMemory, m.timings.FallbackResync)
	}
	m.clock.(*clocktesting.FakePassiveClock).SetTime(m.clock.Now().Add(time.Second))
	if d := m.resyncAfter(); d == m.timings.FallbackResync {
		t.Error("an old refusal still counts")
	}
	if refused, _ := m.watchState(); len(refused) != 0 {
		t.Errorf("refused = %v after %s, want none", refused, refusalMemory)
	}
}

// TestApplySkipsWhatTheWatchShowsUnchanged: a copy the watches hold, with Orderly's
// fields as its last apply of the same object left them, costs no request; a changed
// object is applied without a read; a copy the watches do not hold is read first.
func TestApplySkipsWhatTheWatchShowsUnchanged(t *testing.T) {
	var gets, applies int
	member := interceptor.NewClient(fake.NewClientBuilder().WithScheme(scheme.New()).Build(), interceptor.Funcs{
		Get: func(ctx context.Context, c client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return c.Get(ctx, key, obj, opts...)
		},
		Apply: func(context.Context, client.WithWatch, runtime.ApplyConfiguration, ...client.ApplyOption) error {
			applies++
			return nil
		},
	})
	watched := fake.NewClientBuilder().WithScheme(scheme.New()).Build()
	m, key := watchedSyncer()
	m.client = member
	m.copies = watched
	for range placedKinds {
		m.informers = append(m.informers, controllertest.NewFakeInformer(controllertest.Synced))
	}
	ctx := context.Background()
	want := m.plans[key].Objects[0]
	want.SetNamespace("shop")
	step := func(name string, obj *unstructured.Unstructured, wantGets, wantApplies int) {
		t.Helper()
		gets, applies = 0, 0
		if _, err := m.apply(ctx, key, "pp-uid", obj); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if gets != wantGets || applies != wantApplies {
			t.Errorf("%s: %d reads and %d applies, want %d and %d", name, gets, applies, wantGets, wantApplies)
		}
	}

	step("not watched", want, 1, 1)
	// The watch now shows the copy as the apply left it (the fake apply wrote no
	// managed fields, so Orderly's entry is empty on both sides).
	cp := memberCopyOf("", "", 2)
	cp.ManagedFields = nil
	if err := watched.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	step("unchanged", want, 0, 0)
	if ready, _ := m.apply(ctx, key, "pp-uid", want); ready != 2 {
		t.Errorf("ready %d, want the watched 2", ready)
	}
	changed := want.DeepCopy()
	changed.SetAnnotations(map[string]string{"rev": "1"})
	step("object changed on the hub", changed, 0, 1)
	step("applied already", changed, 0, 0)
	// Someone took one of Orderly's fields on the member.
	cp.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fleetv1alpha1.FieldManager, Operation: metav1.ManagedFieldsOperationApply,
		FieldsType: "FieldsV1", FieldsV1: metav1.NewFieldsV1(`{"f:spec":{}}`)}}
	m.copies = &fixedReader{Reader: watched, obj: cp}
	step("fields taken on the member", changed, 0, 1)
	// A refusal makes the watch untrustworthy: read first again.
	m.refused["secrets"] = m.clock.Now()
	step("watch refused", changed, 1, 1)
}

// fixedReader answers every Get with obj (the fake client keeps managed fields to
// itself).
type fixedReader struct {
	client.Reader
	obj client.Object
}

func (f *fixedReader) Get(_ context.Context, _ client.ObjectKey, out client.Object, _ ...client.GetOption) error {
	f.obj.(*appsv1.Deployment).DeepCopyInto(out.(*appsv1.Deployment))
	return nil
}
