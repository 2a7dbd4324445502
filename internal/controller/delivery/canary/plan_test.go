package canary

import (
	"errors"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
)

var t0 = time.Date(2026, 5, 4, 10, 0, 0, 0, time.UTC)

func weightStep(w int32, interval time.Duration) deliveryv1alpha1.Step {
	return deliveryv1alpha1.Step{Weight: ptr.To(w), Interval: &metav1.Duration{Duration: interval}}
}

func newCanary(steps ...deliveryv1alpha1.Step) *deliveryv1alpha1.Canary {
	return &deliveryv1alpha1.Canary{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", Generation: 1},
		Spec: deliveryv1alpha1.CanarySpec{
			TargetRef: deliveryv1alpha1.TargetRef{Name: "web"},
			Steps:     steps,
			Analysis: deliveryv1alpha1.Analysis{
				OnProviderError: deliveryv1alpha1.ProviderErrorHold,
				MaxHold:         metav1.Duration{Duration: time.Minute},
				MaxInconclusive: 2,
				Resolution:      metav1.Duration{Duration: time.Second},
			},
		},
	}
}

// world is a simulated cluster: plan's desired state is applied to it, and Deployments
// become ready at once unless told otherwise.
type world struct {
	t              *testing.T
	c              *deliveryv1alpha1.Canary
	now            time.Time
	target         string
	primary        variantState
	canary         variantState
	weight         int32
	trafficReady   bool
	queriesValid   bool
	slowPrimary    bool // the primary is not ready right after a template change
	targetHeld     bool
	promote, abort bool
	last           result
}

func newWorld(t *testing.T, c *deliveryv1alpha1.Canary) *world {
	return &world{t: t, c: c, now: t0, target: "r1", trafficReady: true, queriesValid: true}
}

func (w *world) observe() *observation {
	st := &w.c.Status
	return &observation{
		now: w.now, targetRevision: w.target, replicas: 3, primary: w.primary, canary: w.canary,
		trafficReady: w.trafficReady, weight: w.weight, queriesValid: w.queriesValid,
		promote: w.promote && st.Revision != "", abort: w.abort && st.Revision != "",
	}
}

// step runs one reconcile with out as the analysis outcome (when one is due), and
// applies what plan wants to the world.
func (w *world) step(out *outcome) result {
	w.t.Helper()
	obs := w.observe()
	if out != nil && !due(w.c, obs) {
		w.t.Fatalf("an outcome was given but no analysis is due (phase %s, step %d, now %s, next %v)", w.c.Status.Phase, w.c.Status.CurrentStep, w.now.Sub(t0), w.c.Status.NextAnalysisAt)
	}
	if out == nil && due(w.c, obs) {
		w.t.Fatalf("an analysis is due at %s but no outcome was given", w.now.Sub(t0))
	}
	if out != nil && out.decision != nil {
		// As judgeStep fills them in.
		st := &w.c.Status
		out.decision.Revision, out.decision.Step, out.decision.Weight = st.Revision, st.CurrentStep, st.CanaryWeight
		out.decision.Time = metav1.NewTime(w.now)
	}
	r := plan(w.c, obs, out)
	w.promote, w.abort = false, false
	if w.trafficReady {
		w.weight = r.desired.weight
	}
	switch r.desired.primaryTemplate {
	case fromTarget:
		w.primary = variantState{exists: true, revision: w.target, replicas: 3, ready: true}
	case fromCanary:
		w.primary = variantState{exists: true, revision: w.canary.revision, replicas: 3, ready: !w.slowPrimary}
	}
	if w.primary.exists {
		if r.desired.canaryRuns {
			w.canary = variantState{exists: true, revision: w.target, replicas: 3, ready: true}
		} else {
			w.canary.replicas = 0
		}
	}
	if r.desired.scaleTargetDown {
		w.targetHeld = true
	}
	w.c.Status = r.status
	w.last = r
	return r
}

func (w *world) at(d time.Duration) *world { w.now = t0.Add(d); return w }

