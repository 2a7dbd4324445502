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
	"orderly.dev/orderly/internal/database"
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
	// ReasonCredentialsNotAllowed: the DatabaseServer names Secrets outside the
	// manager's namespace, which Orderly does not read.
	ReasonCredentialsNotAllowed = "CredentialsNotAllowed"
	// ReasonExtensionNotAllowed: spec.extensions names extensions the server's
	// allowedExtensions does not list.
	ReasonExtensionNotAllowed = "ExtensionNotAllowed"
	// ReasonTimeout: the server stopped a statement at its lock or statement
	// timeout; retried.
	ReasonTimeout = "Timeout"
	// ReasonServerChanged: the server answering is not the one the database was
	// created on; nothing is created or dropped there.
	ReasonServerChanged = "ServerChanged"
	// ReasonAbandoned (an Event only): the finalizer let go without dropping, as the
	// annotation data.orderly.dev/abandon asked.
	ReasonAbandoned = "Abandoned"
	// Reasons of TTLCapped.
	ReasonMaxTTL       = "MaxTTL"
	ReasonWithinMaxTTL = "WithinMaxTTL"
	// ReasonInvalidSecretTemplate: spec.secretTemplate does not parse or render.
	ReasonInvalidSecretTemplate = "InvalidSecretTemplate"
	// ReasonDeletionProtected: a deleted DevDatabase keeps its database while
	// spec.deletionProtected is true.
	ReasonDeletionProtected = "DeletionProtected"
	// ReasonDropped (an Event only): the database was dropped on deletion.
	ReasonDropped = "Dropped"
	// ReasonUserDropped (an Event only): users removed from spec.users were dropped.
	ReasonUserDropped = "UserDropped"
	// Reasons of Initialized (and of Ready while the init SQL holds it back).
	ReasonInitSucceeded      = "InitSucceeded"
	ReasonInitFailed         = "InitFailed"
	ReasonInitRunning        = "InitRunning"
	ReasonInitPending        = "InitPending"
	ReasonInitSourceNotFound = "InitSourceNotFound"
	ReasonInitTooLarge       = "InitTooLarge"
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
	// serverRead is true when the DatabaseServer was read, and maxTTL is its maxTTL.
	serverRead bool
	maxTTL     time.Duration
	// engine is the DatabaseServer's spec.engine, when serverRead: names differ by engine.
	engine string
	// serverID is the identity of the server the database is on, when Ensure
	// reported one.
	serverID string
	// users are the extra users that exist, when usersKnown.
	users      []datav1alpha1.DevDatabaseUserStatus
	usersKnown bool
	// initReason and initMessage say why the init SQL has not run yet, while
	// status.init is empty.
	initReason, initMessage string
}

// on records what the outcome's DatabaseServer says about the database's lifetime.
func (o outcome) on(s *datav1alpha1.DatabaseServer) outcome {
	o.serverRead, o.maxTTL, o.engine = true, s.Spec.MaxTTL.Duration, string(s.Spec.Engine)
	return o
}

