//go:build integration

package secretrotation

import (
	"context"
	"testing"
	"time"

	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// idleController is the controller at its production idle poll (DefaultPoll), so
// that what a test sees within a few seconds comes from the Secret's watch and not
// from a timer.
var idleController = func() kit.Controller {
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-secretrotation"),
			Clock: deps.ClockOrReal(), MinInterval: time.Second, Poll: DefaultPoll, Namespace: deps.Namespace}
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	return c
}()

// seen is how long a test waits for something the Secret's watch reports: a few
// seconds, well below the idle poll, so that only a notification can meet it.
const seen = 20 * time.Second

// Issue 42 item 6: an external SecretRotation created before its Secret takes the
// Secret's first content as its starting version, and a change made seconds later
// (well within the idle poll) rolls the consumers to it. Before the Secret was
// watched, the change was found a minute later and taken as the starting version,
// and consumers on the first content never rolled.
func TestExternalSeesTheSecretsFirstVersionAndAChangeSecondsLater(t *testing.T) {
	g := gomega.NewWithT(t)
	ns := namespace(t)
	consumer(t, ns, "web", "certs")
	rollOutWhenRestarted(t, ns, "web")
	env.StartManagerForTest(t, kit.Deps{Namespace: "orderly-system"}, []kit.Controller{idleController})

	r := newRotation(ns, "certs", "certs")
	r.Spec.Interval = nil
	r.Spec.Generator = secretsv1alpha1.Generator{External: &secretsv1alpha1.ExternalGenerator{}}
	g.Expect(k.Create(context.Background(), r.SecretRotation)).To(gomega.Succeed())
	// The first look finds no Secret.
	g.Eventually(func(g gomega.Gomega) {
		c := findCondition(get(g, ns, "certs"), ConditionReady)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Reason).To(gomega.Equal(ReasonSecretMissing))
	}, timeout, poll).Should(gomega.Succeed())

	g.Expect(k.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "certs"},
		Data: map[string][]byte{"password": []byte("v1")}})).To(gomega.Succeed())
	uid := string(get(g, ns, "certs").UID)
	first := Version(uid, map[string][]byte{"password": []byte("v1")})
	g.Eventually(func(g gomega.Gomega) {
		sr := get(g, ns, "certs")
		g.Expect(sr.Status.CurrentVersion).To(gomega.Equal(first), "the first content is the starting version")
		g.Expect(findCondition(sr, ConditionReady).Reason).NotTo(gomega.Equal(ReasonSecretMissing))
	}, seen, poll).Should(gomega.Succeed())
	g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(1)), "first sight of the Secret: nothing to roll")

	setSecret(t, ns, "certs", map[string][]byte{"password": []byte("v2")})
	second := Version(uid, map[string][]byte{"password": []byte("v2")})
	g.Eventually(func(g gomega.Gomega) {
		sr := get(g, ns, "certs")
		g.Expect(sr.Status.CurrentVersion).To(gomega.Equal(second))
		g.Expect(sr.Status.Phase).To(gomega.Equal(secretsv1alpha1.PhaseDone))
		g.Expect(sr.Status.Rotation.Trigger).To(gomega.Equal(TriggerContentChange))
		g.Expect(sr.Status.Rotation.FromVersion).To(gomega.Equal(first))
		d := deploymentOf(g, ns, "web")
		g.Expect(d.Spec.Template.Annotations[secretsv1alpha1.VersionAnnotationPrefix+"certs"]).To(gomega.Equal(second))
		g.Expect(d.Generation).To(gomega.Equal(int64(2)), "rolled once, to the changed content")
	}, seen, poll).Should(gomega.Succeed())
}

// A generated Secret edited by hand is reported when the edit is made, not at the
// next idle look; a Secret of the same name in another namespace is not this
// SecretRotation's and changes nothing.
func TestManualChangeIsSeenWhenMade(t *testing.T) {
	g := gomega.NewWithT(t)
	ns, elsewhere := namespace(t), namespace(t)
	consumer(t, ns, "web", "db")
	rollOutWhenRestarted(t, ns, "web")
	env.StartManagerForTest(t, kit.Deps{Namespace: "orderly-system"}, []kit.Controller{idleController})
	newRotation(ns, "db", "db").create(t)
	waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)

	g.Expect(k.Create(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: elsewhere, Name: "db"},
		Data: map[string][]byte{"password": []byte("someone else's")}})).To(gomega.Succeed())
	setSecret(t, elsewhere, "db", map[string][]byte{"password": []byte("someone else's, changed")})
	setSecret(t, ns, "db", map[string][]byte{"password": []byte("typed-by-hand")})
	g.Eventually(func(g gomega.Gomega) {
		sr := get(g, ns, "db")
		c := findCondition(sr, ConditionManualChange)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Status).To(gomega.Equal(metav1.ConditionTrue))
		g.Expect(sr.Status.ManualVersion).To(gomega.Equal(Version(string(sr.UID), map[string][]byte{"password": []byte("typed-by-hand")})))
	}, seen, poll).Should(gomega.Succeed())
	g.Expect(string(secretData(g, ns, "db")["password"])).To(gomega.Equal("typed-by-hand"))
	g.Expect(string(secretData(g, elsewhere, "db")["password"])).To(gomega.Equal("someone else's, changed"))
	g.Expect(deploymentOf(g, ns, "web").Generation).To(gomega.Equal(int64(2)))
}