func (w *world) expect(phase deliveryv1alpha1.CanaryPhase, step, weight int32) {
	w.t.Helper()
	st := w.c.Status
	if st.Phase != phase || st.CurrentStep != step || w.weight != weight || st.CanaryWeight != weight {
		w.t.Fatalf("at %s: phase %s step %d weight %d (status %d), want %s step %d weight %d (%s: %s)",
			w.now.Sub(t0), st.Phase, st.CurrentStep, w.weight, st.CanaryWeight, phase, step, weight, w.last.reason, w.last.message)
	}
}

func (w *world) expectEvent(reason string) {
	w.t.Helper()
	for _, e := range w.last.events {
		if e.reason == reason {
			return
		}
	}
	w.t.Fatalf("no %s event in %+v", reason, w.last.events)
}

func pass() *outcome {
	return &outcome{verdict: deliveryv1alpha1.VerdictPass, decision: &deliveryv1alpha1.StepDecision{Verdict: deliveryv1alpha1.VerdictPass, Reason: "all metrics passed"}}
}

func fail() *outcome {
	return &outcome{verdict: deliveryv1alpha1.VerdictFail, decision: &deliveryv1alpha1.StepDecision{Verdict: deliveryv1alpha1.VerdictFail, Reason: "errors: the canary is worse"}}
}

func inconclusive() *outcome {
	return &outcome{verdict: deliveryv1alpha1.VerdictInconclusive, decision: &deliveryv1alpha1.StepDecision{Verdict: deliveryv1alpha1.VerdictInconclusive, Reason: "too few samples"}}
}

func down() *outcome { return &outcome{providerErr: errors.New("connection refused")} }

// initialized brings a world to a primary serving r1, then makes r2 the target.
func initialized(t *testing.T, c *deliveryv1alpha1.Canary) *world {
	w := newWorld(t, c)
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseInitializing, 0, 0)
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseSucceeded, 0, 0)
	w.expectEvent("Initialized")
	if !w.targetHeld {
		t.Fatal("the target is not held at zero once the primary serves")
	}
	w.target = "r2"
	return w
}

func TestInitializationWaitsForThePrimary(t *testing.T) {
	w := newWorld(t, newCanary(weightStep(10, 10*time.Second)))
	r := w.step(nil)
	if r.desired.primaryTemplate != fromTarget || r.desired.scaleTargetDown || r.desired.canaryRuns {
		t.Fatalf("first reconcile: %+v", r.desired)
	}
	w.primary.ready = false
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseInitializing, 0, 0)
	if w.targetHeld {
		t.Fatal("the target was scaled down before the primary was ready")
	}
	w.primary.ready = true
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseSucceeded, 0, 0)
	if w.c.Status.PrimaryRevision != "r1" || !w.targetHeld {
		t.Fatalf("primary revision %q, target held %v", w.c.Status.PrimaryRevision, w.targetHeld)
	}
}

// A healthy revision goes through every step, each judged at its interval, and is
// promoted: the primary takes the canary's template, traffic goes back to it once it
// is ready, and the canary stops.
func TestPlanPromotesAHealthyRevisionStepByStep(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second), weightStep(50, 10*time.Second), weightStep(100, 10*time.Second)))
	w.slowPrimary = true
	w.at(time.Second).step(nil)
	w.expectEvent("NewRevision")
	// The canary starts; the weight is written at once since it is ready.
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 0)
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
	if got := w.last.requeueAfter; got < 10*time.Second || got > 11*time.Second {
		t.Fatalf("requeue after %s, want the interval", got)
	}
	// Not due before the interval.
	w.at(6 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
	w.at(11 * time.Second).step(pass())
	w.expect(deliveryv1alpha1.PhaseProgressing, 1, 50)
	w.expectEvent("StepPassed")
	w.at(21 * time.Second).step(pass())
	w.expect(deliveryv1alpha1.PhaseProgressing, 2, 100)
	w.at(31 * time.Second).step(pass())
	w.expect(deliveryv1alpha1.PhasePromoting, 3, 100)
	if w.primary.revision != "r2" {
		t.Fatalf("primary runs %q, want the canary's r2", w.primary.revision)
	}
	// The primary is not ready yet: traffic stays on the canary.
	w.at(32 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhasePromoting, 3, 100)
	if !w.canary.exists || w.canary.replicas == 0 {
		t.Fatal("the canary stopped while it had traffic")
	}
	// The primary is ready: traffic goes back to it (the routes are written first),
	// the canary stops, and nothing else is waited for: no watch would bring it.
	w.primary.ready = true
	w.at(33 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseSucceeded, 3, 0) // the step count says every step was taken
	w.expectEvent("Promoted")
	if w.canary.replicas != 0 {
		t.Fatal("the canary still runs after promotion")
	}
	if len(w.c.Status.Decisions) != 3 || w.c.Status.Decisions[0].Step != 2 || w.c.Status.Decisions[2].Step != 0 {
		t.Fatalf("decisions %+v", w.c.Status.Decisions)
	}
}

