package devdatabase

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/kit"
)

// spec.init's SQL runs once, and status.init is what makes it once:
//
//  1. With status.init empty, the SQL is read from the ConfigMap (straight from the
//     API server: ConfigMaps are not cached) and its transaction begun, as the
//     database's role.
//  2. Before the SQL runs, status.init is written: state Running, the ConfigMap's
//     resourceVersion, the SQL's sha256 and the transaction's identifier, guarded
//     by the DevDatabase's resourceVersion. When that write fails, the transaction
//     is rolled back and nothing ran.
//  3. The SQL runs and commits (or fails and is rolled back), and status.init says
//     Succeeded or Failed.
//
// A restart (or a lost connection) between 2 and 3 leaves Running: the next
// reconcile asks the server what became of that transaction (PostgreSQL's
// pg_xact_status) and records Succeeded when it committed, Failed when it was
// rolled back or the server cannot say any more, and waits while it is still in
// progress. The SQL itself is never sent twice.

// Retry intervals of the init phase.
const (
	recheckInitSource  = 15 * time.Second
	recheckInitRunning = 3 * time.Second
)

// errInitRecorded: status.init was written by someone else meanwhile (another
// manager's reconcile); this run stops before its SQL.
var errInitRecorded = errors.New("the init run was recorded meanwhile")

// errInitNotRecorded: the DevDatabase changed generation (or is gone) while its init
// run was being recorded; nothing was written, and a run stops before its SQL.
var errInitNotRecorded = errors.New("the DevDatabase changed while its init run was being recorded")

// initialize runs spec.init once and reports whether the DevDatabase may be Ready
// (done); otherwise the outcome says why not.
func (r *Reconciler) initialize(ctx context.Context, d *datav1alpha1.DevDatabase, e database.Engine, db database.Database, s *datav1alpha1.DatabaseServer, srv database.Server) (outcome, bool) {
	if d.Status.Init == nil {
		if out, ok := r.runInit(ctx, d, e, db, s, srv); !ok {
			return out, false
		}
	}
	in := d.Status.Init
	if in.State == datav1alpha1.InitRunning {
		state, err := e.InitOutcome(ctx, in.Transaction)
		if err != nil {
			return outcomeFor(database.Scrub(err, s, srv), datav1alpha1.PhasePending), false
		}
		switch state {
		case database.TxnInProgress:
			return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitRunning, reachable: true, retry: recheckInitRunning,
				message: "The init SQL is running (its transaction is still open on the server)"}, false
		case database.TxnCommitted:
			if err := r.finishInit(ctx, d, datav1alpha1.InitSucceededState, "Succeeded; its outcome was read back from the server after Orderly lost the answer"); err != nil {
				return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitRunning, message: err.Error(), err: err}, false
			}
			countInit(s.Name, true)
		default:
			msg := "Interrupted: Orderly lost its connection or stopped while the SQL ran, and the server rolled it back (nothing of it applied)"
			if state == database.TxnUnknown {
				msg = "Interrupted: Orderly lost its connection or stopped while the SQL ran, and the server can no longer say whether it committed"
			}
			msg += "; it is not run again: apply it by hand, or create a new DevDatabase"
			if err := r.finishInit(ctx, d, datav1alpha1.InitFailedState, msg); err != nil {
				return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitRunning, message: err.Error(), err: err}, false
			}
			countInit(s.Name, false)
		}
	}
	if d.Status.Init.State == datav1alpha1.InitFailedState {
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonInitFailed, reachable: true,
			message: fmt.Sprintf("The init SQL failed: %s. It is not run again: the database and its Secrets are there to inspect; fix the SQL and create a new DevDatabase", d.Status.Init.Message)}, false
	}
	return outcome{}, true
}

