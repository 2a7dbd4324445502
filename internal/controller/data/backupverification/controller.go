// Package backupverification implements the BackupVerification controller: on a
// schedule (or on demand) it restores the newest backup of a source into a
// throwaway database on a DatabaseServer, as a throwaway role, checks it, drops it,
// and keeps the evidence in status, Events and metrics.
//
// A run happens inside one reconcile. Its throwaway database is recorded in
// status.currentRun before it is created and removed from there only after it is
// dropped, so a manager killed mid-run drops it after its restart, and a deleted
// BackupVerification's finalizer drops it too. Its name (and the marker comment
// the engine puts on it) derive from the object's UID and the run number.
package backupverification

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/kit"
)

// Name is the controller's name, as given to --controllers.
const Name = "backupverification"

// finalizer holds a BackupVerification until its run's throwaway database is dropped.
const finalizer = "data.orderly.dev/backupverification"

// dropTimeout bounds dropping a throwaway database, which may first end the
// restore's sessions.
const dropTimeout = 2 * time.Minute

// Reconciler reconciles BackupVerifications.
type Reconciler struct {
	client.Client
	// APIReader reads Secrets, DatabaseServers and namespaces (not cached by this
	// controller) and the latest BackupVerification.
	APIReader client.Reader
	Recorder  kit.Recorder
	Clock     clock.PassiveClock
	// Namespace is the manager's namespace, where DatabaseServers' admin
	// credentials are; BackupVerifications there are not acted on.
	Namespace string
	// Databases connects to the target DatabaseServers.
	Databases database.Connector
	// sourceFor builds the Source of a BackupVerification; tests may replace it.
	sourceFor func(ctx context.Context, bv *datav1alpha1.BackupVerification) (Source, error)
}

// +kubebuilder:rbac:groups=data.orderly.dev,resources=backupverifications,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=backupverifications/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=data.orderly.dev,resources=backupverifications/finalizers,verbs=update
// +kubebuilder:rbac:groups=data.orderly.dev,resources=databaseservers,verbs=get
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Controller is the BackupVerification controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Workers: Workers, Cache: Cache, Setup: Setup}

// Workers is how many BackupVerifications are reconciled at once by default, and so
// how many restores run at once: a run happens inside its reconcile, which holds
// the worker for the whole restore (up to maxRestoreDuration), so that a manager
// shutting down waits for the run and drops its database. With 2, two slow
// restores held every other BackupVerification (its runs, refusals and deletion)
// until one of them ended; with 4, two slow restores leave two workers for the
// rest (TestSlowRestoresDoNotBlockOthers). A restore costs the manager a goroutine
// and 64 KiB buffers (the work is pg_restore's and the server's), so the bound is
// there for the database servers: more restores at once than that mostly slow each
// other down on a small server. --max-concurrent-reconciles changes it (for every
// controller); docs/backupverification.md says what it means for restores.
const Workers = 4

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	databases, err := database.ConnectorOf(deps)
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-backupverification"),
		Clock: deps.ClockOrReal(), Namespace: deps.Namespace, Databases: databases}
	return r.SetupWithManager(mgr, deps.Options)
}

// Cache keeps BackupVerifications without their managed fields; the Secrets,
// DatabaseServers and namespaces a run reads are read from the API server, once per run.
func Cache() kit.CacheRules {
	return kit.CacheRules{
		&datav1alpha1.BackupVerification{}: {Transform: cache.TransformStripManagedFields()},
	}
}

// SetupWithManager registers the controller: spec changes (verifyNow included) and
// deletion trigger a reconcile; time-driven runs come from RequeueAfter.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	if r.sourceFor == nil {
		r.sourceFor = r.s3SourceFor
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&datav1alpha1.BackupVerification{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Complete(r)
}

