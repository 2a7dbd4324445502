package sleepschedule

import (
	"context"
	"fmt"
	"slices"
	"time"

	autoscalingv2 "k8s.io/api/autoscaling/v2"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Condition reasons.
const (
	ReasonAsleep            = "Asleep"
	ReasonAwake             = "Awake"
	ReasonSuspended         = "Suspended"
	ReasonDryRun            = "DryRun"
	ReasonInvalidSpec       = "InvalidSpec"
	ReasonListFailed        = "ListFailed"
	ReasonWriteFailed       = "WriteFailed"
	ReasonNamespaceConflict = "NamespaceConflict"
	ReasonNoConflict        = "NoConflict"
	ReasonAllReady          = "AllReady"
	ReasonNotReady          = "WorkloadsNotReady"
	ReasonLeftAlone         = "LeftAlone"
	// Reasons of the GitOpsManaged condition and Event.
	ReasonGitOpsManaged   = "GitOpsManaged"
	ReasonNoGitOpsManaged = "NoGitOpsManaged"
	// ReasonInvalidRecord is the Warning Event of workloads released without being
	// restored, because their sleep record cannot be restored.
	ReasonInvalidRecord = "InvalidRecord"
	// Reasons of the WorkloadsSkipped condition and its Event: a workload controlled by
	// another operator, a ScaledObject its user paused whose target Orderly cannot
	// scale back (and ReasonGitOpsManaged: a workload a GitOps tool manages, under
	// gitOpsManaged: Skip).
	ReasonOwnedByOperator = "OwnedByOperator"
	ReasonCannotRestore   = "CannotRestore"
	ReasonNoneSkipped     = "NoneSkipped"
)

// ConditionWorkloadsSkipped is True when some workloads the schedule would sleep are
// left awake because sleeping them would fight another operator or could not be
// undone (docs/sleepschedule.md, "Workloads of other operators"); its message names
// them and why.
const ConditionWorkloadsSkipped = "WorkloadsSkipped"

const (
	historyLimit = 10
	namesLimit   = 20
)

// observation is what one reconcile saw and did.
type observation struct {
	now time.Time
	// invalid is why the spec cannot be used; nothing else was observed.
	invalid error
	// listFailed is why the world could not be observed; nothing was changed.
	listFailed error
	deleting   bool

	state   powerv1alpha1.SleepState
	next    time.Time
	hasNext bool
	// weekStart is the start of the current week in the schedule's time zone, for
	// status.savings; zero leaves the savings as they are.
	weekStart time.Time

	namespaces    []string
	conflicts     []namespaceConflict
	excluded      []powerv1alpha1.ExcludedNamespace
	workloads     []*workload
	pinnedHPAs    []*autoscalingv2.HorizontalPodAutoscaler
	sleepReplicas int32

	// hasKinds: the schedule names targets.kinds. kindProblems are why some of them
	// were skipped; kedaTargets are the workloads KEDA ScaledObjects of those kinds
	// scale, which are left to KEDA.
	hasKinds     bool
	kindProblems []kindProblem
	kedaTargets  map[hpaKey]bool

	slept, woken, released, leftAlone int
	failures, conflicted              int
	firstErr                          error
	failedNames                       []string
	// badRecords names what was released without being restored, and why.
	badRecords []string
}

func (o *observation) recordWrite(w *workload, err error) {
	w.err = err
	switch {
	case err != nil && isConflict(err):
		o.conflicted++
	case err != nil:
		o.failures++
		if o.firstErr == nil {
			o.firstErr = fmt.Errorf("%s: %w", w.id(), err)
		}
		o.failedNames = append(o.failedNames, w.id())
		if p := writeProblem(w); p != nil {
			o.kindProblems = append(o.kindProblems, *p)
		}
	case w.act == actSleep || w.act == actFinishSleep:
		o.slept++
	case w.act == actWake:
		o.woken++
	case w.act == actRelease:
		o.released++
		if w.badRecord != nil {
			o.badRecords = append(o.badRecords, fmt.Sprintf("%s (%v)", w.id(), w.badRecord))
		}
	case w.act == actLeftAlone:
		o.leftAlone++
	}
}

func (o *observation) recordHPAWrite(h *hpaWrite, err error) {
	switch {
	case err == nil:
		if h.bad != nil {
			o.badRecords = append(o.badRecords, fmt.Sprintf("%s (%v)", h.id(), h.bad))
		}
	case isConflict(err):
		o.conflicted++
	default:
		o.failures++
		if o.firstErr == nil {
			o.firstErr = fmt.Errorf("%s: %w", h.id(), err)
		}
		o.failedNames = append(o.failedNames, h.id())
	}
}

// computeStatus derives the status from what this reconcile observed and did. Pure:
// conditions keep their transition times when their status does not change.
func computeStatus(s *powerv1alpha1.SleepSchedule, obs *observation) powerv1alpha1.SleepScheduleStatus {
	st := *s.Status.DeepCopy()
	st.ObservedGeneration = s.Generation
	cond := kit.ConditionsOf(&st.Conditions, s.Generation).At(obs.now)
	if obs.invalid != nil {
		cond.False(powerv1alpha1.ConditionReady, ReasonInvalidSpec, "The spec cannot be used, nothing was changed: "+obs.invalid.Error())
		return st
	}
	if obs.listFailed != nil {
		// The rest of the status stays as the last reconcile that could observe left
		// it: in particular state, whose change is what records a transition once
		// the workloads have been changed.
		cond.False(powerv1alpha1.ConditionReady, ReasonListFailed,
			"Could not read the namespaces and workloads, so nothing was changed and the rest of the status is from the last reconcile that could; retrying: "+obs.listFailed.Error())
		return st
	}
	st.State = obs.state
	st.NextTransition = nil
	if obs.hasNext {
		st.NextTransition = &metav1.Time{Time: obs.next.UTC().Truncate(time.Second)}
	}
	st.Namespaces = int32(len(obs.namespaces))
	st.ExcludedNamespaces = nil
	if len(obs.excluded) > 0 {
		st.ExcludedNamespaces = obs.excluded[:min(len(obs.excluded), namesLimit)]
	}

	t := countWorkloads(s.Name, obs)
	setWorkloadStatus(&st, s, obs, &t)
	recordTransition(&st, s, obs, &t)
	setConditions(cond, s, obs, &t)
	setReady(cond, s, obs, &t)
	return st
}

// workloadTally is what computeStatus counts over the observed workloads.
type workloadTally struct {
	// workloads are the targeted workloads, sleeping those asleep under this schedule
	// now, ready the awake ones with every replica ready, wouldSleep the targeted ones
	// the schedule wants asleep.
	workloads, sleeping, ready, wouldSleep int32
	// sleptBefore are asleep under this schedule without a write of this reconcile;
	// heldBefore carry this schedule's sleep record (asleep or left alone) as observed.
	sleptBefore, heldBefore int32
	notReady, leftAlone     []string
	gitOps                  []powerv1alpha1.GitOpsWorkload
	saved                   requestSum
}

// countWorkloads decides, for each observed workload, what the status counts it as:
// targeted, asleep (and what that saves), left alone, ready or not.
func countWorkloads(schedule string, obs *observation) workloadTally {
	var t workloadTally
	for _, w := range obs.workloads {
		if w.targeted && w.gitOps != "" {
			t.gitOps = append(t.gitOps, powerv1alpha1.GitOpsWorkload{Tool: w.gitOps, Workload: w.id()})
		}
		if w.asleepBy == schedule {
			t.heldBefore++
		}
		if w.targeted {
			t.workloads++
			if w.want {
				t.wouldSleep++
			}
		}
		switch {
		case w.asleepNow(schedule):
			t.sleeping++
			if w.act == actNone {
				t.sleptBefore++
			}
			t.saved.add(w.podRequests, w.savedPods(obs.sleepReplicas))
		case w.asleepBy == schedule && (w.act == actLeftAlone || w.act == actNone && (w.leftAlone || w.changedByOwner())):
			t.leftAlone = append(t.leftAlone, w.id())
		case w.extra != nil:
			// Whether an object of another kind is ready is its own controller's to say.
		case w.targeted && w.kind != powerv1alpha1.KindCronJob && w.act == actWake:
			// Just woken: its pods are only starting.
			t.notReady = append(t.notReady, w.id())
		case w.targeted && w.kind != powerv1alpha1.KindCronJob && w.asleepBy == "":
			if w.ready {
				t.ready++
			} else {
				t.notReady = append(t.notReady, w.id())
			}
		}
	}
	return t
}

// setWorkloadStatus decides the status's counts, lists and savings of workloads.
func setWorkloadStatus(st *powerv1alpha1.SleepScheduleStatus, s *powerv1alpha1.SleepSchedule, obs *observation, t *workloadTally) {
	st.Workloads, st.SleepingWorkloads = t.workloads, t.sleeping
	st.GitOpsManaged, st.GitOpsManagedCount = nil, int32(len(t.gitOps))
	if len(t.gitOps) > 0 {
		st.GitOpsManaged = t.gitOps[:min(len(t.gitOps), namesLimit)]
	}
	st.LeftAlone, st.LeftAloneCount = kit.Bounded(t.leftAlone, namesLimit), int32(len(t.leftAlone))
	st.WouldSleep = 0
	if s.Spec.DryRun {
		st.WouldSleep = t.wouldSleep
	}
	st.SavedRequests = t.saved.list()
	st.SavedByNamespace = nil
	if byNS := savingsByNamespace(s.Name, obs); len(byNS) > 0 {
		st.SavedByNamespace = byNS[:min(len(byNS), namespaceSavingsLimit)]
	}
	if !obs.weekStart.IsZero() && !s.Spec.DryRun {
		st.Savings = countSavings(&s.Status, obs.now, obs.weekStart, obs.state != s.Status.State)
	}
	st.ReadyWorkloads, st.NotReady = 0, nil
	if obs.state == powerv1alpha1.StateAwake {
		st.ReadyWorkloads, st.NotReady = t.ready, kit.Bounded(t.notReady, namesLimit)
	}
}

// recordTransition decides whether this reconcile records a transition in the
// history, or adds what it changed to the one it continues.
//
// A transition is recorded when the state changes, and on the first reconcile that
// changes anything. Later reconciles of the same period (retries after a conflict,
// workloads created while asleep) add what they changed to it.
func recordTransition(st *powerv1alpha1.SleepScheduleStatus, s *powerv1alpha1.SleepSchedule, obs *observation, t *workloadTally) {
	changed := int32(obs.slept + obs.woken + obs.released)
	action := powerv1alpha1.ActionWake
	if obs.state == powerv1alpha1.StateAsleep {
		action = powerv1alpha1.ActionSleep
	}
	// A transition that starts a period counts, besides this reconcile's writes, what
	// an earlier reconcile of the period did without recording it: a leader killed
	// half-way, or a status write that failed after the workloads were written.
	// Otherwise the new leader's history counts only its own part, and nothing at
	// all when the old leader had done every write.
	//   - A sleep: the workloads already asleep under this schedule (their records
	//     say so; a wake period leaves none asleep).
	//   - A wake leaves no trace on what it woke: what the schedule held at its last
	//     status write (asleep, or left alone) and no longer holds.
	carried := int32(0)
	switch {
	case s.Spec.DryRun:
	case action == powerv1alpha1.ActionSleep:
		carried = t.sleptBefore
	case s.Status.State == powerv1alpha1.StateAsleep:
		carried = max(0, s.Status.SleepingWorkloads+s.Status.LeftAloneCount-t.heldBefore)
	}
	switch {
	case s.Spec.Suspend:
	case s.Status.State != "" && s.Status.State != obs.state || s.Status.State == "" && changed+carried > 0:
		tr := powerv1alpha1.Transition{Time: metav1.Time{Time: obs.now.UTC().Truncate(time.Second)}, Action: action,
			Workloads: changed + carried, Failures: int32(obs.failures), DryRun: s.Spec.DryRun}
		if s.Spec.DryRun {
			tr.Workloads = t.wouldSleep
		}
		st.History = append([]powerv1alpha1.Transition{tr}, st.History...)
		if len(st.History) > historyLimit {
			st.History = st.History[:historyLimit]
		}
	case len(st.History) > 0 && st.History[0].Action == action && !st.History[0].DryRun && !s.Spec.DryRun:
		st.History[0].Workloads += changed
		st.History[0].Failures = int32(obs.failures)
	}
}

// setConditions decides the conditions beside Ready: NamespaceConflict,
// WorkloadsReady, GitOpsManaged, KindsAvailable and WorkloadsSkipped.
func setConditions(cond kit.Conditions, s *powerv1alpha1.SleepSchedule, obs *observation, t *workloadTally) {
	if len(obs.conflicts) > 0 {
		parts := make([]string, 0, len(obs.conflicts))
		for _, c := range obs.conflicts {
			parts = append(parts, fmt.Sprintf("%s (owned by %s)", c.namespace, c.owner))
		}
		cond.True(powerv1alpha1.ConditionNamespaceConflict, ReasonNamespaceConflict,
			fmt.Sprintf("%d selected namespace(s) are left to an older SleepSchedule: %s. Narrow one of the selections.", len(parts), kit.FirstN(parts, namesLimit)))
	} else {
		cond.False(powerv1alpha1.ConditionNamespaceConflict, ReasonNoConflict, "No selected namespace is selected by an older SleepSchedule")
	}
	switch {
	case obs.state == powerv1alpha1.StateAsleep:
		cond.True(powerv1alpha1.ConditionWorkloadsReady, ReasonAsleep, "Asleep: no workload is expected to run")
	case len(t.notReady) > 0:
		cond.False(powerv1alpha1.ConditionWorkloadsReady, ReasonNotReady,
			fmt.Sprintf("%d of %d awake workloads have all replicas ready; not ready: %s", t.ready, int(t.ready)+len(t.notReady), kit.FirstN(t.notReady, namesLimit)))
	default:
		cond.True(powerv1alpha1.ConditionWorkloadsReady, ReasonAllReady, fmt.Sprintf("All %d awake workloads have all replicas ready", t.ready))
	}

	if len(t.gitOps) > 0 {
		var argo, flux int
		for _, g := range t.gitOps {
			if g.Tool == powerv1alpha1.GitOpsArgoCD {
				argo++
			} else {
				flux++
			}
		}
		cond.True(powerv1alpha1.ConditionGitOpsManaged, ReasonGitOpsManaged,
			fmt.Sprintf("%d targeted workload(s) are managed by a GitOps tool (Argo CD: %d, Flux: %d; see status.gitOpsManaged), which scales them back up while asleep unless told to ignore their replicas (docs/sleepschedule.md, GitOps)", len(t.gitOps), argo, flux))
	} else {
		cond.False(powerv1alpha1.ConditionGitOpsManaged, ReasonNoGitOpsManaged, "No targeted workload carries the tracking label or annotation of Argo CD or Flux")
	}
	switch {
	case !obs.hasKinds:
		cond.Remove(powerv1alpha1.ConditionKindsAvailable)
	case len(obs.kindProblems) > 0:
		p := obs.kindProblems[0]
		cond.False(powerv1alpha1.ConditionKindsAvailable, p.reason, kit.Truncate(kindsMessage(obs.kindProblems), 1024))
	default:
		cond.True(powerv1alpha1.ConditionKindsAvailable, ReasonKindsAvailable, fmt.Sprintf("All %d kind(s) of targets.kinds are served and may be read and written", len(s.Spec.Targets.Kinds)))
	}

	if reason, msg := skippedSummary(obs); reason != "" {
		cond.True(ConditionWorkloadsSkipped, reason, msg)
	} else {
		cond.False(ConditionWorkloadsSkipped, ReasonNoneSkipped, "No workload the schedule selects is left awake because another operator or a GitOps tool controls it")
	}
	switch _, msg := stillRunningSummary(obs); {
	case !obs.hasKinds:
		cond.Remove(ConditionWorkloadsStillRunning)
	case msg != "":
		cond.True(ConditionWorkloadsStillRunning, ReasonReplicasKept, msg)
	default:
		cond.False(ConditionWorkloadsStillRunning, ReasonNoneRunning, "No object of targets.kinds held asleep runs more replicas than it was scaled to, by its own status")
	}
}

// setReady decides the Ready condition: suspended, a kind of targets.kinds that
// cannot sleep, a dry run, failed writes, namespace conflicts, or the state reached.
func setReady(cond kit.Conditions, s *powerv1alpha1.SleepSchedule, obs *observation, t *workloadTally) {
	until := "no transition is scheduled"
	if obs.hasNext {
		until = "until " + obs.next.UTC().Format(time.RFC3339)
	}
	summary := readySummary(obs, t, until)
	unsleepable, _ := splitKindProblems(obs.kindProblems)
	switch {
	case s.Spec.Suspend:
		cond.True(powerv1alpha1.ConditionReady, ReasonSuspended, "Suspended: workloads are left as they are")
	case len(unsleepable) > 0:
		// A kind the user asked for is served and does not sleep (no scale subresource
		// and no patch, cluster-scoped, not permitted, unreadable): its objects are not
		// in the scheduled state, whatever the rest is.
		p := unsleepable[0]
		cond.False(powerv1alpha1.ConditionReady, p.reason, kit.Truncate(fmt.Sprintf("%s of targets.kinds cannot sleep: %s. %s",
			kit.FirstN(problemKinds(unsleepable), namesLimit), kindsMessage(unsleepable), summary), 2048))
	case s.Spec.DryRun:
		cond.True(powerv1alpha1.ConditionReady, ReasonDryRun,
			fmt.Sprintf("Dry run: the schedule is %s (%s); %d of %d workloads would be asleep; nothing is changed", obs.state, until, t.wouldSleep, t.workloads))
	case obs.failures > 0:
		cond.False(powerv1alpha1.ConditionReady, ReasonWriteFailed,
			fmt.Sprintf("%d workload(s) could not be changed, retrying: %v", obs.failures, obs.firstErr))
	case len(obs.conflicts) > 0:
		cond.False(powerv1alpha1.ConditionReady, ReasonNamespaceConflict,
			fmt.Sprintf("%s for %d namespaces; %d namespace(s) belong to an older SleepSchedule", obs.state, len(obs.namespaces), len(obs.conflicts)))
	default:
		reason := ReasonAwake
		if obs.state == powerv1alpha1.StateAsleep {
			reason = ReasonAsleep
		}
		cond.True(powerv1alpha1.ConditionReady, reason, summary)
	}
}

// readySummary is the Ready message of a schedule in its state: "Asleep until
// <time>: ..." or "Asleep, with no transition scheduled: ...", then how many
// workloads sleep and what was left out.
func readySummary(obs *observation, t *workloadTally, until string) string {
	stateUntil := fmt.Sprintf("%s, with no transition scheduled", obs.state)
	if obs.hasNext {
		stateUntil = fmt.Sprintf("%s %s", obs.state, until)
	}
	summary := fmt.Sprintf("%s: %d of %d workloads asleep in %d namespaces", stateUntil, t.sleeping, t.workloads, len(obs.namespaces))
	if len(obs.excluded) > 0 {
		summary += fmt.Sprintf("; %d selected namespace(s) never sleep (see status.excludedNamespaces)", len(obs.excluded))
	}
	if len(t.leftAlone) > 0 {
		summary += fmt.Sprintf("; %d changed by their owner and left alone", len(t.leftAlone))
	}
	if n := skippedCount(obs); n > 0 {
		summary += fmt.Sprintf("; %d skipped (see the %s condition)", n, ConditionWorkloadsSkipped)
	}
	if n, _ := stillRunningSummary(obs); n > 0 {
		summary += fmt.Sprintf("; %d asleep still run pods (see the %s condition)", n, ConditionWorkloadsStillRunning)
	}
	if _, missing := splitKindProblems(obs.kindProblems); len(missing) > 0 {
		summary += fmt.Sprintf("; not served, so nothing of them to sleep (see %s): %s", powerv1alpha1.ConditionKindsAvailable, kit.FirstN(problemKinds(missing), namesLimit))
	}
	return summary
}

// maxBookkeepingWait bounds how long a reconcile's status write and Events wait for
// the workload writes of other reconciles (writePool.afterWrites).
const maxBookkeepingWait = 30 * time.Second

// updateStatus emits Events for what this reconcile did, writes the status when it
// changed and updates the metrics; after the workload writes that other reconciles
// have pending, so that a transition over many schedules writes every workload first.
func (r *Reconciler) updateStatus(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation) error {
	return r.pool().afterWrites(ctx, maxBookkeepingWait, func() error { return r.writeStatus(ctx, s, obs) })
}

func (r *Reconciler) writeStatus(ctx context.Context, s *powerv1alpha1.SleepSchedule, obs *observation) error {
	r.emitEvents(s, obs)
	generation := s.Generation
	var prev powerv1alpha1.SleepScheduleStatus
	// Optimistic locking: a reconcile that started from a cached copy older than the
	// last status write must not record the same transition twice. On a conflict the
	// writes of this reconcile are done: they are recorded on the latest version
	// rather than lost, unless the spec changed meanwhile (then the reconcile the
	// change brings reports from scratch).
	err := kit.PatchStatus(ctx, r.Client, r.apiReader(), s, func(latest *powerv1alpha1.SleepSchedule) {
		prev = latest.Status
		latest.Status = computeStatus(latest, obs)
	})
	if err != nil {
		return err
	}
	r.written.Record(s)
	if s.Generation == generation {
		// Otherwise the status was not written, and the next reconcile records it.
		recordMetrics(client.ObjectKeyFromObject(s), prev, s.Status, obs)
	}
	return nil
}

// emitEvents reports, one Event per kind of change and reconcile, what was done.
func (r *Reconciler) emitEvents(s *powerv1alpha1.SleepSchedule, obs *observation) {
	readyReason := ""
	if c := meta.FindStatusCondition(s.Status.Conditions, powerv1alpha1.ConditionReady); c != nil {
		readyReason = c.Reason
	}
	// One Event when the problem appears, not one per retry.
	if obs.invalid != nil {
		if readyReason != ReasonInvalidSpec {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonInvalidSpec, "Validate", "%v", obs.invalid)
		}
		return
	}
	if obs.listFailed != nil {
		if readyReason != ReasonListFailed {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonListFailed, "Observe", "Could not read the namespaces and workloads, nothing was changed: %v", obs.listFailed)
		}
		return
	}
	r.emitWriteEvents(s, obs)
	had := meta.IsStatusConditionTrue(s.Status.Conditions, powerv1alpha1.ConditionNamespaceConflict)
	if len(obs.conflicts) > 0 && !had {
		c := obs.conflicts[0]
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonNamespaceConflict, "Select",
			"%d selected namespace(s) are left to an older SleepSchedule, e.g. %s owned by %s", len(obs.conflicts), c.namespace, c.owner)
	}
	if n := gitOpsCount(obs); n > s.Status.GitOpsManagedCount {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonGitOpsManaged, "Observe",
			"%d targeted workload(s) are managed by Argo CD or Flux, which scale a sleeping workload back up unless told to ignore its replicas, e.g. %s (docs/sleepschedule.md, GitOps)", n, firstGitOps(obs))
	}
	if len(obs.kindProblems) > 0 {
		p := obs.kindProblems[0]
		if c := meta.FindStatusCondition(s.Status.Conditions, powerv1alpha1.ConditionKindsAvailable); c == nil || c.Status != metav1.ConditionFalse || c.Reason != p.reason {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, p.reason, "Observe", "%s", kit.Truncate(kindsMessage(obs.kindProblems), 1024))
		}
	}
	if _, msg := stillRunningSummary(obs); msg != "" {
		// Once per change of what still runs, not at every reconcile.
		if c := meta.FindStatusCondition(s.Status.Conditions, ConditionWorkloadsStillRunning); c == nil || c.Status != metav1.ConditionTrue || c.Message != msg {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonReplicasKept, "Sleep", "%s", msg)
		}
	}
	if reason, msg := skippedSummary(obs); reason != "" {
		// Once per change of what is skipped, not at every reconcile.
		if c := meta.FindStatusCondition(s.Status.Conditions, ConditionWorkloadsSkipped); c == nil || c.Status != metav1.ConditionTrue || c.Message != msg {
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, reason, "Skip", "%s", msg)
		}
	}
	if s.Spec.DryRun && s.Status.State != obs.state {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, ReasonDryRun, "DryRun", "Dry run: the schedule is now %s; nothing was changed", obs.state)
	}
}

