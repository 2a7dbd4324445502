package secretrotation

import (
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

func TestValidate(t *testing.T) {
	sr := func(ns string, mod func(*secretsv1alpha1.SecretRotationSpec)) *secretsv1alpha1.SecretRotation {
		s := &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "x"}}
		mod(&s.Spec)
		return s
	}
	tests := []struct {
		name       string
		sr         *secretsv1alpha1.SecretRotation
		wantReason string
	}{
		{"interval at the minimum", sr("app", func(s *secretsv1alpha1.SecretRotationSpec) { s.Interval = &metav1.Duration{Duration: time.Hour} }), ""},
		{"interval under the minimum", sr("app", func(s *secretsv1alpha1.SecretRotationSpec) { s.Interval = &metav1.Duration{Duration: 59 * time.Minute} }), ReasonInvalidSpec},
		{"bad cron", sr("app", func(s *secretsv1alpha1.SecretRotationSpec) { s.Schedule = &secretsv1alpha1.Schedule{Cron: "0 0 * *"} }), ReasonInvalidSpec},
		{"bad zone", sr("app", func(s *secretsv1alpha1.SecretRotationSpec) {
			s.Schedule = &secretsv1alpha1.Schedule{Cron: "0 0 * * *", TimeZone: "Mars/Olympus"}
		}), ReasonInvalidSpec},
		{"kube-system", sr("kube-system", func(*secretsv1alpha1.SecretRotationSpec) {}), ReasonProtected},
		{"the manager's namespace", sr("orderly-system", func(*secretsv1alpha1.SecretRotationSpec) {}), ReasonProtected},
	}
	for _, tt := range tests {
		_, p := validate(tt.sr, time.Hour, "orderly-system")
		got := ""
		if p != nil {
			got = p.reason
		}
		if got != tt.wantReason {
			t.Errorf("%s: reason %q, want %q", tt.name, got, tt.wantReason)
		}
	}
}

func TestSetConditions(t *testing.T) {
	rot := &secretsv1alpha1.Rotation{Number: 3, Trigger: TriggerInterval, Message: "rolled back: Deployment/web did not become ready in time"}
	tests := []struct {
		name         string
		st           secretsv1alpha1.SecretRotationStatus
		p            *problem
		wantReady    metav1.ConditionStatus
		wantReason   string
		wantRotating metav1.ConditionStatus
		wantManual   metav1.ConditionStatus
	}{
		{"idle", secretsv1alpha1.SecretRotationStatus{Phase: secretsv1alpha1.PhaseDone, Rotation: rot}, nil, metav1.ConditionTrue, ReasonRotated, metav1.ConditionFalse, metav1.ConditionFalse},
		{"in flight", secretsv1alpha1.SecretRotationStatus{Phase: secretsv1alpha1.PhaseRolling, Rotation: rot}, nil, metav1.ConditionTrue, ReasonRotationStarted, metav1.ConditionTrue, metav1.ConditionFalse},
		{"rolled back", secretsv1alpha1.SecretRotationStatus{Phase: secretsv1alpha1.PhaseRolledBack, Rotation: rot}, nil, metav1.ConditionFalse, ReasonRolledBack, metav1.ConditionFalse, metav1.ConditionFalse},
		{"problem wins", secretsv1alpha1.SecretRotationStatus{Phase: secretsv1alpha1.PhaseDone, Rotation: rot}, &problem{ReasonSecretNotOwned, "not ours"}, metav1.ConditionFalse, ReasonSecretNotOwned, metav1.ConditionFalse, metav1.ConditionFalse},
		{"manual change", secretsv1alpha1.SecretRotationStatus{ManualVersion: "abc"}, nil, metav1.ConditionTrue, ReasonIdle, metav1.ConditionFalse, metav1.ConditionTrue},
	}
	for _, tt := range tests {
		st := tt.st
		setConditions(&st, 1, tt.p, "db", time.Time{})
		ready := meta.FindStatusCondition(st.Conditions, ConditionReady)
		if ready.Status != tt.wantReady || ready.Reason != tt.wantReason {
			t.Errorf("%s: Ready %s/%s, want %s/%s", tt.name, ready.Status, ready.Reason, tt.wantReady, tt.wantReason)
		}
		if c := meta.FindStatusCondition(st.Conditions, ConditionRotating); c.Status != tt.wantRotating {
			t.Errorf("%s: Rotating %s, want %s", tt.name, c.Status, tt.wantRotating)
		}
		if c := meta.FindStatusCondition(st.Conditions, ConditionManualChange); c.Status != tt.wantManual {
			t.Errorf("%s: ManualChange %s, want %s", tt.name, c.Status, tt.wantManual)
		}
	}
}

func TestRolePairAlternates(t *testing.T) {
	for _, tt := range []struct{ active, want string }{{"", "app_a"}, {"app_a", "app_b"}, {"app_b", "app_a"}} {
		if got := rolePair("app", tt.active); got != tt.want {
			t.Errorf("from %q: %q, want %q", tt.active, got, tt.want)
		}
	}
}