// Reconcile cleans up after an interrupted run, runs a verification when one is
// due, and otherwise waits for the next.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var bv datav1alpha1.BackupVerification
	if err := r.Get(ctx, req.NamespacedName, &bv); err != nil {
		if apierrors.IsNotFound(err) {
			series.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	// status.currentRun decides what to drop: read the latest, never the cache's.
	if err := r.APIReader.Get(ctx, req.NamespacedName, &bv); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !bv.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &bv)
	}
	if err := database.CheckNamespace(bv.Namespace, r.Namespace); err != nil {
		return ctrl.Result{}, r.refuse(ctx, &bv, "NamespaceNotAllowed", err.Error())
	}
	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, &bv, finalizer); err != nil {
		if errors.Is(err, kit.ErrDeleting) {
			// The deletion event brings the finalize reconcile.
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, err
	}
	if bv.Status.CurrentRun != nil {
		if err := r.cleanUp(ctx, &bv); err != nil {
			return ctrl.Result{}, err
		}
	}
	now := r.Clock.Now()
	trigger, next, err := due(&bv, now)
	if err != nil {
		return ctrl.Result{}, r.refuse(ctx, &bv, ReasonInvalidSpec, fmt.Sprintf("spec.schedule: %v", err))
	}
	if trigger == "" {
		err := kit.PatchStatus(ctx, r.Client, r.APIReader, &bv, func(latest *datav1alpha1.BackupVerification) {
			latest.Status.NextRunTime = timePtr(next)
			setConditions(&latest.Status, latest.Generation)
		})
		record(&bv)
		if next.IsZero() {
			return ctrl.Result{}, err
		}
		return ctrl.Result{RequeueAfter: next.Sub(now)}, err
	}
	run, dropErr := r.verify(ctx, &bv, trigger, now)
	token := bv.Spec.VerifyNow
	end := r.Clock.Now()
	run.CompletionTime = timePtr(end)
	err = kit.PatchStatus(ctx, r.Client, r.APIReader, &bv, func(latest *datav1alpha1.BackupVerification) {
		cur := latest.Status.CurrentRun
		finishRun(&latest.Status, latest.Generation, run, end)
		latest.Status.Runs = max(latest.Status.Runs, run.Number)
		if trigger == TriggerVerifyNow || trigger == TriggerInitial {
			latest.Status.LastVerifyNow = token
		}
		if dropErr != nil {
			// The database is still there: keep its record, so that it is dropped later.
			latest.Status.CurrentRun = cur
		}
		next, _ := nextScheduled(latest.Spec.Schedule, run.StartTime.Time)
		latest.Status.NextRunTime = timePtr(next)
	})
	if err != nil {
		return ctrl.Result{}, err
	}
	countRun(&bv, &run)
	record(&bv)
	r.event(&bv, &run)
	if dropErr != nil {
		return ctrl.Result{}, dropErr
	}
	// The next reconcile computes when the next run is due.
	return ctrl.Result{RequeueAfter: time.Millisecond}, nil
}

func timePtr(t time.Time) *metav1.Time {
	if t.IsZero() {
		return nil
	}
	mt := metav1.NewTime(t)
	return &mt
}

// refuse reports a spec Orderly will not act on, without running.
func (r *Reconciler) refuse(ctx context.Context, bv *datav1alpha1.BackupVerification, reason, msg string) error {
	return kit.PatchStatus(ctx, r.Client, r.APIReader, bv, func(latest *datav1alpha1.BackupVerification) {
		latest.Status.ObservedGeneration = latest.Generation
		latest.Status.NextRunTime = nil
		kit.ConditionsOf(&latest.Status.Conditions, latest.Generation).False("Ready", reason, msg)
	})
}

func (r *Reconciler) event(bv *datav1alpha1.BackupVerification, run *datav1alpha1.BackupRun) {
	key := ""
	if run.Backup != nil {
		key = run.Backup.Key
	}
	switch run.Result {
	case datav1alpha1.RunPassed:
		r.Recorder.Eventf(bv, nil, corev1.EventTypeNormal, "Verified", "Verify", "Run %d: backup %s passed: %s", run.Number, key, run.Message)
	case datav1alpha1.RunFailed:
		r.Recorder.Eventf(bv, nil, corev1.EventTypeWarning, "VerificationFailed", "Verify", "Run %d: backup %s failed (%s): %s", run.Number, key, run.Reason, run.Message)
	default:
		r.Recorder.Eventf(bv, nil, corev1.EventTypeWarning, "VerificationError", "Verify", "Run %d could not verify a backup (%s): %s", run.Number, run.Reason, run.Message)
	}
}