// A failed step rolls back at that step: traffic to the primary first, then the
// canary stops; the revision stays rolled back until the template changes.
func TestFailedStepRollsBackTrafficFirst(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second), weightStep(50, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(pass())
	w.at(21 * time.Second)
	r := w.step(fail())
	w.expect(deliveryv1alpha1.PhaseRolledBack, 1, 0)
	w.expectEvent("RolledBack")
	if r.desired.weight != 0 || r.desired.canaryRuns {
		t.Fatalf("desired %+v: all traffic to the primary (written first by the controller), and the canary stops", r.desired)
	}
	if d := w.c.Status.Decisions[0]; d.Verdict != deliveryv1alpha1.VerdictFail || d.Reason == "" {
		t.Fatalf("decision %+v", d)
	}
	if w.canary.replicas != 0 {
		t.Fatal("the canary still runs after the rollback")
	}
	w.at(time.Hour).step(nil)
	w.expect(deliveryv1alpha1.PhaseRolledBack, 1, 0)
	// A new template starts a new analysis.
	w.target = "r3"
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 0)
	if w.c.Status.Revision != "r3" {
		t.Fatalf("revision %q", w.c.Status.Revision)
	}
}

// A metrics outage holds traffic where it is; Prometheus back before maxHold lets
// the analysis go on (the outage never counts as a failed check).
func TestOutageHoldsThenGoesOn(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second), weightStep(50, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(down())
	w.expect(deliveryv1alpha1.PhaseHolding, 0, 10)
	w.expectEvent("Holding")
	if w.c.Status.HoldingSince == nil || !w.c.Status.HoldingSince.Time.Equal(t0.Add(11*time.Second)) {
		t.Fatalf("holdingSince %v", w.c.Status.HoldingSince)
	}
	if w.last.requeueAfter <= 0 || w.last.requeueAfter > 5*time.Second {
		t.Fatalf("retry after %s", w.last.requeueAfter)
	}
	w.at(40 * time.Second).step(down())
	w.expect(deliveryv1alpha1.PhaseHolding, 0, 10)
	w.at(50 * time.Second).step(pass())
	w.expect(deliveryv1alpha1.PhaseProgressing, 1, 50)
	w.expectEvent("Resumed")
	if w.c.Status.HoldingSince != nil {
		t.Fatal("holdingSince kept after Prometheus answered")
	}
}

func TestOutageLongerThanMaxHoldRollsBack(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(down())
	w.at(70 * time.Second).step(down())
	w.expect(deliveryv1alpha1.PhaseHolding, 0, 10)
	w.at(72 * time.Second).step(down())
	w.expect(deliveryv1alpha1.PhaseRolledBack, 0, 0)
	if d := w.c.Status.Decisions[0]; d.Verdict != deliveryv1alpha1.VerdictHoldExpired {
		t.Fatalf("decision %+v", d)
	}
}

