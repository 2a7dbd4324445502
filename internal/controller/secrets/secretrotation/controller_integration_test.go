//go:build integration

package secretrotation

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

// annDB is the pod-template annotation of the SecretRotation "db".
const annDB = secretsv1alpha1.VersionAnnotationPrefix + "db"

// A rotation creates the Secret, restarts each consumer exactly once, and ends Done
// with the previous value forgotten; a second rotation (rotateNow) restarts each
// consumer once more. No value reaches the status or an Event.
func TestRotationRollsEveryConsumerOnce(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "web", "db")
	consumer(t, ns, "api", "db")
	consumer(t, ns, "other", "not-db")
	rollOutWhenRestarted(t, ns, "web", "api", "other")
	startManager(t)

	newRotation(ns, "db", "db").create(t)
	sr := waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
	first := secretData(g, ns, "db")
	g.Expect(first["password"]).To(gomega.HaveLen(32))
	g.Expect(sr.Status.CurrentVersion).To(gomega.Equal(Version(string(sr.UID), first)))
	for _, n := range []string{"web", "api"} {
		d := deploymentOf(g, ns, n)
		g.Expect(d.Spec.Template.Annotations[annDB]).To(gomega.Equal(sr.Status.CurrentVersion), n)
		g.Expect(d.Generation).To(gomega.Equal(int64(2)), "%s restarted once", n)
	}
	g.Expect(deploymentOf(g, ns, "other").Generation).To(gomega.Equal(int64(1)), "a workload that does not use the Secret is not restarted")
	g.Expect(sr.Status.History).To(gomega.HaveLen(1))
	g.Expect(sr.Status.History[0].Result).To(gomega.Equal(secretsv1alpha1.PhaseDone))
	g.Expect(secretData(g, ns, "db-rotation")).To(gomega.BeEmpty(), "the previous value is forgotten once revoked")

	patch := client.MergeFrom(sr.DeepCopy())
	sr.Spec.RotateNow = "again"
	g.Expect(k.Patch(context.Background(), sr, patch)).To(gomega.Succeed())
	sr = waitPhase(t, ns, "db", 2, secretsv1alpha1.PhaseDone)
	second := secretData(g, ns, "db")
	g.Expect(second["password"]).NotTo(gomega.Equal(first["password"]))
	for _, n := range []string{"web", "api"} {
		d := deploymentOf(g, ns, n)
		g.Expect(d.Spec.Template.Annotations[annDB]).To(gomega.Equal(sr.Status.CurrentVersion))
		g.Expect(d.Generation).To(gomega.Equal(int64(3)), "%s restarted once per rotation", n)
	}

	status, _ := json.Marshal(sr.Status)
	noValueIn(t, "status", first)
	noValueIn(t, string(status), second)
	noValueIn(t, string(status), first)
	var events eventsv1.EventList
	g.Expect(k.List(context.Background(), &events, client.InNamespace(ns))).To(gomega.Succeed())
	g.Expect(events.Items).NotTo(gomega.BeEmpty())
	for _, e := range events.Items {
		noValueIn(t, e.Note, first)
		noValueIn(t, e.Note, second)
	}
}

// No restart storm: once converged, a manager restarted again and again (and the
// resyncs and no-op reconciles in between) never restarts a consumer.
func TestRestartNeverRestartsConsumers(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "web", "db")
	rollOutWhenRestarted(t, ns, "web")
	stop := startManager(t)
	newRotation(ns, "db", "db").create(t)
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
	gen := deploymentOf(g, ns, "web").Generation
	for range 3 {
		stop()
		stop = startManager(t)
		g.Consistently(func(g gomega.Gomega) {
			g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(gen))
			g.Expect(get(g, ns, "db").Status.Rotation.Number).To(gomega.Equal(int64(1)))
		}, 2*time.Second, poll).Should(gomega.Succeed())
	}
}

// adopted creates the Secret first, as someone else would, and a SecretRotation
// that adopts it: no rotation until asked.
func adopted(t *testing.T, ns, value string, mod func(*secretsv1alpha1.SecretRotation)) {
	const name = "db"
	t.Helper()
	if err := k.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Data: map[string][]byte{"password": []byte(value)}}); err != nil {
		t.Fatal(err)
	}
	r := newRotation(ns, name, name)
	r.Spec.Adopt = true
	if mod != nil {
		mod(r.SecretRotation)
	}
	r.create(t)
}

