package devdatabase

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// Initialized follows status.init (or why the SQL has not run yet); it is absent
// without spec.init; an expired database forgets its users and its init run, so
// that a database made again gets both afresh.
func TestInitConditionAndExpiry(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := created.Add(time.Hour)
	withInit := func(in *datav1alpha1.DevDatabaseInitStatus) *datav1alpha1.DevDatabase {
		d := devDB(24*time.Hour, created)
		d.Spec.Init = &datav1alpha1.DevDatabaseInit{ConfigMapRef: datav1alpha1.ConfigMapKeyReference{Name: "cm", Key: "init.sql"}}
		d.Status.Init = in
		d.Status.Users = []datav1alpha1.DevDatabaseUserStatus{{Name: "ro"}}
		return d
	}
	finished := metav1.NewTime(created.Add(time.Minute))
	for _, tc := range []struct {
		name       string
		d          *datav1alpha1.DevDatabase
		out        outcome
		wantStatus metav1.ConditionStatus // "" for no condition
		wantReason string
		wantInit   bool
		wantUsers  int
	}{
		{name: "no init", d: devDB(24*time.Hour, created), out: outcome{phase: datav1alpha1.PhaseReady, reason: ReasonReady}},
		{name: "not run yet", d: withInit(nil), out: outcome{phase: datav1alpha1.PhasePending, reason: ReasonCreateFailed},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonInitPending, wantUsers: 1},
		{name: "ConfigMap missing", d: withInit(nil), out: outcome{phase: datav1alpha1.PhasePending, initReason: ReasonInitSourceNotFound, initMessage: "no cm"},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonInitSourceNotFound, wantUsers: 1},
		{name: "running", d: withInit(&datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitRunning}), out: outcome{phase: datav1alpha1.PhasePending},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonInitRunning, wantInit: true, wantUsers: 1},
		{name: "succeeded", d: withInit(&datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitSucceededState, FinishedAt: &finished}),
			out:        outcome{phase: datav1alpha1.PhaseReady, users: []datav1alpha1.DevDatabaseUserStatus{{Name: "a"}, {Name: "b"}}, usersKnown: true},
			wantStatus: metav1.ConditionTrue, wantReason: ReasonInitSucceeded, wantInit: true, wantUsers: 2},
		{name: "failed", d: withInit(&datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitFailedState, Message: "boom"}), out: outcome{phase: datav1alpha1.PhaseFailed},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonInitFailed, wantInit: true, wantUsers: 1},
		{name: "expired", d: withInit(&datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitSucceededState}), out: outcome{phase: datav1alpha1.PhaseExpired, reason: ReasonExpired},
			wantStatus: metav1.ConditionFalse, wantReason: ReasonInitPending},
	} {
		t.Run(tc.name, func(t *testing.T) {
			st := computeStatus(tc.d, tc.out, now)
			c := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionInitialized)
			switch {
			case tc.wantStatus == "" && c != nil:
				t.Fatalf("Initialized = %+v, want none", c)
			case tc.wantStatus != "" && (c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason):
				t.Fatalf("Initialized = %+v, want %s %s", c, tc.wantStatus, tc.wantReason)
			}
			if (st.Init != nil) != tc.wantInit || len(st.Users) != tc.wantUsers {
				t.Fatalf("init %+v, users %v", st.Init, st.Users)
			}
			if tc.wantReason == ReasonInitFailed && c.Message != "boom" {
				t.Fatalf("message %q", c.Message)
			}
		})
	}
}

// provisioned: rules for new databases do not apply to one that exists.
func TestProvisioned(t *testing.T) {
	d := devDB(time.Hour, time.Now())
	if provisioned(d) {
		t.Fatal("a new DevDatabase is not provisioned")
	}
	d.Status.ServerIdentity = "123"
	d.Status.Phase = datav1alpha1.PhaseFailed
	if !provisioned(d) {
		t.Fatal("one whose database was created is provisioned, whatever holds it back")
	}
	d.Status.Phase = datav1alpha1.PhaseExpired
	if provisioned(d) {
		t.Fatal("an expired one is not")
	}
}

// The init run's record is written at once or not at all: a refusal and a
// DevDatabase that changed meanwhile write nothing and leave the reconcile's copy as
// it was, so that the SQL never runs unrecorded and no unwritten record reaches the
// status written later.
func TestRecordInit(t *testing.T) {
	ctx := context.Background()
	running := func(cur *datav1alpha1.DevDatabase) error {
		if cur.Status.Init != nil {
			return errInitRecorded
		}
		cur.Status.Init = &datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitRunning, Transaction: "42"}
		return nil
	}
	for _, tc := range []struct {
		name string
		// onServer changes the stored DevDatabase after the reconcile read it.
		onServer   func(*datav1alpha1.DevDatabase)
		wantErr    error
		wantStored string // the stored status.init's transaction, "" for none
	}{
		{name: "recorded", wantStored: "42"},
		{name: "recorded by another reconcile meanwhile", wantErr: errInitRecorded, wantStored: "7",
			onServer: func(d *datav1alpha1.DevDatabase) {
				d.Status.Init = &datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitRunning, Transaction: "7"}
			}},
		{name: "the spec changed meanwhile", wantErr: errInitNotRecorded,
			onServer: func(d *datav1alpha1.DevDatabase) { d.Generation++ }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			stored := devDB(time.Hour, time.Now())
			c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(stored).WithStatusSubresource(stored).Build()
			var d datav1alpha1.DevDatabase
			if err := c.Get(ctx, client.ObjectKeyFromObject(stored), &d); err != nil {
				t.Fatal(err)
			}
			if tc.onServer != nil {
				var latest datav1alpha1.DevDatabase
				if err := c.Get(ctx, client.ObjectKeyFromObject(stored), &latest); err != nil {
					t.Fatal(err)
				}
				// Once for the object, once for its status subresource (the update of
				// the object hands back the stored status).
				tc.onServer(&latest)
				if err := c.Update(ctx, &latest); err != nil {
					t.Fatal(err)
				}
				tc.onServer(&latest)
				if err := c.Status().Update(ctx, &latest); err != nil {
					t.Fatal(err)
				}
			}
			before := d.DeepCopy()
			r := &Reconciler{Client: c, APIReader: c}
			err := r.recordInit(ctx, &d, running)
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			var got datav1alpha1.DevDatabase
			if err := c.Get(ctx, client.ObjectKeyFromObject(stored), &got); err != nil {
				t.Fatal(err)
			}
			if txn := initTransaction(got.Status.Init); txn != tc.wantStored {
				t.Errorf("stored status.init transaction %q, want %q", txn, tc.wantStored)
			}
			switch {
			case err == nil && initTransaction(d.Status.Init) != "42":
				t.Errorf("the reconcile's copy does not hold what was written: %+v", d.Status.Init)
			case err != nil && !equality.Semantic.DeepEqual(&d, before):
				t.Errorf("a record that was not written reached the reconcile's copy: %+v", d.Status.Init)
			}
		})
	}
}

func initTransaction(in *datav1alpha1.DevDatabaseInitStatus) string {
	if in == nil {
		return ""
	}
	return in.Transaction
}
