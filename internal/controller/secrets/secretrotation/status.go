package secretrotation

import (
	"fmt"
	"time"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Condition types.
const (
	// ConditionReady: the Secret is Orderly's to rotate and the last rotation did
	// not fail.
	ConditionReady = "Ready"
	// ConditionRotating: a rotation is in flight; its reason is the phase.
	ConditionRotating = "Rotating"
	// ConditionManualChange: the Secret holds content someone else wrote.
	ConditionManualChange = "ManualChange"
)

// Condition and Event reasons.
const (
	ReasonIdle             = "Idle"
	ReasonRotated          = "Rotated"
	ReasonRotationStarted  = "RotationStarted"
	ReasonSecretUpdated    = "SecretUpdated"
	ReasonRolledBack       = "RolledBack"
	ReasonHeld             = "Held"
	ReasonResumed          = "Resumed"
	ReasonInvalidSpec      = "InvalidSpec"
	ReasonProtected        = "ProtectedNamespace"
	ReasonSecretNotOwned   = "SecretNotOwned"
	ReasonSecretMissing    = "SecretMissing"
	ReasonStagingConflict  = "StagingConflict"
	ReasonReadFailed       = "ReadFailed"
	ReasonManualChange     = "ManualChange"
	ReasonNoManualChange   = "NoManualChange"
	ReasonTargetMissing    = "TargetMissing"
	ReasonTooManyConsumers = "TooManyConsumers"
	ReasonServerNotFound   = "ServerNotFound"
	ReasonServerNotAllowed = "ServerNotAllowed"
	ReasonServerFailed     = "ServerFailed"
)

// inFlight says whether phase p is a rotation in progress.
func inFlight(p secretsv1alpha1.Phase) bool {
	switch p {
	case "", secretsv1alpha1.PhaseDone, secretsv1alpha1.PhaseRolledBack, secretsv1alpha1.PhaseHeld:
		return false
	}
	return true
}

// validate checks what the API server cannot: the interval against the manager's
// minimum, the cron expression and the time zone, and the namespace. It returns
// what decides the rotations, or the problem to report.
func validate(sr *secretsv1alpha1.SecretRotation, minInterval time.Duration, managerNamespace string) (when, *problem) {
	if ns := sr.Namespace; kit.ProtectedNamespace(ns, managerNamespace) {
		return when{}, &problem{ReasonProtected, fmt.Sprintf("namespace %s is protected (kube-* and Orderly's own namespace): SecretRotations there are not acted on", ns)}
	}
	var w when
	if iv := sr.Spec.Interval; iv != nil {
		if iv.Duration < minInterval {
			return when{}, &problem{ReasonInvalidSpec, fmt.Sprintf("interval %s is shorter than the minimum %s (the manager's --secretrotation-min-interval)", iv.Duration, minInterval)}
		}
		w.interval = iv.Duration
	}
	if s := sr.Spec.Schedule; s != nil {
		c, err := kit.ParseCron(s.Cron)
		if err != nil {
			return when{}, &problem{ReasonInvalidSpec, err.Error()}
		}
		loc, err := kit.LoadLocation(s.TimeZone)
		if err != nil {
			return when{}, &problem{ReasonInvalidSpec, "schedule.timeZone: " + err.Error()}
		}
		w.cron, w.loc = c, loc
	}
	return w, nil
}

// setConditions derives the conditions from the status and the problem found.
func setConditions(st *secretsv1alpha1.SecretRotationStatus, generation int64, p *problem, secretName string, now time.Time) {
	c := kit.ConditionsOf(&st.Conditions, generation).At(now)
	switch {
	case p != nil:
		c.False(ConditionReady, p.reason, p.message)
	case st.Phase == secretsv1alpha1.PhaseRolledBack:
		c.False(ConditionReady, ReasonRolledBack, st.Rotation.Message)
	case st.Phase == secretsv1alpha1.PhaseHeld:
		c.False(ConditionReady, ReasonHeld, st.Rotation.Message)
	case inFlight(st.Phase):
		c.True(ConditionReady, ReasonRotationStarted, fmt.Sprintf("rotation %d in progress (%s)", st.Rotation.Number, st.Phase))
	case st.Phase == secretsv1alpha1.PhaseDone:
		c.True(ConditionReady, ReasonRotated, fmt.Sprintf("Secret %s is at version %s", secretName, st.CurrentVersion))
	default:
		c.True(ConditionReady, ReasonIdle, fmt.Sprintf("Secret %s is at version %s", secretName, st.CurrentVersion))
	}
	if inFlight(st.Phase) {
		c.True(ConditionRotating, string(st.Phase), fmt.Sprintf("rotation %d (%s) is in phase %s", st.Rotation.Number, st.Rotation.Trigger, st.Phase))
	} else {
		c.False(ConditionRotating, ReasonIdle, "no rotation in progress")
	}
	if st.ManualVersion != "" {
		c.True(ConditionManualChange, ReasonManualChange, fmt.Sprintf("Secret %s holds version %s, written outside Orderly (expected %s); onManualChange is Report", secretName, st.ManualVersion, st.CurrentVersion))
	} else {
		c.False(ConditionManualChange, ReasonNoManualChange, "the Secret holds what Orderly wrote or accepted")
	}
}