// runInit reads the SQL and runs it, recording the run in status.init. It returns
// false with an outcome when the DevDatabase cannot be Ready yet.
func (r *Reconciler) runInit(ctx context.Context, d *datav1alpha1.DevDatabase, e database.Engine, db database.Database, s *datav1alpha1.DatabaseServer, srv database.Server) (outcome, bool) {
	ref := d.Spec.Init.ConfigMapRef
	pending := func(reason, msg string) (outcome, bool) {
		return outcome{phase: datav1alpha1.PhasePending, reason: reason, message: msg, reachable: true, retry: recheckInitSource,
			initReason: reason, initMessage: msg}, false
	}
	var cm corev1.ConfigMap
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: ref.Name}, &cm)
	switch {
	case apierrors.IsNotFound(err):
		return pending(ReasonInitSourceNotFound, fmt.Sprintf("ConfigMap %s (spec.init) does not exist in namespace %s; the init SQL runs once it does", ref.Name, d.Namespace))
	case err != nil:
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitSourceNotFound, message: fmt.Sprintf("reading ConfigMap %s: %v", ref.Name, err), err: err}, false
	}
	sql, ok := cm.Data[ref.Key]
	if !ok {
		return pending(ReasonInitSourceNotFound, fmt.Sprintf("ConfigMap %s has no key %s (spec.init); the init SQL runs once it has", ref.Name, ref.Key))
	}
	if len(sql) > datav1alpha1.MaxInitSQLBytes {
		return pending(ReasonInitTooLarge, fmt.Sprintf("ConfigMap %s key %s holds %d bytes of SQL; the init SQL may have at most %d. Shorten it (load bulk data from the application instead)",
			ref.Name, ref.Key, len(sql), datav1alpha1.MaxInitSQLBytes))
	}
	sum := sha256.Sum256([]byte(sql))
	started := false
	begun := func(txn string) error {
		now := metav1.NewTime(r.Clock.Now())
		err := r.recordInit(ctx, d, func(cur *datav1alpha1.DevDatabase) error {
			if cur.Status.Init != nil {
				return errInitRecorded
			}
			cur.Status.Init = &datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitRunning, ConfigMap: ref.Name, Key: ref.Key,
				ResourceVersion: cm.ResourceVersion, SHA256: hex.EncodeToString(sum[:]), Transaction: txn, StartedAt: &now}
			return nil
		})
		started = err == nil
		return err
	}
	err = e.Init(ctx, db, sql, begun)
	switch {
	case err == nil:
		if err := r.finishInit(ctx, d, datav1alpha1.InitSucceededState, "Succeeded"); err != nil {
			// Running stays recorded; the next reconcile reads the outcome back.
			return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitRunning, message: err.Error(), err: err}, false
		}
		r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, ReasonInitSucceeded, "Initialize", "Ran the init SQL of ConfigMap %s key %s in database %s", ref.Name, ref.Key, db.Name)
		countInit(s.Name, true)
		return outcome{}, true
	case errors.Is(err, database.ErrInit):
		msg := kit.Truncate(database.Scrub(err, s, srv).Error(), 900)
		if ferr := r.finishInit(ctx, d, datav1alpha1.InitFailedState, msg); ferr != nil {
			return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitRunning, message: ferr.Error(), err: ferr}, false
		}
		// The Warning Event is the one every new reason of Ready=False gets (InitFailed).
		countInit(s.Name, false)
		return outcome{}, true
	case !started:
		switch {
		case errors.Is(err, errInitRecorded):
			return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitRunning, message: "The init run was recorded by another reconcile; looking again", retry: recheckInitRunning}, false
		case errors.Is(err, errInitNotRecorded):
			return outcome{phase: datav1alpha1.PhasePending, reason: ReasonInitRunning, message: "The DevDatabase changed before its init run was recorded; the SQL did not run and runs at the next reconcile", retry: recheckInitRunning}, false
		}
		return outcomeFor(database.Scrub(err, s, srv), datav1alpha1.PhasePending), false
	default:
		// Begun and recorded, outcome unknown (the connection was lost): the next
		// reconcile asks the server.
		return outcomeFor(database.Scrub(err, s, srv), datav1alpha1.PhasePending), false
	}
}

// finishInit records how the run in status.init ended.
func (r *Reconciler) finishInit(ctx context.Context, d *datav1alpha1.DevDatabase, state datav1alpha1.InitState, msg string) error {
	now := metav1.NewTime(r.Clock.Now())
	return r.recordInit(ctx, d, func(cur *datav1alpha1.DevDatabase) error {
		if cur.Status.Init == nil {
			return errors.New("status.init vanished")
		}
		cur.Status.Init.State, cur.Status.Init.Message, cur.Status.Init.FinishedAt = state, kit.Truncate(msg, 1024), &now
		return nil
	})
}

// recordInit writes the change mutate makes to status.init at once, whatever else
// the reconcile does later: the run's record must reach the API server before (and
// right after) the SQL. It is kit.PatchStatus's write (a merge patch guarded by the
// resourceVersion; on a conflict mutate is called again on the latest version), with
// what an init record needs besides: mutate may refuse (its error is returned and
// nothing is written); a record kit.PatchStatus leaves unwritten because the
// DevDatabase changed generation or is gone is errInitNotRecorded, so that no SQL runs
// unrecorded; and d holds what was written on success and stays as it was otherwise,
// so that the status written at the end of the reconcile never carries a record the
// API server does not have.
func (r *Reconciler) recordInit(ctx context.Context, d *datav1alpha1.DevDatabase, mutate func(*datav1alpha1.DevDatabase) error) error {
	cur := d.DeepCopy()
	var refused error
	replaced, err := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, cur, func(latest *datav1alpha1.DevDatabase) {
		next := latest.DeepCopy()
		if refused = mutate(next); refused == nil {
			latest.Status = next.Status
		}
	})
	switch {
	case refused != nil:
		return refused
	case err != nil:
		return fmt.Errorf("recording the init run in status: %w", err)
	case replaced == nil:
		return errInitNotRecorded
	}
	*d = *cur
	return nil
}