// emitWriteEvents reports what this reconcile's workload writes did, also when the
// schedule is being deleted.
func (r *Reconciler) emitWriteEvents(s *powerv1alpha1.SleepSchedule, obs *observation) {
	if obs.slept > 0 {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "Slept", "Sleep", "Put %d workload(s) to sleep (%s)", obs.slept, sampleNames(obs, actSleep))
	}
	if obs.woken > 0 {
		r.Recorder.Eventf(s, nil, corev1.EventTypeNormal, "Woke", "Wake", "Woke %d workload(s) and restored their replicas (%s)", obs.woken, sampleNames(obs, actWake))
	}
	for _, w := range obs.workloads {
		if w.err != nil {
			continue
		}
		switch {
		case w.act == actLeftAlone:
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonLeftAlone, "Sleep",
				"%s was changed by someone else while asleep (now %s); Orderly leaves it alone and will not restore it on waking", w.id(), w.describeValue())
		case w.act == actRelease && !w.leftAlone && !w.halfWoken && w.record != nil && w.badRecord == nil:
			r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonLeftAlone, "Wake",
				"%s was changed by someone else while asleep (now %s); it is kept as it is", w.id(), w.describeValue())
		}
	}
	if len(obs.badRecords) > 0 {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonInvalidRecord, "Wake",
			"Released %d workload(s) without restoring them, because their sleep record cannot be restored; set them as they should be: %s",
			len(obs.badRecords), kit.FirstN(obs.badRecords, 5))
	}
	if obs.failures > 0 {
		r.Recorder.Eventf(s, nil, corev1.EventTypeWarning, ReasonWriteFailed, "Write", "%d workload write(s) failed: %s; first error: %v", obs.failures, kit.FirstN(obs.failedNames, namesLimit), obs.firstErr)
	}
}