func TestOutageWithRollbackPolicyRollsBackAtOnce(t *testing.T) {
	c := newCanary(weightStep(10, 10*time.Second))
	c.Spec.Analysis.OnProviderError = deliveryv1alpha1.ProviderErrorRollback
	w := initialized(t, c)
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(down())
	w.expect(deliveryv1alpha1.PhaseRolledBack, 0, 0)
	if d := w.c.Status.Decisions[0]; d.Verdict != deliveryv1alpha1.VerdictProviderError {
		t.Fatalf("decision %+v", d)
	}
}

// Inconclusive analyses repeat over a longer window, then pause for a person.
func TestInconclusiveRepeatsThenPauses(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second), weightStep(50, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(inconclusive())
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
	if next := w.c.Status.NextAnalysisAt.Time; !next.Equal(t0.Add(21 * time.Second)) {
		t.Fatalf("next analysis at %s, want two intervals after the step started", next.Sub(t0))
	}
	w.at(15 * time.Second).step(nil) // not due yet
	w.at(21 * time.Second).step(inconclusive())
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
	w.at(22 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhasePaused, 0, 10)
	if w.last.reason != "Inconclusive" {
		t.Fatalf("reason %s", w.last.reason)
	}
	w.promote = true
	w.at(30 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 1, 50)
	if d := w.c.Status.Decisions[0]; d.Verdict != deliveryv1alpha1.VerdictPromoted {
		t.Fatalf("decision %+v", d)
	}
}

func TestPauseStepWaitsForPromoteAtThePreviousWeight(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second), deliveryv1alpha1.Step{Pause: true}, weightStep(50, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(pass())
	w.step(nil)
	w.expect(deliveryv1alpha1.PhasePaused, 1, 10)
	w.expectEvent("Paused")
	w.at(time.Hour).step(nil)
	w.expect(deliveryv1alpha1.PhasePaused, 1, 10)
	w.promote = true
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 2, 50)
}

// A new template during an analysis restarts it from step 0, with traffic back on
// the primary first: the weight goes to 0 before the canary gets the new template.
func TestNewRevisionDuringAnalysisRestartsWithTrafficFirst(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second), weightStep(50, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(pass())
	w.expect(deliveryv1alpha1.PhaseProgressing, 1, 50)
	w.target = "r3"
	obs := w.observe()
	r := plan(w.c, obs, nil)
	if r.desired.weight != 0 {
		t.Fatalf("weight %d: a canary that does not run the new revision gets no traffic", r.desired.weight)
	}
	if r.status.Revision != "r3" || r.status.CurrentStep != 0 {
		t.Fatalf("status %+v", r.status)
	}
	w.at(12 * time.Second).step(nil)
	w.expectEvent("Restarted")
	w.step(nil) // the canary runs r3 and is ready: step 0's weight
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
}

func TestAbortRollsBack(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.abort = true
	w.at(3 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseRolledBack, 0, 0)
	if d := w.c.Status.Decisions[0]; d.Verdict != deliveryv1alpha1.VerdictAborted {
		t.Fatalf("decision %+v", d)
	}
}

func TestMissingTrafficBlocksWithoutTouchingWeights(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second)))
	w.trafficReady = false
	w.at(time.Second).step(nil)
	w.step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 0)
	if !w.last.blocked || w.last.reason != "TrafficNotReady" || w.last.requeueAfter != trafficRecheck {
		t.Fatalf("result %+v", w.last)
	}
	// Installing the CRD (or creating the route) lets it go on.
	w.trafficReady = true
	w.at(20 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
}

func TestInvalidQueriesStopTheAnalysis(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.queriesValid = false
	w.at(30 * time.Second).step(nil) // no analysis, though it would be due
	w.expect(deliveryv1alpha1.PhaseProgressing, 0, 10)
	if !w.last.blocked || w.last.reason != "InvalidQuery" {
		t.Fatalf("result %+v", w.last)
	}
}

