package databaseserver

import (
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
)

// A connection that does not verify the server is reported, with what it risks; a
// Secret reference outside the manager's namespace has a reason of its own.
func TestComputeStatusSecurity(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name       string
		obs        observation
		wantReason string
		wantTLS    metav1.ConditionStatus
	}{
		{name: "verify-full", obs: observation{info: database.Info{Version: "15", SystemIdentifier: "7311"}, sslMode: "verify-full", at: t0},
			wantReason: ReasonReachable, wantTLS: metav1.ConditionTrue},
		{name: "prefer", obs: observation{info: database.Info{Version: "15"}, sslMode: "prefer", at: t0}, wantReason: ReasonReachable, wantTLS: metav1.ConditionFalse},
		{name: "require", obs: observation{info: database.Info{Version: "15"}, sslMode: "require", at: t0}, wantReason: ReasonReachable, wantTLS: metav1.ConditionFalse},
		{name: "disable", obs: observation{info: database.Info{Version: "15"}, sslMode: "disable", at: t0}, wantReason: ReasonReachable, wantTLS: metav1.ConditionFalse},
		{name: "Secret elsewhere", obs: observation{err: fmt.Errorf("%w: namespace team-a", database.ErrCredentialsNotAllowed), at: t0},
			wantReason: ReasonCredentialsNotAllowed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg", Generation: 1}, Spec: datav1alpha1.DatabaseServerSpec{Host: "h", Port: 5432}}
			st := computeStatus(s, tc.obs)
			if c := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionReady); c == nil || c.Reason != tc.wantReason {
				t.Errorf("Ready = %+v, want reason %s", c, tc.wantReason)
			}
			c := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionTLSVerified)
			switch {
			case tc.wantTLS == "" && c != nil:
				t.Errorf("TLSVerified = %+v without a connection", c)
			case tc.wantTLS != "" && (c == nil || c.Status != tc.wantTLS):
				t.Errorf("TLSVerified = %+v, want %s", c, tc.wantTLS)
			}
			if st.SystemIdentifier != tc.obs.info.SystemIdentifier {
				t.Errorf("systemIdentifier = %q", st.SystemIdentifier)
			}
		})
	}
}