func rotateNow(t *testing.T, ns, token string) {
	const name = "db"
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		var sr secretsv1alpha1.SecretRotation
		if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sr); err != nil {
			return err
		}
		sr.Spec.RotateNow = token
		return k.Update(context.Background(), &sr)
	}, timeout, poll).Should(gomega.Succeed())
}

// A Secret Orderly did not create is never overwritten without adopt.
func TestForeignSecretIsLeftAlone(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	g.Expect(k.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"},
		Data: map[string][]byte{"password": []byte("theirs")}})).To(gomega.Succeed())
	startManager(t)
	newRotation(ns, "db", "db").create(t)
	g.Eventually(func(g gomega.Gomega) {
		sr := get(g, ns, "db")
		c := findCondition(sr, ConditionReady)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Reason).To(gomega.Equal(ReasonSecretNotOwned))
	}, timeout, poll).Should(gomega.Succeed())
	g.Consistently(func(g gomega.Gomega) {
		g.Expect(string(secretData(g, ns, "db")["password"])).To(gomega.Equal("theirs"))
	}, 2*time.Second, poll).Should(gomega.Succeed())
}

func findCondition(sr *secretsv1alpha1.SecretRotation, typ string) *metav1.Condition {
	for i := range sr.Status.Conditions {
		if sr.Status.Conditions[i].Type == typ {
			return &sr.Status.Conditions[i]
		}
	}
	return nil
}

// A consumer whose new pods never become Ready fails the health gate: the previous
// value is restored, the consumers rolled back to it, and the rotation reported.
func TestHealthGateRollsBack(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "good", "db")
	consumer(t, ns, "stuck", "db")
	rollOutWhenRestarted(t, ns, "good") // stuck's new pods never become Ready
	startManager(t)
	adopted(t, ns, "original-value-0000", func(sr *secretsv1alpha1.SecretRotation) {
		sr.Spec.HealthGate.Timeout = &metav1.Duration{Duration: 10 * time.Second}
		sr.Spec.Consumers.MaxUnavailableConsumers = 2
	})
	g.Eventually(func(g gomega.Gomega) { g.Expect(get(g, ns, "db").Status.CurrentVersion).NotTo(gomega.BeEmpty()) }, timeout, poll).Should(gomega.Succeed())
	original := get(g, ns, "db").Status.CurrentVersion
	rotateNow(t, ns, "1")
	sr := waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseRolledBack)
	g.Expect(string(secretData(g, ns, "db")["password"])).To(gomega.Equal("original-value-0000"))
	g.Expect(sr.Status.CurrentVersion).To(gomega.Equal(original))
	for _, n := range []string{"good", "stuck"} {
		g.Expect(deploymentOf(g, ns, n).Spec.Template.Annotations[annDB]).To(gomega.Equal(original), "%s rolled back to the previous version", n)
	}
	c := findCondition(sr, ConditionReady)
	g.Expect(c.Status).To(gomega.Equal(metav1.ConditionFalse))
	g.Expect(c.Reason).To(gomega.Equal(ReasonRolledBack))
	g.Expect(c.Message).To(gomega.ContainSubstring("Deployment/stuck"))
}

// onFailure Hold stops the rotation where it is; a new rotateNow resumes it.
func TestHealthGateHoldsAndResumes(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "stuck", "db")
	startManager(t)
	adopted(t, ns, "original-value-0000", func(sr *secretsv1alpha1.SecretRotation) {
		sr.Spec.HealthGate = secretsv1alpha1.HealthGate{Timeout: &metav1.Duration{Duration: 10 * time.Second}, OnFailure: secretsv1alpha1.FailureHold}
	})
	g.Eventually(func(g gomega.Gomega) { g.Expect(get(g, ns, "db").Status.CurrentVersion).NotTo(gomega.BeEmpty()) }, timeout, poll).Should(gomega.Succeed())
	rotateNow(t, ns, "1")
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseHeld)
	g.Expect(string(secretData(g, ns, "db")["password"])).NotTo(gomega.Equal("original-value-0000"), "held: the new value stays")
	rollOutWhenRestarted(t, ns, "stuck")
	rotateNow(t, ns, "2")
	sr := waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
	g.Expect(deploymentOf(g, ns, "stuck").Spec.Template.Annotations[annDB]).To(gomega.Equal(sr.Status.CurrentVersion))
}

