package devdatabase

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/engine"
	"orderly.dev/orderly/internal/kit"
)

// Condition reasons.
const (
	ReasonReady               = "Ready"
	ReasonServerNotFound      = "ServerNotFound"
	ReasonServerDeleting      = "ServerDeleting"
	ReasonServerUnreachable   = "ServerUnreachable"
	ReasonServerReachable     = "ServerReachable"
	ReasonCredentialsMissing  = "CredentialsMissing"
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"
	ReasonTTLTooLong          = "TTLTooLong"
	ReasonTemplateNotFound    = "TemplateNotFound"
	ReasonTemplateInUse       = "TemplateInUse"
	ReasonLimitExceeded       = "LimitExceeded"
	ReasonNotOwned            = "NotOwned"
	ReasonSecretConflict      = "SecretConflict"
	ReasonSecretFailed        = "SecretFailed"
	ReasonExtensionFailed     = "ExtensionFailed"
	ReasonCreateFailed        = "CreateFailed"
	ReasonExpired             = "Expired"
	ReasonExpiringSoon        = "ExpiringSoon"
	ReasonNotExpiringSoon     = "NotExpiringSoon"
)

// outcome is what one reconcile observed and did.
type outcome struct {
	phase   datav1alpha1.DevDatabasePhase
	reason  string
	message string
	// reachable is true when the server answered during this reconcile;
	// unreachable when it did not; neither when it was not contacted.
	reachable, unreachable bool
	// err is retried with the controller's backoff.
	err error
	// retry re-runs the reconcile after a fixed time.
	retry time.Duration
}

// outcomeFor maps an engine or credentials error to a condition.
func outcomeFor(err error, phase datav1alpha1.DevDatabasePhase) outcome {
	switch {
	case errors.Is(err, engine.ErrCredentials):
		return outcome{phase: phase, reason: ReasonCredentialsMissing, message: err.Error(), err: err}
	case errors.Is(err, engine.ErrUnreachable):
		return outcome{phase: phase, reason: ReasonServerUnreachable, message: err.Error(), unreachable: true, err: err}
	case errors.Is(err, engine.ErrTemplateInUse):
		return outcome{phase: phase, reason: ReasonTemplateInUse, reachable: true, retry: recheckTemplate,
			message: fmt.Sprintf("Cannot clone yet: %v; close the connections to the template database. Retrying", err)}
	case errors.Is(err, engine.ErrTemplateMissing):
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonTemplateNotFound, reachable: true, retry: recheckFailed, message: err.Error()}
	case errors.Is(err, engine.ErrNotOwned):
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonNotOwned, reachable: true,
			message: fmt.Sprintf("%v: Orderly never alters or drops what it did not create", err)}
	case errors.Is(err, engine.ErrExtension):
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonExtensionFailed, reachable: true, retry: recheckFailed, message: err.Error()}
	default:
		return outcome{phase: phase, reason: ReasonCreateFailed, message: err.Error(), reachable: true, err: err}
	}
}

func (o outcome) requeueAfter(d *datav1alpha1.DevDatabase, now time.Time) time.Duration {
	next := o.retry
	consider := func(at time.Time) {
		if wait := at.Sub(now); wait > 0 && (next == 0 || wait < next) {
			next = wait + 50*time.Millisecond
		}
	}
	if o.phase != datav1alpha1.PhaseExpired {
		consider(warnAt(d))
		consider(expiresAt(d))
	}
	return next
}

// computeStatus derives the status from the outcome. Pure.
func computeStatus(d *datav1alpha1.DevDatabase, o outcome, now time.Time) datav1alpha1.DevDatabaseStatus {
	st := *d.Status.DeepCopy()
	st.ObservedGeneration = d.Generation
	if o.phase != "" {
		st.Phase = o.phase
	}
	st.Database, st.Role = engine.Names(string(d.UID))
	st.SecretName = ""
	if st.Phase == datav1alpha1.PhaseReady {
		st.SecretName = secretName(d)
	}
	at := metav1.NewTime(expiresAt(d))
	st.ExpiresAt = &at
	conds := kit.ConditionsOf(&st.Conditions, d.Generation)
	if st.Phase == datav1alpha1.PhaseReady {
		conds.True(datav1alpha1.ConditionReady, o.reason, o.message)
	} else {
		conds.False(datav1alpha1.ConditionReady, o.reason, o.message)
	}
	switch {
	case o.unreachable:
		conds.False(datav1alpha1.ConditionServerReachable, ReasonServerUnreachable, o.message)
	case o.reachable:
		conds.True(datav1alpha1.ConditionServerReachable, ReasonServerReachable, "Orderly reached the server")
	}
	if st.Phase != datav1alpha1.PhaseExpired && !now.Before(warnAt(d)) {
		conds.True(datav1alpha1.ConditionExpiringSoon, ReasonExpiringSoon,
			fmt.Sprintf("The database is dropped at %s; extend with `orderly db extend %s --by 24h`", at.UTC().Format(time.RFC3339), d.Name))
	} else {
		conds.False(datav1alpha1.ConditionExpiringSoon, ReasonNotExpiringSoon, "")
	}
	return st
}

// updateStatus writes the status computed from o when it changed, records the
// phase metric, and sends the Events that belong to the condition changes it made.
func (r *Reconciler) updateStatus(ctx context.Context, d *datav1alpha1.DevDatabase, o outcome, now time.Time) error {
	replaced, err := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, d, func(cur *datav1alpha1.DevDatabase) {
		cur.Status = computeStatus(cur, o, now)
	})
	recordPhase(d)
	if err != nil {
		return err
	}
	// Nothing written (unchanged, or dropped for a newer generation whose reconcile
	// reports afresh): no transition to tell.
	if replaced != nil {
		r.recordTransitions(d, replaced.Status)
	}
	return nil
}

// recordTransitions sends the Events of the condition changes between before and
// d's status: expiring soon, and each new reason for not being ready.
func (r *Reconciler) recordTransitions(d *datav1alpha1.DevDatabase, before datav1alpha1.DevDatabaseStatus) {
	st := d.Status
	if meta.IsStatusConditionTrue(st.Conditions, datav1alpha1.ConditionExpiringSoon) && !meta.IsStatusConditionTrue(before.Conditions, datav1alpha1.ConditionExpiringSoon) {
		r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, ReasonExpiringSoon, "Expire",
			"Database %s is dropped at %s; extend with `orderly db extend %s --by 24h`", st.Database, st.ExpiresAt.UTC().Format(time.RFC3339), d.Name)
	}
	prevReady := meta.FindStatusCondition(before.Conditions, datav1alpha1.ConditionReady)
	newReady := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionReady)
	if newReady != nil && newReady.Status == metav1.ConditionFalse && newReady.Reason != ReasonExpired &&
		(prevReady == nil || prevReady.Reason != newReady.Reason) && st.Phase != datav1alpha1.PhaseDeleting {
		r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, newReady.Reason, "Reconcile", "%s", newReady.Message)
	}
}
