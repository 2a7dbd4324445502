package labelpolicy

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// A reconcile that reads a cached policy older than the status the last audit wrote
// must not re-audit (the integration test TestStaleCopyNeverUndoesAnAudit shows that a
// status computed from that copy is not written either).
func TestAuditBookkeeping(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	fresh := func(mod func(*policyv1alpha1.LabelPolicy)) *policyv1alpha1.LabelPolicy {
		p := testPolicy(policyv1alpha1.ActionAudit)
		p.Generation = 2
		if mod != nil {
			mod(p)
		}
		return p
	}
	withAudit := func(p *policyv1alpha1.LabelPolicy) {
		p.Status.ObservedGeneration = 2
		p.Status.LastAuditTime = &metav1.Time{Time: at}
	}
	cases := []struct {
		name    string
		mark    bool
		p       *policyv1alpha1.LabelPolicy
		wantDue bool
	}{
		{"never audited", false, fresh(nil), true},
		{"audited, cache caught up", true, fresh(withAudit), false},
		{"audited, cache stale", true, fresh(nil), false},
		{"spec changed since", true, fresh(func(p *policyv1alpha1.LabelPolicy) { withAudit(p); p.Generation = 3 }), true},
		{"recreated under the same name", true, fresh(func(p *policyv1alpha1.LabelPolicy) { p.UID = "other" }), true},
		{"restarted manager reads status", false, fresh(withAudit), false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Reconciler{}
			if tc.mark {
				r.audited.Store("cost", auditMark{uid: "uid-1", generation: 2, at: at})
			}
			if _, due := r.lastAudit(tc.p, at, ""); due != tc.wantDue {
				t.Errorf("due = %v, want %v", due, tc.wantDue)
			}
		})
	}
}

// An exception that expires after an audit makes the next reconcile audit again,
// whether the manager remembers the audit or reads it from status after a restart:
// the excepted workloads are violations from then on.
func TestAuditAgainWhenAnExceptionExpires(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := testPolicy(policyv1alpha1.ActionDeny)
	p.Generation = 2
	p.Spec.Exceptions = []policyv1alpha1.LabelPolicyException{{Name: "migration", Namespaces: []string{"shop"}, Reason: "r", Expires: metav1.NewTime(at.Add(time.Minute))}}
	p.Status.ObservedGeneration = 2
	p.Status.LastAuditTime = &metav1.Time{Time: at}
	p.Status.Exceptions = []policyv1alpha1.ExceptionStatus{{Name: "migration", State: policyv1alpha1.ExceptionActive, Expires: p.Spec.Exceptions[0].Expires}}

	for _, mark := range []bool{true, false} {
		r := &Reconciler{}
		if mark {
			r.audited.Store("cost", auditMark{uid: "uid-1", generation: 2, at: at, exceptions: "migration"})
		}
		if _, due := r.lastAudit(p, at.Add(30*time.Second), ""); due {
			t.Errorf("mark=%v: due while the exception is active", mark)
		}
		if _, due := r.lastAudit(p, at.Add(time.Minute), ""); !due {
			t.Errorf("mark=%v: not due once the exception expired", mark)
		}
	}
}

// A changed LabelValueSet (or a value of it expired) makes the next reconcile audit
// again, so running workloads with a value retired since are reported at once.
func TestAuditAgainWhenTheValueSetChanges(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	p := testPolicy(policyv1alpha1.ActionDeny)
	p.Generation = 2
	r := &Reconciler{}
	r.audited.Store("cost", auditMark{uid: "uid-1", generation: 2, at: at, values: "7@0"})
	if _, due := r.lastAudit(p, at.Add(time.Second), "7@0"); due {
		t.Errorf("due with the set unchanged")
	}
	if _, due := r.lastAudit(p, at.Add(time.Second), "8@0"); !due {
		t.Errorf("not due after the set changed")
	}
}