// outcomeFor maps an engine or credentials error to a condition.
func outcomeFor(err error, phase datav1alpha1.DevDatabasePhase) outcome {
	switch {
	case errors.Is(err, database.ErrCredentialsNotAllowed):
		return outcome{phase: phase, reason: ReasonCredentialsNotAllowed, message: err.Error(), retry: recheckFailed}
	case errors.Is(err, database.ErrServerChanged):
		return outcome{phase: phase, reason: ReasonServerChanged, reachable: true, retry: recheckFailed,
			message: fmt.Sprintf("%v; Orderly creates and drops nothing there. Point the DatabaseServer back at that server, or delete this DevDatabase with the annotation %s=true to leave the database behind",
				err, datav1alpha1.AbandonAnnotation)}
	case errors.Is(err, database.ErrTimeout):
		return outcome{phase: phase, reason: ReasonTimeout, reachable: true, err: err, message: fmt.Sprintf("%v; retrying", err)}
	case errors.Is(err, database.ErrCredentials):
		return outcome{phase: phase, reason: ReasonCredentialsMissing, message: err.Error(), err: err}
	case errors.Is(err, database.ErrUnreachable):
		return outcome{phase: phase, reason: ReasonServerUnreachable, message: err.Error(), unreachable: true, err: err}
	case errors.Is(err, database.ErrTemplateInUse):
		return outcome{phase: phase, reason: ReasonTemplateInUse, reachable: true, retry: recheckTemplate,
			message: fmt.Sprintf("Cannot clone yet: %v; close the connections to the template database. Retrying", err)}
	case errors.Is(err, database.ErrTemplateMissing):
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonTemplateNotFound, reachable: true, retry: recheckFailed, message: err.Error()}
	case errors.Is(err, database.ErrNotOwned):
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonNotOwned, reachable: true,
			message: fmt.Sprintf("%v: Orderly never alters or drops what it did not create", err)}
	case errors.Is(err, database.ErrEngineUnsupported):
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonCreateFailed, reachable: true, retry: recheckFailed, message: err.Error()}
	case errors.Is(err, database.ErrExtension):
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
		consider(warnAt(d, o.maxTTL))
		consider(expiryOf(d, o.maxTTL))
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
	if o.serverRead || st.Role == "" {
		st.Database, st.Role = database.NamesFor(o.engine, string(d.UID))
	}
	st.SecretName = ""
	if st.Phase == datav1alpha1.PhaseReady {
		st.SecretName = secretName(d)
	}
	switch {
	case st.Phase == datav1alpha1.PhaseExpired:
		// Nothing of Orderly's lives on any server; a database made again (the ttl
		// raised) is a new one, with its own users and its own init run.
		st.ServerIdentity, st.Users, st.Init = "", nil, nil
	case o.serverID != "":
		st.ServerIdentity = o.serverID
	}
	if o.usersKnown && st.Phase != datav1alpha1.PhaseExpired {
		st.Users = o.users
	}
	conds := kit.ConditionsOf(&st.Conditions, d.Generation).At(now)
	initCondition(d, &st, conds, o)
	// Without the DatabaseServer its maxTTL is unknown: what was known stands.
	if o.serverRead || st.ExpiresAt == nil {
		expiry := metav1.NewTime(expiryOf(d, o.maxTTL))
		st.ExpiresAt = &expiry
	}
	at := *st.ExpiresAt
	if o.serverRead {
		if d.Spec.TTL.Duration > lifetime(d, o.maxTTL) {
			conds.True(datav1alpha1.ConditionTTLCapped, ReasonMaxTTL,
				fmt.Sprintf("spec.ttl %s is longer than DatabaseServer %s's maxTTL %s: the database expires at %s (creation + maxTTL)",
					d.Spec.TTL.Duration, d.Spec.ServerRef, o.maxTTL, at.UTC().Format(time.RFC3339)))
		} else {
			conds.False(datav1alpha1.ConditionTTLCapped, ReasonWithinMaxTTL, "")
		}
	}
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
	// The warning's lead is that of warnAt, counted from the expiry shown.
	if st.Phase != datav1alpha1.PhaseExpired && !now.Before(at.Add(-min(time.Hour, at.Sub(d.CreationTimestamp.Time)/4))) {
		conds.True(datav1alpha1.ConditionExpiringSoon, ReasonExpiringSoon,
			fmt.Sprintf("The database is dropped at %s; extend with `orderly db extend %s --by 24h`", at.UTC().Format(time.RFC3339), d.Name))
	} else {
		conds.False(datav1alpha1.ConditionExpiringSoon, ReasonNotExpiringSoon, "")
	}
	return st
}

// initCondition sets Initialized from status.init, or from why the SQL has not run
// yet; without spec.init there is none.
func initCondition(d *datav1alpha1.DevDatabase, st *datav1alpha1.DevDatabaseStatus, conds kit.Conditions, o outcome) {
	if d.Spec.Init == nil {
		conds.Remove(datav1alpha1.ConditionInitialized)
		return
	}
	in := st.Init
	switch {
	case in == nil && o.initReason != "":
		conds.False(datav1alpha1.ConditionInitialized, o.initReason, o.initMessage)
	case in == nil:
		conds.False(datav1alpha1.ConditionInitialized, ReasonInitPending, "The init SQL runs once the database is created")
	case in.State == datav1alpha1.InitSucceededState:
		conds.True(datav1alpha1.ConditionInitialized, ReasonInitSucceeded, initSummary(in))
	case in.State == datav1alpha1.InitFailedState:
		conds.False(datav1alpha1.ConditionInitialized, ReasonInitFailed, in.Message)
	default:
		conds.False(datav1alpha1.ConditionInitialized, ReasonInitRunning, "The init SQL is running: "+initSummary(in))
	}
}

// initSummary names what ran: the ConfigMap key, its resourceVersion and hash.
func initSummary(in *datav1alpha1.DevDatabaseInitStatus) string {
	sum := in.SHA256
	if len(sum) > 12 {
		sum = sum[:12]
	}
	msg := fmt.Sprintf("ConfigMap %s key %s (resourceVersion %s, sha256 %s)", in.ConfigMap, in.Key, in.ResourceVersion, sum)
	if in.FinishedAt != nil {
		msg += " ran at " + in.FinishedAt.UTC().Format(time.RFC3339)
	}
	return msg + "; it never runs again"
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
	if capped := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionTTLCapped); capped != nil && capped.Status == metav1.ConditionTrue &&
		!meta.IsStatusConditionTrue(before.Conditions, datav1alpha1.ConditionTTLCapped) {
		r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, ReasonMaxTTL, "Expire", "%s", capped.Message)
	}
	prevReady := meta.FindStatusCondition(before.Conditions, datav1alpha1.ConditionReady)
	newReady := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionReady)
	if newReady != nil && newReady.Status == metav1.ConditionFalse && newReady.Reason != ReasonExpired &&
		(prevReady == nil || prevReady.Reason != newReady.Reason) && st.Phase != datav1alpha1.PhaseDeleting {
		r.Recorder.Eventf(d, nil, corev1.EventTypeWarning, newReady.Reason, "Reconcile", "%s", newReady.Message)
	}
}