// After a restart of the manager the Canary resumes from its status: same step,
// same weight, the same window, nothing written again.
func TestResumesFromStatusAfterRestart(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second), weightStep(50, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.at(11 * time.Second).step(pass())
	started := w.c.Status.StepStartedAt.Time
	// A new process: only the status and the world remain.
	saved := w.c.Status.DeepCopy()
	w.c.Status = *saved
	w.at(15 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseProgressing, 1, 50)
	if !w.c.Status.StepStartedAt.Time.Equal(started) {
		t.Fatalf("window restarted: %s, was %s", w.c.Status.StepStartedAt.Time, started)
	}
	w.at(21 * time.Second).step(pass())
}

func TestRevertToThePrimarysTemplateEndsTheAnalysis(t *testing.T) {
	w := initialized(t, newCanary(weightStep(10, 10*time.Second)))
	w.at(time.Second).step(nil)
	w.step(nil)
	w.target = "r1"
	w.at(3 * time.Second).step(nil)
	w.expect(deliveryv1alpha1.PhaseSucceeded, 0, 0)
	w.expectEvent("Reverted")
	if w.canary.replicas != 0 {
		t.Fatal("the canary still runs")
	}
}

func TestDecisionRecordIsBounded(t *testing.T) {
	st := &deliveryv1alpha1.CanaryStatus{}
	for i := range 15 {
		record(st, nil, deliveryv1alpha1.StepDecision{Step: int32(i)})
	}
	if len(st.Decisions) != maxDecisions || st.Decisions[0].Step != 14 {
		t.Fatalf("%d decisions, newest %d", len(st.Decisions), st.Decisions[0].Step)
	}
}

func TestWeightBefore(t *testing.T) {
	steps := []deliveryv1alpha1.Step{{Pause: true}, weightStep(10, time.Second), {Pause: true}, weightStep(40, time.Second), {Pause: true}}
	for i, want := range []int32{0, 0, 10, 10, 40} {
		if got := weightBefore(steps, i); got != want {
			t.Errorf("weightBefore(%d) = %d, want %d", i, got, want)
		}
	}
}

// startRevision: which revision is a new delivery, and how its start is reported.
func TestStartRevision(t *testing.T) {
	tests := []struct {
		name       string
		phase      deliveryv1alpha1.CanaryPhase
		revision   string
		wantEvent  string // "" when the delivery goes on
		wantPhase  deliveryv1alpha1.CanaryPhase
		wantStep   int32
		wantWindow bool
	}{
		{"the analysed revision goes on", deliveryv1alpha1.PhaseProgressing, "r2", "", deliveryv1alpha1.PhaseProgressing, 2, true},
		{"a rolled-back revision stays rolled back", deliveryv1alpha1.PhaseRolledBack, "r2", "", deliveryv1alpha1.PhaseRolledBack, 2, true},
		{"a new revision after a success", deliveryv1alpha1.PhaseSucceeded, "r1", "NewRevision", deliveryv1alpha1.PhaseProgressing, 0, false},
		{"a new revision after a rollback", deliveryv1alpha1.PhaseRolledBack, "r1", "NewRevision", deliveryv1alpha1.PhaseProgressing, 0, false},
		{"the same revision after a success (its analysis was lost)", deliveryv1alpha1.PhaseSucceeded, "r2", "NewRevision", deliveryv1alpha1.PhaseProgressing, 0, false},
		{"a new revision during an analysis", deliveryv1alpha1.PhasePaused, "r1", "Restarted", deliveryv1alpha1.PhaseProgressing, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			started := metav1.NewTime(t0)
			st := deliveryv1alpha1.CanaryStatus{Phase: tt.phase, Revision: tt.revision, CurrentStep: 2, StepStartedAt: &started, InconclusiveCount: 1}
			var r result
			startRevision(&st, &r, &observation{targetRevision: "r2"})
			var events []string
			for _, e := range r.events {
				events = append(events, e.reason)
			}
			if tt.wantEvent == "" && len(events) > 0 || tt.wantEvent != "" && (len(events) != 1 || events[0] != tt.wantEvent) {
				t.Errorf("events %v, want %q", events, tt.wantEvent)
			}
			if st.Revision != "r2" || st.Phase != tt.wantPhase || st.CurrentStep != tt.wantStep || (st.StepStartedAt != nil) != tt.wantWindow {
				t.Errorf("status %+v, want revision r2, phase %s, step %d, window kept %v", st, tt.wantPhase, tt.wantStep, tt.wantWindow)
			}
		})
	}
}