// finalize drops the database of a run in progress, then lets the object go.
func (r *Reconciler) finalize(ctx context.Context, bv *datav1alpha1.BackupVerification) error {
	if !controllerutil.ContainsFinalizer(bv, finalizer) {
		return nil
	}
	if bv.Status.CurrentRun != nil {
		if err := r.cleanUp(ctx, bv); err != nil {
			return err
		}
	}
	var server datav1alpha1.DatabaseServer
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: bv.Spec.Target.ServerRef}, &server)
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return err
	case server.Spec.Engine == "" || server.Spec.Engine == datav1alpha1.EnginePostgres:
		if err := r.dropLeftovers(ctx, bv, &server); err != nil {
			r.Recorder.Eventf(bv, nil, corev1.EventTypeWarning, "CleanUpFailed", "Delete", "Dropping leftover throwaway databases: %v; retried", err)
			return err
		}
	}
	series.Forget(client.ObjectKeyFromObject(bv))
	return kit.RemoveFinalizer(ctx, r.Client, r.APIReader, bv, finalizer)
}

// cleanUp drops the throwaway database status.currentRun names (a run a crash
// interrupted, or whose drop failed) and clears the record. A run interrupted
// before it finished is recorded as such.
func (r *Reconciler) cleanUp(ctx context.Context, bv *datav1alpha1.BackupVerification) error {
	cur := *bv.Status.CurrentRun
	var server datav1alpha1.DatabaseServer
	err := r.APIReader.Get(ctx, client.ObjectKey{Name: cur.ServerRef}, &server)
	switch {
	case apierrors.IsNotFound(err):
		// The server is gone, and its databases with it as far as Orderly can tell.
		r.Recorder.Eventf(bv, nil, corev1.EventTypeWarning, ReasonTargetNotFound, "CleanUp",
			"DatabaseServer %s no longer exists; the throwaway database %s of run %d was not dropped", cur.ServerRef, cur.Database, cur.Number)
	case err != nil:
		return err
	default:
		if err := r.dropDatabase(ctx, bv, &server, cur.Number); err != nil {
			r.Recorder.Eventf(bv, nil, corev1.EventTypeWarning, "CleanUpFailed", "CleanUp",
				"Dropping the throwaway database %s of run %d: %v; retried", cur.Database, cur.Number, err)
			return err
		}
		r.Recorder.Eventf(bv, nil, corev1.EventTypeNormal, "CleanedUp", "CleanUp",
			"Dropped the throwaway database %s of run %d", cur.Database, cur.Number)
	}
	now := r.Clock.Now()
	return kit.PatchStatus(ctx, r.Client, r.APIReader, bv, func(latest *datav1alpha1.BackupVerification) {
		c := latest.Status.CurrentRun
		if c == nil || c.Number != cur.Number {
			return
		}
		if latest.Status.LastRun == nil || latest.Status.LastRun.Number != c.Number {
			run := datav1alpha1.BackupRun{Number: c.Number, Trigger: c.Trigger, StartTime: c.StartTime, CompletionTime: timePtr(now)}
			verdict(&run, datav1alpha1.RunError, ReasonInterrupted, "the run was interrupted (the manager stopped); its throwaway database was dropped, and the next run starts over")
			finishRun(&latest.Status, latest.Generation, run, now)
		}
		latest.Status.Runs = max(latest.Status.Runs, c.Number)
		latest.Status.CurrentRun = nil
	})
}

// throwaway is the engine's view of run n's database and role: named from the
// object's UID and the run number, so that its name alone says whose it is.
func throwaway(bv *datav1alpha1.BackupVerification, n int64) database.Database {
	owner := fmt.Sprintf("%s-bv%d", bv.UID, n)
	db, role := database.Names(owner)
	return database.Database{Name: db, Role: role, OwnerUID: owner}
}