// Stopped while consumers roll, or in the grace period, the manager resumes the
// rotation where it was, and no consumer is restarted twice.
func TestResumesAfterStopInWaitingPhases(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "web", "db")
	stop := startManager(t)
	newRotation(ns, "db", "db").grace(4 * time.Second).create(t)
	// The first value has no previous one to keep valid: no grace period.
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseRolling)
	rollOut(t, ns, "web")
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
	rotateNow(t, ns, "1")
	waitPhase(t, ns, "db", 2, secretsv1alpha1.PhaseRolling)
	g.Eventually(func(g gomega.Gomega) { g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(3))) }, timeout, poll).Should(gomega.Succeed())
	stop()
	stop = startManager(t)
	g.Consistently(func(g gomega.Gomega) {
		g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(3)))
		g.Expect(get(g, ns, "db").Status.Phase).To(gomega.Equal(secretsv1alpha1.PhaseRolling))
	}, 2*time.Second, poll).Should(gomega.Succeed())
	rollOut(t, ns, "web")
	waitPhase(t, ns, "db", 2, secretsv1alpha1.PhaseGracePeriod)
	stop()
	stop = startManager(t)
	sr := waitPhase(t, ns, "db", 2, secretsv1alpha1.PhaseDone)
	g.Expect(sr.Status.History[0].Number).To(gomega.Equal(int64(2)))
	g.Expect(sr.Status.History[0].FinishedAt.Sub(sr.Status.History[0].StartedAt.Time)).To(gomega.BeNumerically(">=", 4*time.Second), "the grace period was kept across the restart")
	g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(3)))
	_ = stop
}

// The first value a rotation writes has no previous credential to keep valid, so it
// is done once its consumers rolled, whatever the grace period (`orderly status`
// would list it as rotating for that long).
func TestFirstRotationHasNoGracePeriod(t *testing.T) {
	ns := namespace(t)
	consumer(t, ns, "web", "db")
	rollOutWhenRestarted(t, ns, "web")
	stop := startManager(t)
	defer stop()
	newRotation(ns, "db", "db").grace(time.Hour).create(t)
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
}

// A manager killed in the transient phases (its status written at the last phase
// boundary, the next phase's work done or not) resumes correctly: the Secret ends at
// the new value, every consumer runs it, each restarted at most once, and the
// previous value captured once (a rerun of Generating does not take the new value
// for the previous one).
func TestResumesAfterKillInEachPhase(t *testing.T) {
	for _, phase := range []secretsv1alpha1.Phase{secretsv1alpha1.PhaseGenerating, secretsv1alpha1.PhaseApplying,
		secretsv1alpha1.PhaseVerifying, secretsv1alpha1.PhaseRevoking} {
		t.Run(string(phase), func(t *testing.T) {
			g := gomega.NewWithT(t)
			ns := namespace(t)
			consumer(t, ns, "web", "db")
			rollOutWhenRestarted(t, ns, "web")
			stop := startManager(t)
			adopted(t, ns, "value-one-0000000", nil)
			g.Eventually(func(g gomega.Gomega) { g.Expect(get(g, ns, "db").Status.CurrentVersion).NotTo(gomega.BeEmpty()) }, timeout, poll).Should(gomega.Succeed())
			stop()

			// The world as a manager killed in phase left it, in rotation 1.
			sr := get(g, ns, "db")
			uid := string(sr.UID)
			v1 := map[string][]byte{"password": []byte("value-one-0000000")}
			v2 := map[string][]byte{"password": []byte("value-two-0000000")}
			staging := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-rotation",
				Annotations: map[string]string{rotationAnnotation: "1"}},
				Data: map[string][]byte{"previous.password": v1["password"], "next.password": v2["password"]}}
			g.Expect(controllerutil.SetControllerReference(sr, staging, env.Scheme)).To(gomega.Succeed())
			g.Expect(k.Create(context.Background(), staging)).To(gomega.Succeed())
			now := metav1.Now()
			sr.Status.Phase = phase
			sr.Status.Rotation = &secretsv1alpha1.Rotation{Number: 1, Trigger: TriggerRotateNow, StartedAt: now, PhaseSince: now, FromVersion: Version(uid, v1)}
			if phase != secretsv1alpha1.PhaseGenerating {
				setSecret(t, ns, "db", v2) // Applying's write happened, its status write did not
			}
			if phase == secretsv1alpha1.PhaseVerifying || phase == secretsv1alpha1.PhaseRevoking {
				sr.Status.CurrentVersion, sr.Status.Rotation.ToVersion, sr.Status.Rotation.Discovered = Version(uid, v2), Version(uid, v2), true
				sr.Status.Consumers = []secretsv1alpha1.ConsumerStatus{{Kind: secretsv1alpha1.KindDeployment, Name: "web", State: secretsv1alpha1.ConsumerReady}}
				setAnnotation(t, ns, "web", annDB, Version(uid, v2))
			}
			g.Expect(k.Status().Update(context.Background(), sr)).To(gomega.Succeed())
			gen := deploymentOf(g, ns, "web").Generation

			startManager(t)
			sr = waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
			data := secretData(g, ns, "db")
			g.Expect(sr.Status.CurrentVersion).To(gomega.Equal(Version(uid, data)))
			if phase == secretsv1alpha1.PhaseGenerating {
				g.Expect(data["password"]).NotTo(gomega.Equal(v1["password"]))
			} else {
				g.Expect(data).To(gomega.Equal(v2))
			}
			d := deploymentOf(g, ns, "web")
			g.Expect(d.Spec.Template.Annotations[annDB]).To(gomega.Equal(sr.Status.CurrentVersion))
			g.Expect(d.Generation-gen).To(gomega.BeNumerically("<=", 1), "restarted at most once")
			g.Expect(secretData(g, ns, "db-rotation")).To(gomega.BeEmpty())
		})
	}
}

