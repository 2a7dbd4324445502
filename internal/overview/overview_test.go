package overview

import (
	"context"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

func ready(status metav1.ConditionStatus, reason, message string) []metav1.Condition {
	return []metav1.Condition{{Type: "Ready", Status: status, Reason: reason, Message: message, LastTransitionTime: metav1.Now()}}
}

func TestCollect(t *testing.T) {
	now := time.Date(2026, 12, 3, 12, 0, 0, 0, time.UTC)
	asleep := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "nights"}}
	asleep.Status = powerv1alpha1.SleepScheduleStatus{State: powerv1alpha1.StateAsleep, SleepingWorkloads: 4, Conditions: ready("True", "Asleep", "")}
	awake := &powerv1alpha1.SleepSchedule{ObjectMeta: metav1.ObjectMeta{Name: "weekends"}}
	awake.Status = powerv1alpha1.SleepScheduleStatus{State: powerv1alpha1.StateAwake, Conditions: ready("True", "Awake", "")}
	policy := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "cost"}}
	policy.Status = policyv1alpha1.LabelPolicyStatus{Violations: 3, Conditions: ready("True", "Enforced", "")}
	server := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg"}}
	server.Status = datav1alpha1.DatabaseServerStatus{Reachable: false, LastCheckTime: &metav1.Time{Time: now}, Conditions: ready("False", "Unreachable", "dial tcp 10.0.0.1:5432: connection refused")}
	soon := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "soon"}}
	soon.Status = datav1alpha1.DevDatabaseStatus{ExpiresAt: &metav1.Time{Time: now.Add(3 * time.Hour)}, Conditions: ready("True", "Ready", "")}
	later := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "team-b", Name: "later"}}
	later.Status = datav1alpha1.DevDatabaseStatus{ExpiresAt: &metav1.Time{Time: now.Add(72 * time.Hour)}, Conditions: ready("True", "Ready", "")}
	unchecked := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
	unchecked.Status = datav1alpha1.DatabaseServerStatus{Conditions: ready("True", "Reachable", "")}
	failing := &datav1alpha1.BackupVerification{ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "orders"}}
	failing.Status = datav1alpha1.BackupVerificationStatus{ConsecutiveFailures: 2, Conditions: ready("True", "Verified", "")}
	fresh := &deliveryv1alpha1.Canary{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	fresh.Status = deliveryv1alpha1.CanaryStatus{Phase: deliveryv1alpha1.PhaseProgressing, CanaryWeight: 20}

	objs := []client.Object{asleep, awake, policy, server, unchecked, soon, later, failing, fresh}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(objs...).Build()
	ov, err := Collect(context.Background(), c, Options{ExpiringWithin: 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	text := ov.Text()
	for _, want := range []string{
		"Tenants: 0\n",
		"SleepSchedules: 2, 1 asleep (4 workloads)\n  nights: asleep: 4 workloads\n",
		"LabelPolicies: 1, 3 violations\n  cost: 3 workloads without an allowed label\n",
		"DatabaseServers: 2, 1 not ready, 1 unreachable\n  pg: not ready (Unreachable): dial tcp 10.0.0.1:5432: connection refused; unreachable\n",
		"DevDatabases: 2, 1 expiring soon\n  team-a/soon: expires in 3h0m0s (orderly db extend)\n",
		"BackupVerifications: 1, 1 failing\n  team-a/orders: the last 2 runs did not pass\n",
		"Canaries: 1, 1 not ready, 1 in analysis, 0 rolled back\n  shop/web: not ready (no Ready condition yet); Progressing at 20% canary traffic\n",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the overview lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(text, "weekends") || strings.Contains(text, "later") {
		t.Errorf("objects that need no attention are listed:\n%s", text)
	}

	// One namespace: only its namespaced objects.
	ov, err = Collect(context.Background(), c, Options{Namespace: "team-b", ExpiringWithin: 24 * time.Hour, Now: now})
	if err != nil {
		t.Fatal(err)
	}
	if s := section(t, ov, "DevDatabase"); s.Total != 1 || len(s.Attention) != 0 {
		t.Errorf("DevDatabases in team-b: %+v, want one needing no attention", s)
	}
}

func section(t *testing.T, ov Overview, kind string) Section {
	t.Helper()
	for _, s := range ov.Sections {
		if s.Kind == kind {
			return s
		}
	}
	t.Fatalf("no section %s", kind)
	return Section{}
}

// A kind that is not installed or that the user may not list is said to be so; the
// others are still shown.
func TestCollectUnavailableKinds(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithInterceptorFuncs(interceptor.Funcs{
		List: func(ctx context.Context, c client.WithWatch, list client.ObjectList, opts ...client.ListOption) error {
			switch list.GetObjectKind().GroupVersionKind().Kind {
			case "CanaryList":
				return &meta.NoKindMatchError{GroupKind: schema.GroupKind{Group: "delivery.orderly.dev", Kind: "Canary"}}
			case "DevDatabaseList":
				return apierrors.NewForbidden(schema.GroupResource{Group: "data.orderly.dev", Resource: "devdatabases"}, "", nil)
			}
			return c.List(ctx, list, opts...)
		}}).Build()
	ov, err := Collect(context.Background(), c, Options{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	if s := section(t, ov, "Canary"); s.Unavailable != "not installed" {
		t.Errorf("Canary: %+v, want not installed", s)
	}
	if s := section(t, ov, "DevDatabase"); s.Unavailable != "not allowed to list" {
		t.Errorf("DevDatabase: %+v, want not allowed to list", s)
	}
	if !ov.Installed() {
		t.Error("Installed() = false with most kinds readable")
	}
	if !strings.Contains(ov.Text(), "Canaries: not installed\n") {
		t.Errorf("text:\n%s", ov.Text())
	}
}

// At most MaxItems objects are listed per kind; the rest are counted.
func TestCollectBoundsTheList(t *testing.T) {
	var objs []client.Object
	for i := range MaxItems + 5 {
		p := &policyv1alpha1.LabelPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p" + string(rune('a'+i))}}
		p.Status.Violations = 1
		p.Status.Conditions = ready("True", "Enforced", "")
		objs = append(objs, p)
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).WithStatusSubresource(objs...).Build()
	ov, err := Collect(context.Background(), c, Options{Now: time.Now()})
	if err != nil {
		t.Fatal(err)
	}
	s := section(t, ov, "LabelPolicy")
	if len(s.Attention) != MaxItems || s.More != 5 {
		t.Errorf("listed %d and %d more, want %d and 5 more", len(s.Attention), s.More, MaxItems)
	}
	if !strings.Contains(ov.Text(), "  ... and 5 more\n") {
		t.Errorf("text:\n%s", ov.Text())
	}
}