// dropDatabase drops run n's database and role, with its own deadline even when
// ctx is ending (a manager shutting down still drops what it made).
func (r *Reconciler) dropDatabase(ctx context.Context, bv *datav1alpha1.BackupVerification, server *datav1alpha1.DatabaseServer, n int64) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	e, srv, err := r.connect(ctx, server)
	if err != nil {
		return err
	}
	_, err = e.Drop(ctx, throwaway(bv, n), false)
	return database.Scrub(err, server, srv)
}

// dropLeftovers drops every throwaway database and role of bv's runs still on
// server, whatever run they belonged to (status.currentRun names only the last).
// The engine's Drop checks each one's marker: one that is not Orderly's is left
// alone. Called when nothing of bv's runs should exist: before a run, and on deletion.
func (r *Reconciler) dropLeftovers(ctx context.Context, bv *datav1alpha1.BackupVerification, server *datav1alpha1.DatabaseServer) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), dropTimeout)
	defer cancel()
	e, srv, err := r.connect(ctx, server)
	if err != nil {
		return err
	}
	runs, err := leftoverRuns(ctx, e, bv)
	if err != nil {
		return database.Scrub(err, server, srv)
	}
	for _, n := range runs {
		db := throwaway(bv, n)
		if _, err := e.Drop(ctx, db, false); err != nil {
			if errors.Is(err, database.ErrNotOwned) {
				log.FromContext(ctx).Info("Left a database with a BackupVerification run's name alone: it is not Orderly's", "database", db.Name)
				continue
			}
			return fmt.Errorf("dropping the leftover throwaway database %s: %w", db.Name, database.Scrub(err, server, srv))
		}
		r.Recorder.Eventf(bv, nil, corev1.EventTypeNormal, "CleanedUp", "CleanUp", "Dropped the leftover throwaway database %s of run %d", db.Name, n)
	}
	return nil
}

// connect reads the server's admin credentials (from the manager's namespace) and connects.
func (r *Reconciler) connect(ctx context.Context, s *datav1alpha1.DatabaseServer) (database.Engine, database.Server, error) {
	if r.Databases == nil {
		return nil, database.Server{}, errors.New("no database connector")
	}
	srv, err := database.ServerFor(ctx, r.APIReader, s, r.Namespace)
	if err != nil {
		return nil, srv, database.Scrub(err, s, srv)
	}
	e, err := r.Databases.Connect(ctx, string(s.Spec.Engine), srv)
	return e, srv, database.Scrub(err, s, srv)
}

// admitTarget reads the target DatabaseServer and checks that it allows this namespace.
func (r *Reconciler) admitTarget(ctx context.Context, bv *datav1alpha1.BackupVerification) (*datav1alpha1.DatabaseServer, string, string) {
	var s datav1alpha1.DatabaseServer
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: bv.Spec.Target.ServerRef}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, ReasonTargetNotFound, fmt.Sprintf("DatabaseServer %s does not exist", bv.Spec.Target.ServerRef)
		}
		return nil, ReasonTargetError, err.Error()
	}
	if string(s.Spec.Engine) != "" && s.Spec.Engine != datav1alpha1.EnginePostgres {
		return nil, ReasonTargetNotAllowed, fmt.Sprintf("DatabaseServer %s is %s: backups are verified on PostgreSQL servers only", s.Name, s.Spec.Engine)
	}
	if err := database.AdmitNamespace(ctx, r.APIReader, &s, bv.Namespace, r.Namespace); err != nil {
		if errors.Is(err, database.ErrNamespaceNotAllowed) {
			return nil, ReasonTargetNotAllowed, err.Error()
		}
		return nil, ReasonTargetError, err.Error()
	}
	return &s, "", ""
}

// s3SourceFor builds the S3 source from the object's own namespace's Secrets.
func (r *Reconciler) s3SourceFor(ctx context.Context, bv *datav1alpha1.BackupVerification) (Source, error) {
	src := bv.Spec.Source.S3
	if src == nil {
		return nil, &sourceError{ReasonInvalidSpec, "spec.source has no kind Orderly knows"}
	}
	cred, err := readS3Credentials(ctx, r.APIReader, bv.Namespace, src)
	if err != nil {
		return nil, err
	}
	return newS3Source(src, cred)
}