// Killed in Generating, then failing its health gate: the value restored is the one
// from before the rotation, not the one generated before the kill.
func TestRerunOfGeneratingKeepsThePreviousValue(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "stuck", "db")
	stop := startManager(t)
	adopted(t, ns, "value-one-0000000", func(sr *secretsv1alpha1.SecretRotation) {
		sr.Spec.HealthGate.Timeout = &metav1.Duration{Duration: 10 * time.Second}
	})
	g.Eventually(func(g gomega.Gomega) { g.Expect(get(g, ns, "db").Status.CurrentVersion).NotTo(gomega.BeEmpty()) }, timeout, poll).Should(gomega.Succeed())
	stop()
	sr := get(g, ns, "db")
	staging := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db-rotation", Annotations: map[string]string{rotationAnnotation: "1"}},
		Data: map[string][]byte{"previous.password": []byte("value-one-0000000"), "next.password": []byte("value-two-0000000")}}
	g.Expect(controllerutil.SetControllerReference(sr, staging, env.Scheme)).To(gomega.Succeed())
	g.Expect(k.Create(context.Background(), staging)).To(gomega.Succeed())
	// Applying wrote the new value, and the status still says Generating (its write
	// lost): Generating runs again, with the Secret holding the new value.
	setSecret(t, ns, "db", map[string][]byte{"password": []byte("value-two-0000000")})
	now := metav1.Now()
	sr.Status.Phase = secretsv1alpha1.PhaseGenerating
	sr.Status.Rotation = &secretsv1alpha1.Rotation{Number: 1, Trigger: TriggerRotateNow, StartedAt: now, PhaseSince: now, FromVersion: sr.Status.CurrentVersion}
	g.Expect(k.Status().Update(context.Background(), sr)).To(gomega.Succeed())
	startManager(t)
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseRolledBack)
	g.Expect(string(secretData(g, ns, "db")["password"])).To(gomega.Equal("value-one-0000000"))
}

func setSecret(t *testing.T, ns, name string, data map[string][]byte) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		var s corev1.Secret
		if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s); err != nil {
			return err
		}
		s.Data = data
		return k.Update(context.Background(), &s)
	}, timeout, poll).Should(gomega.Succeed())
}