func gitOpsCount(obs *observation) int32 {
	var n int32
	for _, w := range obs.workloads {
		if w.targeted && w.gitOps != "" {
			n++
		}
	}
	return n
}

func firstGitOps(obs *observation) string {
	for _, w := range obs.workloads {
		if w.targeted && w.gitOps != "" {
			return fmt.Sprintf("%s (%s)", w.id(), w.gitOps)
		}
	}
	return ""
}

func (w *workload) describeValue() string {
	if w.extra != nil {
		switch w.extra.mode {
		case modePatch:
			return "patched fields changed"
		case modeKEDA:
			if p := kedaPaused(w.obj); p != nil {
				return powerv1alpha1.KEDAPausedReplicasAnnotation + "=" + *p
			}
			return "no " + powerv1alpha1.KEDAPausedReplicasAnnotation
		}
	}
	if w.kind == powerv1alpha1.KindCronJob {
		return fmt.Sprintf("suspend=%v", w.value == 1)
	}
	return fmt.Sprintf("replicas=%d", w.value)
}

// skippedSummary is the reason and message of the WorkloadsSkipped condition: the
// workloads the schedule would sleep and leaves awake, and why; "" when none.
func skippedSummary(obs *observation) (reason, msg string) {
	var names []string
	for _, w := range obs.workloads {
		if w.skip != "" {
			if reason == "" {
				reason = w.skipReason
			}
			names = append(names, fmt.Sprintf("%s (%s)", w.id(), w.skip))
		}
	}
	if len(names) == 0 {
		return "", ""
	}
	return reason, kit.Truncate(fmt.Sprintf("%d workload(s) are left awake and nothing is saved for them: %s", len(names), kit.FirstN(names, namesLimit)), 8192)
}