// verify is one run. It returns the run's evidence, and an error only when the
// throwaway database could not be dropped (status keeps its record then).
func (r *Reconciler) verify(ctx context.Context, bv *datav1alpha1.BackupVerification, trigger string, now time.Time) (datav1alpha1.BackupRun, error) {
	logger := log.FromContext(ctx)
	n := bv.Status.Runs + 1
	run := datav1alpha1.BackupRun{Number: n, Trigger: trigger, StartTime: timePtr(now)}
	server, reason, msg := r.admitTarget(ctx, bv)
	if server == nil {
		verdict(&run, datav1alpha1.RunError, reason, msg)
		return run, nil
	}
	src, err := r.sourceFor(ctx, bv)
	if err != nil {
		errorVerdict(&run, err)
		return run, nil
	}
	b, err := src.Latest(ctx)
	if err != nil {
		errorVerdict(&run, err)
		return run, nil
	}
	age := max(now.Sub(b.LastModified), 0)
	run.Backup = &datav1alpha1.BackupObject{Key: b.Key, ETag: b.ETag, SizeBytes: b.Size, LastModified: timePtr(b.LastModified),
		Age: &metav1.Duration{Duration: age.Round(time.Second)}}
	if ma := bv.Spec.MaxAge; ma != nil && ma.Duration > 0 && age > ma.Duration {
		verdict(&run, datav1alpha1.RunFailed, ReasonBackupTooOld, fmt.Sprintf("the newest backup %s is %s old, older than maxAge %s; not restored. Is the backup job running?", b.Key, age.Round(time.Second), ma.Duration))
		return run, nil
	}
	if lp := bv.Status.LastPassedBackup; bv.Spec.Selection == datav1alpha1.SelectionLatestPassed && lp != nil && lp.Key == b.Key && lp.ETag == b.ETag && b.ETag != "" {
		run.Backup = lp.DeepCopy()
		run.Backup.Age = &metav1.Duration{Duration: age.Round(time.Second)}
		verdict(&run, datav1alpha1.RunPassed, ReasonAlreadyVerified, fmt.Sprintf("the newest backup %s already passed; not restored again (selection latestPassed)", b.Key))
		return run, nil
	}
	want, err := src.Checksum(ctx, b)
	if err != nil {
		errorVerdict(&run, err)
		return run, nil
	}
	if err := r.dropLeftovers(ctx, bv, server); err != nil {
		verdict(&run, datav1alpha1.RunError, ReasonTargetError, fmt.Sprintf("DatabaseServer %s: %v", server.Name, err))
		return run, nil
	}
	// Record the throwaway database before creating it: a crash from here on leaves
	// a record that the next reconcile (or the finalizer) drops.
	db := throwaway(bv, n)
	err = kit.PatchStatus(ctx, r.Client, r.APIReader, bv, func(latest *datav1alpha1.BackupVerification) {
		latest.Status.Runs = max(latest.Status.Runs, n)
		latest.Status.CurrentRun = &datav1alpha1.BackupRunInProgress{Number: n, Trigger: trigger, ServerRef: server.Name, Database: db.Name, StartTime: run.StartTime}
		setConditions(&latest.Status, latest.Generation)
		kit.ConditionsOf(&latest.Status.Conditions, latest.Generation).Unknown(datav1alpha1.ConditionVerified, ReasonRunning, fmt.Sprintf("run %d is restoring %s", n, b.Key))
	})
	if err != nil {
		verdict(&run, datav1alpha1.RunError, ReasonTargetError, fmt.Sprintf("recording the run: %v", err))
		return run, nil
	}
	r.restoreAndCheck(ctx, bv, server, src, b, want, db, &run)
	if err := r.dropDatabase(ctx, bv, server, n); err != nil {
		logger.Error(err, "Dropping the throwaway database of a BackupVerification run", "database", db.Name)
		return run, fmt.Errorf("dropping the throwaway database %s: %w", db.Name, err)
	}
	return run, nil
}