func setAnnotation(t *testing.T, ns, name, key, value string) {
	t.Helper()
	g := gomega.NewWithT(t)
	d := deploymentOf(g, ns, name)
	if d.Spec.Template.Annotations == nil {
		d.Spec.Template.Annotations = map[string]string{}
	}
	d.Spec.Template.Annotations[key] = value
	g.Expect(k.Update(context.Background(), d)).To(gomega.Succeed())
	rollOut(t, ns, name)
}

// external: consumers roll once per content change, and a manual change of a
// generated Secret is reported (onManualChange: Report) without touching anything.
func TestExternalRollsOncePerContentChange(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "web", "certs")
	rollOutWhenRestarted(t, ns, "web")
	g.Expect(k.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certs"},
		Data: map[string][]byte{"password": []byte("v1")}})).To(gomega.Succeed())
	stop := startManager(t)
	r := newRotation(ns, "certs", "certs")
	r.Spec.Interval = nil
	r.Spec.Generator = secretsv1alpha1.Generator{External: &secretsv1alpha1.ExternalGenerator{}}
	// gracePeriod left to its default (10m): with nothing to revoke, it must not be waited for.
	g.Expect(k.Create(context.Background(), r.SecretRotation)).To(gomega.Succeed())
	g.Eventually(func(g gomega.Gomega) { g.Expect(get(g, ns, "certs").Status.CurrentVersion).NotTo(gomega.BeEmpty()) }, timeout, poll).Should(gomega.Succeed())
	g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(1)), "first sight of the Secret: nothing to roll")
	for i := 2; i <= 3; i++ {
		setSecret(t, ns, "certs", map[string][]byte{"password": []byte("v" + strconv.Itoa(i))})
		waitPhase(t, ns, "certs", int64(i-1), secretsv1alpha1.PhaseDone)
		g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(i)))
	}
	for range 3 {
		stop()
		stop = startManager(t)
		g.Consistently(func(g gomega.Gomega) {
			g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(3)))
		}, 1500*time.Millisecond, poll).Should(gomega.Succeed())
	}
}

func TestManualChangeIsReported(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "web", "db")
	rollOutWhenRestarted(t, ns, "web")
	startManager(t)
	newRotation(ns, "db", "db").create(t)
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
	setSecret(t, ns, "db", map[string][]byte{"password": []byte("typed-by-hand")})
	g.Eventually(func(g gomega.Gomega) {
		c := findCondition(get(g, ns, "db"), ConditionManualChange)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
	}, timeout, poll).Should(gomega.Succeed())
	g.Expect(string(secretData(g, ns, "db")["password"])).To(gomega.Equal("typed-by-hand"))
	g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(2)))
}

// Bad input is refused by the API server, or reported.
func TestBadInput(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	two := newRotation(ns, "two", "two")
	two.Spec.Generator.APIKey = &secretsv1alpha1.APIKeyGenerator{}
	err := k.Create(context.Background(), two.SecretRotation)
	g.Expect(err).To(gomega.MatchError(gomega.ContainSubstring("exactly one generator")))
	none := newRotation(ns, "none", "none")
	none.Spec.Generator = secretsv1alpha1.Generator{}
	g.Expect(k.Create(context.Background(), none.SecretRotation)).To(gomega.MatchError(gomega.ContainSubstring("exactly one generator")))
	clash := newRotation(ns, "x", "x-rotation")
	g.Expect(k.Create(context.Background(), clash.SecretRotation)).To(gomega.MatchError(gomega.ContainSubstring("secretName cannot be")))

	startManager(t)
	short := newRotation(ns, "short", "short")
	short.Spec.Interval = &metav1.Duration{Duration: 500 * time.Millisecond}
	g.Expect(k.Create(context.Background(), short.SecretRotation)).To(gomega.MatchError(gomega.ContainSubstring("interval must be at least")))
	cron := newRotation(ns, "cron", "cron")
	cron.Spec.Schedule = &secretsv1alpha1.Schedule{Cron: "0 25 * * *"}
	cron.create(t)
	g.Eventually(func(g gomega.Gomega) {
		c := findCondition(get(g, ns, "cron"), ConditionReady)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Reason).To(gomega.Equal(ReasonInvalidSpec))
	}, timeout, poll).Should(gomega.Succeed())
	var s corev1.Secret
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cron"}, &s)).NotTo(gomega.Succeed(), "nothing is created for an invalid spec")
}