func skippedCount(obs *observation) int {
	n := 0
	for _, w := range obs.workloads {
		if w.skip != "" {
			n++
		}
	}
	return n
}

// splitKindProblems separates the kinds that are served and cannot sleep from those
// that are not served (KindNotFound): a kind without a CRD has no objects, so none is
// out of the scheduled state, and a schedule may name a kind before it is installed
// (the sample does); it is reported in KindsAvailable and waited for.
func splitKindProblems(problems []kindProblem) (unsleepable, missing []kindProblem) {
	for _, p := range problems {
		if p.reason == ReasonKindNotFound {
			missing = append(missing, p)
		} else {
			unsleepable = append(unsleepable, p)
		}
	}
	return unsleepable, missing
}

// problemKinds names the kinds of problems, once each, in order.
func problemKinds(problems []kindProblem) []string {
	var out []string
	for _, p := range problems {
		if !slices.Contains(out, p.kind) {
			out = append(out, p.kind)
		}
	}
	return out
}

// sampleNames names the first few workloads on which this reconcile carried out a.
func sampleNames(obs *observation, a action) string {
	var names []string
	for _, w := range obs.workloads {
		if w.act == a && w.err == nil {
			names = append(names, w.id())
		}
	}
	return kit.FirstN(names, 5)
}
