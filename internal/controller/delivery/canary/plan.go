package canary

import (
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// maxDecisions bounds status.decisions (the API's MaxItems).
const maxDecisions = 10

// variantState is what was observed of the primary or canary Deployment.
type variantState struct {
	exists bool
	// revision is the revision annotation: the target revision its template came from.
	revision string
	// replicas is its spec.replicas.
	replicas int32
	// ready: the Deployment's controller has rolled out its current spec and every
	// replica is available (a Deployment at zero replicas is ready).
	ready bool
}

// observation is what one reconcile saw of the world. It is built by the controller
// and read by plan, which is pure.
type observation struct {
	now time.Time
	// targetRevision is the revision of the target's pod template.
	targetRevision string
	// replicas is how many replicas the primary (and a running canary) have: the
	// target's own count, or the one recorded on it when Orderly scaled it to zero.
	replicas int32
	primary  variantState
	canary   variantState
	// trafficReady: every router's CRD is installed and its route exists.
	trafficReady bool
	// weight is the canary's weight observed in the routes (the highest, when they
	// disagree: that is the traffic at risk).
	weight int32
	// queriesValid is false when Prometheus refused a query or a placeholder is
	// unknown: the analysis does not go on.
	queriesValid bool
	// promote: the promote annotation names the current revision and step.
	promote bool
	// abort: the abort annotation names the current revision.
	abort bool
}

// outcome is the result of an analysis that plan asked for (due).
type outcome struct {
	// decision is the step's record when Prometheus answered.
	decision *deliveryv1alpha1.StepDecision
	// verdict of the step, when decision is set.
	verdict deliveryv1alpha1.Verdict
	// providerErr is set when Prometheus could not be queried.
	providerErr error
}

// templateSource says where the primary's pod template comes from.
type templateSource int

const (
	// keepTemplate leaves the primary's template as it is.
	keepTemplate templateSource = iota
	// fromTarget copies the target's template (initialization).
	fromTarget
	// fromCanary copies the canary's template (promotion).
	fromCanary
)

// desired is what the world should look like after this reconcile.
type desired struct {
	// primaryTemplate says which template the primary runs.
	primaryTemplate templateSource
	// canaryRuns: the canary Deployment runs the target's template at status.revision
	// with the observation's replicas; otherwise it is scaled to zero (keeping its
	// template).
	canaryRuns bool
	// weight is the canary's weight to write to every route.
	weight int32
	// scaleTargetDown: the primary serves, so the target is held at zero replicas.
	scaleTargetDown bool
}

// result is what plan decided: the next status, the world to converge to, and the
// Events to send for the transitions.
type result struct {
	status  deliveryv1alpha1.CanaryStatus
	desired desired
	// reason and message explain the phase (the Ready condition's reason when the
	// Canary is blocked, and the Event of a transition).
	reason, message string
	// blocked: the Canary cannot go on until something outside changes (a route, a
	// query, the canary's pods).
	blocked bool
	// events are the transitions of this reconcile, for Events.
	events []event
	// requeueAfter is when the Canary must be looked at again, whatever the watches
	// bring (0: only when something changes).
	requeueAfter time.Duration
}

type event struct {
	warning bool
	reason  string
	message string
}

// due says whether the current step's analysis should run now, before plan is called
// with its outcome.
func due(c *deliveryv1alpha1.Canary, obs *observation) bool {
	st := &c.Status
	if !analysing(c, obs) || obs.abort || obs.promote || !obs.queriesValid {
		return false
	}
	step, ok := currentStep(c)
	if !ok || step.Pause || st.InconclusiveCount >= c.Spec.Analysis.MaxInconclusive || st.StepStartedAt == nil {
		return false
	}
	if obs.weight != *step.Weight {
		return false
	}
	return !obs.now.Before(nextAnalysis(c))
}

// analysing: the Canary is in the middle of a revision's analysis (not promoting,
// not stable, not rolled back), with its canary ready and its traffic in place.
func analysing(c *deliveryv1alpha1.Canary, obs *observation) bool {
	st := &c.Status
	switch st.Phase {
	case deliveryv1alpha1.PhaseProgressing, deliveryv1alpha1.PhasePaused, deliveryv1alpha1.PhaseHolding:
	default:
		return false
	}
	return st.Revision == obs.targetRevision && obs.targetRevision != obs.primary.revision &&
		obs.canary.revision == st.Revision && obs.canary.ready && obs.canary.replicas > 0 && obs.trafficReady
}

func currentStep(c *deliveryv1alpha1.Canary) (deliveryv1alpha1.Step, bool) {
	i := int(c.Status.CurrentStep)
	if i < 0 || i >= len(c.Spec.Steps) {
		return deliveryv1alpha1.Step{}, false
	}
	return c.Spec.Steps[i], true
}

// nextAnalysis is when the current step is judged: its interval after the weight was
// in place, one more interval for each inconclusive analysis before.
func nextAnalysis(c *deliveryv1alpha1.Canary) time.Time {
	step, ok := currentStep(c)
	if !ok || step.Interval == nil || c.Status.StepStartedAt == nil {
		return time.Time{}
	}
	return c.Status.StepStartedAt.Add(time.Duration(c.Status.InconclusiveCount+1) * step.Interval.Duration)
}

// weightBefore is the weight of the last weight step before step i (0 when none): a
// pause holds the traffic where the step before left it.
func weightBefore(steps []deliveryv1alpha1.Step, i int) int32 {
	for j := min(i, len(steps)) - 1; j >= 0; j-- {
		if steps[j].Weight != nil {
			return *steps[j].Weight
		}
	}
	return 0
}

// PromoteValue is the promote annotation's value that passes step of revision.
func PromoteValue(revision string, step int32) string { return fmt.Sprintf("%s/%d", revision, step) }

// plan decides, from the Canary's status (where the delivery stood), what this
// reconcile observed and the outcome of an analysis (when due said to run one), the
// next status and the world to converge to. It is pure: the controller observes
// before and writes after, traffic first when the canary's weight goes down.
//
// Ordering rules it keeps, with the controller writing the routes before the
// Deployments in each reconcile (and the status only after both): the canary's weight
// rises only while the canary runs the revision under analysis and is ready; the
// canary is scaled down only with its weight at 0; traffic leaves the canary at
// promotion only once the primary runs the canary's template and is ready.
func plan(c *deliveryv1alpha1.Canary, obs *observation, out *outcome) result {
	r := decide(c, obs, out)
	// The controller writes the weight to every route before the status: the status
	// says what the routes hold after this reconcile.
	if obs.trafficReady {
		r.status.CanaryWeight = r.desired.weight
	} else {
		r.status.CanaryWeight = obs.weight
	}
	return r
}

// decide is plan without the final weight in status. Each phase below decides one
// part of a delivery, in order, and the first one that settles the reconcile ends it.
func decide(c *deliveryv1alpha1.Canary, obs *observation, out *outcome) result {
	st := *c.Status.DeepCopy()
	st.Replicas = obs.replicas
	r := result{desired: desired{weight: obs.weight, canaryRuns: obs.canary.replicas > 0, scaleTargetDown: obs.primary.exists && obs.primary.ready}}
	switch {
	case initializing(&st, &r, obs):
		// Nothing else moves until the primary is ready.
	case obs.targetRevision == obs.primary.revision:
		onPrimaryRevision(&st, &r, obs)
	default:
		deliver(c, &st, &r, obs, out)
	}
	r.status = st
	return r
}

// initializing decides whether the primary is still being set up, which then is all
// this reconcile does. It records the primary's revision once the primary exists, and
// ends the initialization once the primary is ready.
func initializing(st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation) bool {
	// The primary does not exist yet: it is created from the target's template, and
	// the target keeps serving until the primary is ready.
	if !obs.primary.exists || obs.primary.revision == "" {
		st.Phase = deliveryv1alpha1.PhaseInitializing
		st.Revision = obs.targetRevision
		r.desired = desired{primaryTemplate: fromTarget, weight: 0}
		r.reason, r.message = "Initializing", "creating the primary Deployment from the target's pod template"
		return true
	}
	st.PrimaryRevision = obs.primary.revision
	if st.Phase != deliveryv1alpha1.PhaseInitializing && st.Phase != "" {
		return false
	}
	// The primary exists: initialization ends once it is ready (and the target is
	// then scaled to zero).
	if !obs.primary.ready {
		st.Phase = deliveryv1alpha1.PhaseInitializing
		r.desired.primaryTemplate = keepTemplate
		r.desired.weight = 0
		r.reason, r.message = "Initializing", "waiting for the primary Deployment to be ready"
		return true
	}
	st.Phase = deliveryv1alpha1.PhaseSucceeded
	st.Revision = obs.primary.revision
	r.events = append(r.events, event{reason: "Initialized", message: fmt.Sprintf("The primary runs revision %s and takes all traffic", obs.primary.revision)})
	return false
}

// onPrimaryRevision decides for a target that runs what the primary runs: nothing to
// analyse. Traffic leaves a canary once the primary is ready (at the end of a
// promotion, or after the user went back to the primary's template), then the canary
// stops.
func onPrimaryRevision(st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation) {
	r.desired.weight = obs.weight
	if obs.primary.ready {
		r.desired.weight = 0
	}
	// The controller writes the routes before the Deployments: the canary stops in
	// the reconcile that takes its last traffic away, after the routes are written.
	r.desired.canaryRuns = obs.canary.replicas > 0 && r.desired.weight > 0
	done := r.desired.weight == 0
	switch {
	case st.Phase == deliveryv1alpha1.PhasePromoting && done:
		st.Phase = deliveryv1alpha1.PhaseSucceeded
		r.events = append(r.events, event{reason: "Promoted", message: fmt.Sprintf("Revision %s promoted: the primary runs it and takes all traffic", obs.primary.revision)})
	case st.Phase == deliveryv1alpha1.PhasePromoting:
		r.reason, r.message = "Promoting", "moving traffic back to the primary, which runs the canary's template"
	case st.Phase != deliveryv1alpha1.PhaseSucceeded:
		if st.Phase != deliveryv1alpha1.PhaseRolledBack || st.Revision != obs.targetRevision {
			r.events = append(r.events, event{reason: "Reverted", message: fmt.Sprintf("The target is back to the primary's revision %s: the analysis of %s ends", obs.primary.revision, st.Revision)})
		}
		st.Phase = deliveryv1alpha1.PhaseSucceeded
	}
	if st.Phase == deliveryv1alpha1.PhaseSucceeded {
		st.Revision = obs.primary.revision
		clearStep(st)
		r.reason, r.message = "Succeeded", fmt.Sprintf("the primary runs revision %s", obs.primary.revision)
	}
}

// deliver decides for a revision the primary does not run: its analysis starts (or
// starts again), a rolled-back revision stays rolled back, a promotion goes on, or
// the current step is run.
func deliver(c *deliveryv1alpha1.Canary, st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation, out *outcome) {
	startRevision(st, r, obs)
	switch st.Phase {
	case deliveryv1alpha1.PhaseRolledBack:
		// All traffic on the primary, then the canary stops; until a new revision.
		r.desired.weight = 0
		r.desired.canaryRuns = false
		r.reason, r.message = "RolledBack", fmt.Sprintf("revision %s was rolled back; change the target's pod template to try again", st.Revision)
		return
	case deliveryv1alpha1.PhasePromoting:
		// The primary takes the canary's template; traffic stays until it is ready
		// (then onPrimaryRevision moves it back).
		r.desired.canaryRuns = true
		if obs.canary.revision == st.Revision {
			r.desired.primaryTemplate = fromCanary
		}
		r.reason, r.message = "Promoting", "copying the canary's template into the primary"
		return
	}
	r.desired.canaryRuns = true
	if step, ok := stepToAnalyse(c, st, r, obs); ok {
		analyseStep(c, st, r, obs, out, step)
	}
}

// startRevision decides whether the target's revision is a new delivery. A new one
// (or one whose analysis was lost) starts from step 0; the canary gets the new
// template, and its weight is 0 until it is ready, so traffic goes back to the
// primary first.
func startRevision(st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation) {
	if st.Revision == obs.targetRevision && st.Phase != deliveryv1alpha1.PhaseSucceeded {
		return
	}
	if st.Revision != obs.targetRevision && st.Phase != deliveryv1alpha1.PhaseSucceeded && st.Phase != deliveryv1alpha1.PhaseRolledBack {
		r.events = append(r.events, event{reason: "Restarted", message: fmt.Sprintf("New revision %s during the analysis of %s: traffic back to the primary, analysis from step 0", obs.targetRevision, st.Revision)})
	} else {
		r.events = append(r.events, event{reason: "NewRevision", message: fmt.Sprintf("Revision %s: analysis starts", obs.targetRevision)})
	}
	st.Revision = obs.targetRevision
	st.Phase = deliveryv1alpha1.PhaseProgressing
	st.CurrentStep = 0
	clearStep(st)
}

// stepToAnalyse decides whether the current step is a weight step whose analysis
// goes on, and returns it. Otherwise something else decided this reconcile: an
// abort, a canary that is not ready, missing routes, the last step done, a person's
// promote, or a pause.
func stepToAnalyse(c *deliveryv1alpha1.Canary, st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation) (deliveryv1alpha1.Step, bool) {
	if obs.abort {
		rollback(st, r, obs, deliveryv1alpha1.VerdictAborted, "aborted by a person (orderly canary abort)", nil)
		return deliveryv1alpha1.Step{}, false
	}
	if obs.canary.revision != st.Revision || !obs.canary.ready || obs.canary.replicas == 0 {
		// No traffic to a canary that is not running the revision, or not ready.
		r.desired.weight = 0
		st.StepStartedAt, st.NextAnalysisAt = nil, nil
		st.Phase = deliveryv1alpha1.PhaseProgressing
		r.reason, r.message = "CanaryNotReady", fmt.Sprintf("waiting for the canary Deployment to run revision %s with all replicas available", st.Revision)
		return deliveryv1alpha1.Step{}, false
	}
	if !obs.trafficReady {
		r.blocked = true
		r.reason, r.message = "TrafficNotReady", "waiting for the routes (see the TrafficReady condition)"
		r.requeueAfter = trafficRecheck
		return deliveryv1alpha1.Step{}, false
	}
	step, ok := currentStep(c)
	if !ok || int(st.CurrentStep) >= len(c.Spec.Steps) {
		// The steps were shortened past the current one: every step is done.
		promote(st, r)
		return deliveryv1alpha1.Step{}, false
	}
	if obs.promote {
		record(st, obs, stepDecision(st, obs, weightOf(c, step), deliveryv1alpha1.VerdictPromoted, "promoted by a person (orderly canary promote)"))
		r.events = append(r.events, event{reason: "StepPromoted", message: fmt.Sprintf("Step %d of revision %s promoted by a person", st.CurrentStep, st.Revision)})
		advance(c, st, r, obs)
		return deliveryv1alpha1.Step{}, false
	}
	if step.Pause {
		r.desired.weight = weightBefore(c.Spec.Steps, int(st.CurrentStep))
		if st.Phase != deliveryv1alpha1.PhasePaused {
			r.events = append(r.events, event{reason: "Paused", message: fmt.Sprintf("Step %d is a pause: run `orderly canary promote %s` to go on", st.CurrentStep, c.Name)})
		}
		st.Phase = deliveryv1alpha1.PhasePaused
		r.reason, r.message = "PauseStep", fmt.Sprintf("step %d waits for `orderly canary promote %s`", st.CurrentStep, c.Name)
		return deliveryv1alpha1.Step{}, false
	}
	return step, true
}

// analyseStep decides for a weight step: its weight and window, whether its analysis
// can run and is due, and then what the analysis's outcome means.
func analyseStep(c *deliveryv1alpha1.Canary, st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation, out *outcome, step deliveryv1alpha1.Step) {
	weight := *step.Weight
	r.desired.weight = weight
	if obs.weight != weight || st.StepStartedAt == nil {
		// The weight is written in this reconcile, before the status: the step's
		// window starts now. (When the write fails, this status is not written.)
		now := metav1.NewTime(obs.now)
		st.StepStartedAt = &now
	}
	if !obs.queriesValid {
		r.blocked = true
		r.reason, r.message = "InvalidQuery", "the analysis waits for valid queries (see the QueriesValid condition)"
		return
	}
	if st.InconclusiveCount >= c.Spec.Analysis.MaxInconclusive {
		st.Phase = deliveryv1alpha1.PhasePaused
		r.reason, r.message = "Inconclusive", fmt.Sprintf("%d inconclusive analyses at step %d: run `orderly canary promote %s` to go on, or `orderly canary abort %s`",
			st.InconclusiveCount, st.CurrentStep, c.Name, c.Name)
		return
	}
	next := nextAnalysisOf(c, st)
	st.NextAnalysisAt = &metav1.Time{Time: next}
	if obs.now.Before(next) || out == nil {
		if st.Phase != deliveryv1alpha1.PhaseHolding {
			st.Phase = deliveryv1alpha1.PhaseProgressing
		}
		r.reason, r.message = "Progressing", fmt.Sprintf("step %d at %d%%: analysis at %s", st.CurrentStep, weight, next.UTC().Format(time.RFC3339))
		r.requeueAfter = max(next.Sub(obs.now), 0) + requeueSlack
		return
	}
	// The step's analysis ran.
	if out.providerErr != nil {
		holdOrRollBack(c, st, r, obs, weight, out.providerErr)
		return
	}
	applyVerdict(c, st, r, obs, out, weight)
}

// holdOrRollBack decides what an analysis Prometheus could not answer means: a
// rollback when onProviderError says so or the hold lasted maxHold, otherwise the
// traffic holds where it is.
func holdOrRollBack(c *deliveryv1alpha1.Canary, st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation, weight int32, providerErr error) {
	if c.Spec.Analysis.OnProviderError == deliveryv1alpha1.ProviderErrorRollback {
		rollback(st, r, obs, deliveryv1alpha1.VerdictProviderError, "Prometheus could not be queried and onProviderError is Rollback: "+providerErr.Error(), nil)
		return
	}
	if st.HoldingSince == nil {
		now := metav1.NewTime(obs.now)
		st.HoldingSince = &now
		r.events = append(r.events, event{warning: true, reason: "Holding", message: fmt.Sprintf("Prometheus cannot be queried; traffic stays at %d%% for up to %s: %v", weight, c.Spec.Analysis.MaxHold.Duration, providerErr)})
	}
	if held := obs.now.Sub(st.HoldingSince.Time); held >= c.Spec.Analysis.MaxHold.Duration {
		rollback(st, r, obs, deliveryv1alpha1.VerdictHoldExpired, fmt.Sprintf("Prometheus could not be queried for %s (maxHold %s): %v", held.Round(time.Second), c.Spec.Analysis.MaxHold.Duration, providerErr), nil)
		return
	}
	st.Phase = deliveryv1alpha1.PhaseHolding
	r.reason, r.message = "Holding", fmt.Sprintf("Prometheus cannot be queried since %s; traffic stays at %d%%: %v", st.HoldingSince.UTC().Format(time.RFC3339), weight, providerErr)
	r.requeueAfter = holdRetry(c)
}

// applyVerdict decides what the step's verdict means: the next step, a rollback, or
// one more analysis after an inconclusive one.
func applyVerdict(c *deliveryv1alpha1.Canary, st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation, out *outcome, weight int32) {
	if st.HoldingSince != nil {
		r.events = append(r.events, event{reason: "Resumed", message: fmt.Sprintf("Prometheus answers again after %s", obs.now.Sub(st.HoldingSince.Time).Round(time.Second))})
	}
	st.HoldingSince = nil
	d := out.decision
	record(st, obs, *d)
	switch out.verdict {
	case deliveryv1alpha1.VerdictPass:
		r.events = append(r.events, event{reason: "StepPassed", message: fmt.Sprintf("Step %d at %d%% passed: %s", st.CurrentStep, weight, d.Reason)})
		advance(c, st, r, obs)
	case deliveryv1alpha1.VerdictFail:
		rollback(st, r, obs, deliveryv1alpha1.VerdictFail, d.Reason, d)
	default:
		st.InconclusiveCount++
		st.Phase = deliveryv1alpha1.PhaseProgressing
		next := nextAnalysisOf(c, st)
		st.NextAnalysisAt = &metav1.Time{Time: next}
		r.events = append(r.events, event{warning: true, reason: "Inconclusive", message: fmt.Sprintf("Step %d at %d%% inconclusive (%d of %d): %s", st.CurrentStep, weight, st.InconclusiveCount, c.Spec.Analysis.MaxInconclusive, d.Reason)})
		r.reason, r.message = "Inconclusive", d.Reason
		r.requeueAfter = max(next.Sub(obs.now), 0) + requeueSlack
	}
}

// nextAnalysisOf is nextAnalysis for c with the status st that this reconcile is
// deciding.
func nextAnalysisOf(c *deliveryv1alpha1.Canary, st *deliveryv1alpha1.CanaryStatus) time.Time {
	c2 := c.DeepCopy()
	c2.Status = *st
	return nextAnalysis(c2)
}

// requeueSlack is added to a timed requeue, so that a timer that fires a little early
// does not find the analysis not yet due.
const requeueSlack = 50 * time.Millisecond

// trafficRecheck is how often a Canary whose routes or their CRDs are missing looks
// again: nothing watches kinds that may not be installed.
const trafficRecheck = 10 * time.Second

// holdRetry is how soon a holding Canary asks Prometheus again.
func holdRetry(c *deliveryv1alpha1.Canary) time.Duration {
	return min(max(c.Spec.Analysis.Resolution.Duration, time.Second), 5*time.Second)
}

func weightOf(c *deliveryv1alpha1.Canary, step deliveryv1alpha1.Step) int32 {
	if step.Weight != nil {
		return *step.Weight
	}
	return weightBefore(c.Spec.Steps, int(c.Status.CurrentStep))
}

func clearStep(st *deliveryv1alpha1.CanaryStatus) {
	st.StepStartedAt, st.NextAnalysisAt, st.HoldingSince = nil, nil, nil
	st.InconclusiveCount = 0
}

// advance moves to the next step, or to promotion after the last one.
func advance(c *deliveryv1alpha1.Canary, st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation) {
	st.CurrentStep++
	clearStep(st)
	if int(st.CurrentStep) >= len(c.Spec.Steps) {
		promote(st, r)
		return
	}
	st.Phase = deliveryv1alpha1.PhaseProgressing
	next := c.Spec.Steps[st.CurrentStep]
	r.desired.weight = obs.weight
	r.requeueAfter = requeueSlack
	if next.Weight != nil {
		// The next weight is written in this reconcile (the canary is ready and the
		// routes are in place, or this step would not have been judged), so its
		// window starts now.
		now := metav1.NewTime(obs.now)
		r.desired.weight = *next.Weight
		st.StepStartedAt = &now
		st.NextAnalysisAt = &metav1.Time{Time: obs.now.Add(next.Interval.Duration)}
		r.requeueAfter = next.Interval.Duration + requeueSlack
	}
	r.reason, r.message = "Progressing", fmt.Sprintf("step %d", st.CurrentStep)
	r.status = *st
}

func promote(st *deliveryv1alpha1.CanaryStatus, r *result) {
	st.Phase = deliveryv1alpha1.PhasePromoting
	clearStep(st)
	r.desired.primaryTemplate = fromCanary
	r.desired.canaryRuns = true
	r.events = append(r.events, event{reason: "Promoting", message: fmt.Sprintf("Every step of revision %s passed: the primary takes the canary's template", st.Revision)})
	r.reason, r.message = "Promoting", "copying the canary's template into the primary"
	r.requeueAfter = requeueSlack
	r.status = *st
}

// rollback sends all traffic to the primary (the canary stops once the routes show
// it none) and records why.
func rollback(st *deliveryv1alpha1.CanaryStatus, r *result, obs *observation, verdict deliveryv1alpha1.Verdict, why string, recorded *deliveryv1alpha1.StepDecision) {
	if recorded == nil {
		record(st, obs, stepDecision(st, obs, obs.weight, verdict, why))
	}
	st.Phase = deliveryv1alpha1.PhaseRolledBack
	clearStep(st)
	// The routes are written (to 0) before the canary is scaled down, in this reconcile.
	r.desired.weight = 0
	r.desired.canaryRuns = false
	r.desired.primaryTemplate = keepTemplate
	r.events = append(r.events, event{warning: true, reason: "RolledBack", message: fmt.Sprintf("Revision %s rolled back at step %d (%s): %s", st.Revision, st.CurrentStep, verdict, why)})
	r.reason, r.message = "RolledBack", fmt.Sprintf("revision %s was rolled back at step %d: %s", st.Revision, st.CurrentStep, why)
	r.requeueAfter = requeueSlack
	r.status = *st
}

func stepDecision(st *deliveryv1alpha1.CanaryStatus, obs *observation, weight int32, verdict deliveryv1alpha1.Verdict, why string) deliveryv1alpha1.StepDecision {
	return deliveryv1alpha1.StepDecision{
		Revision: st.Revision, Step: st.CurrentStep, Weight: weight, Time: metav1.NewTime(obs.now),
		WindowStart: st.StepStartedAt, Verdict: verdict, Reason: kit.Truncate(why, 1024),
	}
}

// record puts d first in the bounded decision record.
func record(st *deliveryv1alpha1.CanaryStatus, _ *observation, d deliveryv1alpha1.StepDecision) {
	st.Decisions = append([]deliveryv1alpha1.StepDecision{d}, st.Decisions...)
	if len(st.Decisions) > maxDecisions {
		st.Decisions = st.Decisions[:maxDecisions]
	}
}