// stepToAnalyse: what decides the reconcile before a weight step's analysis, in order.
func TestStepToAnalyse(t *testing.T) {
	ready := variantState{exists: true, revision: "r2", replicas: 3, ready: true}
	steps := []deliveryv1alpha1.Step{weightStep(10, time.Minute), {Pause: true}, weightStep(30, time.Minute)}
	tests := []struct {
		name    string
		step    int32
		phase   deliveryv1alpha1.CanaryPhase
		obs     func(*observation)
		wantOK  bool
		wantWhy string // r.reason
		// wantPhase is the phase after; wantWeight the desired weight; wantBlocked: only
		// something outside can unblock it.
		wantPhase   deliveryv1alpha1.CanaryPhase
		wantWeight  int32
		wantBlocked bool
	}{
		{"a weight step is analysed", 0, deliveryv1alpha1.PhaseProgressing, func(*observation) {}, true, "", deliveryv1alpha1.PhaseProgressing, 20, false},
		{"an abort comes first", 0, deliveryv1alpha1.PhaseProgressing, func(o *observation) { o.abort, o.promote, o.trafficReady = true, true, false }, false, "RolledBack", deliveryv1alpha1.PhaseRolledBack, 0, false},
		{"a canary not ready gets no traffic", 0, deliveryv1alpha1.PhaseHolding, func(o *observation) { o.canary.ready = false }, false, "CanaryNotReady", deliveryv1alpha1.PhaseProgressing, 0, false},
		{"a canary of another revision gets no traffic", 0, deliveryv1alpha1.PhaseProgressing, func(o *observation) { o.canary.revision = "r1" }, false, "CanaryNotReady", deliveryv1alpha1.PhaseProgressing, 0, false},
		{"missing routes block without touching the weight", 0, deliveryv1alpha1.PhaseProgressing, func(o *observation) { o.trafficReady = false }, false, "TrafficNotReady", deliveryv1alpha1.PhaseProgressing, 20, true},
		{"steps shortened past the current one promote", 3, deliveryv1alpha1.PhaseProgressing, func(*observation) {}, false, "Promoting", deliveryv1alpha1.PhasePromoting, 20, false},
		{"a person's promote passes the step", 0, deliveryv1alpha1.PhaseProgressing, func(o *observation) { o.promote = true }, false, "Progressing", deliveryv1alpha1.PhaseProgressing, 20, false},
		{"a pause holds the weight of the step before", 1, deliveryv1alpha1.PhaseProgressing, func(*observation) {}, false, "PauseStep", deliveryv1alpha1.PhasePaused, 10, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newCanary(steps...)
			c.Status = deliveryv1alpha1.CanaryStatus{Phase: tt.phase, Revision: "r2", CurrentStep: tt.step}
			obs := &observation{now: t0, targetRevision: "r2", replicas: 3, primary: variantState{exists: true, revision: "r1", replicas: 3, ready: true},
				canary: ready, trafficReady: true, weight: 20, queriesValid: true}
			tt.obs(obs)
			st := c.Status
			r := result{desired: desired{weight: obs.weight}}
			_, ok := stepToAnalyse(c, &st, &r, obs)
			if ok != tt.wantOK || r.reason != tt.wantWhy || st.Phase != tt.wantPhase || r.desired.weight != tt.wantWeight || r.blocked != tt.wantBlocked {
				t.Errorf("ok %v, reason %q, phase %s, weight %d, blocked %v; want %v, %q, %s, %d, %v",
					ok, r.reason, st.Phase, r.desired.weight, r.blocked, tt.wantOK, tt.wantWhy, tt.wantPhase, tt.wantWeight, tt.wantBlocked)
			}
		})
	}
}
