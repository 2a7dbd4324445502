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
			if _, due := r.lastAudit(tc.p); due != tc.wantDue {
				t.Errorf("due = %v, want %v", due, tc.wantDue)
			}
		})
	}
}