// restoreAndCheck creates the throwaway database, restores b into it and runs the
// checks, setting run's evidence and verdict.
func (r *Reconciler) restoreAndCheck(ctx context.Context, bv *datav1alpha1.BackupVerification, server *datav1alpha1.DatabaseServer, src Source, b Backup, want string, db database.Database, run *datav1alpha1.BackupRun) {
	limit := bv.Spec.MaxRestoreDuration.Duration
	if limit <= 0 {
		limit = 30 * time.Minute
	}
	e, srv, err := r.connect(ctx, server)
	if err != nil {
		verdict(run, datav1alpha1.RunError, ReasonTargetError, fmt.Sprintf("connecting to DatabaseServer %s: %v", server.Name, err))
		return
	}
	db.Password, db.SetPassword = database.Password(), true
	// The role cannot log in after the run could have ended, even if Orderly never drops it.
	db.ValidUntil = r.Clock.Now().Add(limit + checksTimeout + 10*time.Minute)
	if _, err := e.Ensure(ctx, db); err != nil {
		verdict(run, datav1alpha1.RunError, ReasonTargetError, fmt.Sprintf("creating the throwaway database on DatabaseServer %s: %v", server.Name, database.Scrub(err, server, srv)))
		return
	}
	t := target{server: srv, database: db.Name, role: db.Role, password: db.Password}
	t.server.Username, t.server.Password = "", ""
	// The object is read within the restore's deadline, the rest of it too (for the
	// checksum) when the tool stops early.
	rctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	body, err := src.Open(rctx, b)
	if err != nil {
		errorVerdict(run, err)
		return
	}
	res, rerr := restore(rctx, body, t, limit)
	_ = body.Close()
	run.Backup.Format = res.format
	if res.complete {
		run.Backup.SHA256 = res.sha256
	}
	run.RestoreDuration = &metav1.Duration{Duration: res.duration.Round(time.Millisecond)}
	var slow *restoreError
	if errors.As(rerr, &slow) && slow.reason == ReasonRestoreTooSlow {
		verdict(run, datav1alpha1.RunFailed, slow.reason, slow.msg)
		return
	}
	if !res.complete && rerr == nil {
		verdict(run, datav1alpha1.RunError, ReasonSourceUnreachable, fmt.Sprintf("%s could not be read to its end from the store; retried", b.Key))
		return
	}
	// A mismatch explains a failed restore better than the tool's message does.
	if want != "" && res.complete {
		if want != res.sha256 {
			verdict(run, datav1alpha1.RunFailed, ReasonChecksumMismatch, fmt.Sprintf("the SHA-256 of %s is %s, but %s%s says %s: the backup is damaged or incomplete", b.Key, res.sha256, b.Key, checksumSuffix, want))
			return
		}
		run.Backup.ChecksumVerified = true
	}
	if rerr != nil {
		var re *restoreError
		if errors.As(rerr, &re) {
			verdict(run, datav1alpha1.RunFailed, re.reason, re.msg)
		} else {
			verdict(run, datav1alpha1.RunError, ReasonRestoreFailed, rerr.Error())
		}
		return
	}
	results, err := runChecks(ctx, t, bv.Spec.Checks)
	run.Checks = results
	if err != nil {
		verdict(run, datav1alpha1.RunError, ReasonCheckFailed, err.Error())
		return
	}
	var failed []string
	for _, c := range results {
		if !c.Passed {
			failed = append(failed, fmt.Sprintf("%s (%s)", c.Name, c.Message))
		}
	}
	if len(failed) > 0 {
		verdict(run, datav1alpha1.RunFailed, ReasonCheckFailed, fmt.Sprintf("%d of %d checks failed: %s", len(failed), len(results), kit.FirstN(failed, 3)))
		return
	}
	verdict(run, datav1alpha1.RunPassed, ReasonPassed, fmt.Sprintf("restored %s (%s, %d bytes) in %s; %d checks passed", b.Key, res.format, res.bytes, res.duration.Round(time.Millisecond), len(results)))
}

// errorVerdict makes err the run's verdict: a source problem's reason, or Error.
func errorVerdict(run *datav1alpha1.BackupRun, err error) {
	var se *sourceError
	if errors.As(err, &se) {
		verdict(run, datav1alpha1.RunError, se.reason, se.msg)
		return
	}
	verdict(run, datav1alpha1.RunError, ReasonSourceUnreachable, err.Error())
}
