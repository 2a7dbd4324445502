//go:build integration

package secretrotation

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

var (
	// k is a client straight to the API server (no cache): the tests act as a person
	// (and as the Deployment controller, which envtest does not run) through it.
	k   client.Client
	env *testenv.Env
)

const (
	timeout = 30 * time.Second
	poll    = 100 * time.Millisecond
)

// testController is the controller with a short poll and a minimum interval low
// enough for tests.
var testController = func() kit.Controller {
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-secretrotation"),
			Clock: deps.ClockOrReal(), MinInterval: time.Second, Poll: 500 * time.Millisecond, Namespace: deps.Namespace}
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	return c
}()

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k, env = e.Client, e
		return nil, nil
	})
}

// startManager runs the controller for one test; stop ends it (and is safe to call twice).
func startManager(t *testing.T) (stop func()) {
	return env.StartManagerForTest(t, kit.Deps{Namespace: "orderly-system"}, []kit.Controller{testController})
}

var nsCount atomic.Int32

func namespace(t *testing.T) string {
	t.Helper()
	name := fmt.Sprintf("rot-%d-%d", time.Now().UnixNano()%100000, nsCount.Add(1))
	if err := k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
	return name
}

// consumer creates a Deployment whose pods read the Secret secret through env.
func consumer(t *testing.T, ns, name, secret string) {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To(int32(1)),
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "app",
			Env: []corev1.EnvVar{{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: secret}, Key: "password"}}}},
		}}}},
	}}
	if err := k.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	rollOut(t, ns, name)
}

// rollOut plays the Deployment controller: the current template is rolled out and Ready.
func rollOut(t *testing.T, ns, name string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		var d appsv1.Deployment
		if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d); err != nil {
			return err
		}
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
		return k.Status().Update(context.Background(), &d)
	}, timeout, poll).Should(gomega.Succeed())
}

// rollOutWhenRestarted plays the Deployment controller in the background: each
// template change of the named Deployments is rolled out.
func rollOutWhenRestarted(t *testing.T, ns string, names ...string) {
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	go func() {
		for ctx.Err() == nil {
			for _, n := range names {
				var d appsv1.Deployment
				if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: n}, &d); err == nil && d.Status.ObservedGeneration < d.Generation {
					d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: 1, UpdatedReplicas: 1, ReadyReplicas: 1, AvailableReplicas: 1}
					_ = k.Status().Update(ctx, &d)
				}
			}
			select {
			case <-ctx.Done():
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
}

type rotation struct {
	*secretsv1alpha1.SecretRotation
}

func newRotation(ns, name, secret string) rotation {
	return rotation{&secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: secretsv1alpha1.SecretRotationSpec{SecretName: secret, Interval: &metav1.Duration{Duration: 720 * time.Hour},
			Generator: secretsv1alpha1.Generator{Password: &secretsv1alpha1.PasswordGenerator{}},
		}}}
}

func (r rotation) grace(d time.Duration) rotation {
	r.Spec.GracePeriod = &metav1.Duration{Duration: d}
	return r
}

func (r rotation) create(t *testing.T) {
	t.Helper()
	if r.Spec.GracePeriod == nil {
		r.Spec.GracePeriod = &metav1.Duration{}
	}
	if err := k.Create(context.Background(), r.SecretRotation); err != nil {
		t.Fatal(err)
	}
}

func get(g gomega.Gomega, ns, name string) *secretsv1alpha1.SecretRotation {
	var sr secretsv1alpha1.SecretRotation
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sr)).To(gomega.Succeed())
	return &sr
}

func secretData(g gomega.Gomega, ns, name string) map[string][]byte {
	var s corev1.Secret
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)).To(gomega.Succeed())
	return s.Data
}

func deploymentOf(g gomega.Gomega, ns, name string) *appsv1.Deployment {
	var d appsv1.Deployment
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(gomega.Succeed())
	return &d
}

// waitDone waits until rotation number n is Done and returns the SecretRotation.
func waitPhase(t *testing.T, ns, name string, n int64, phase secretsv1alpha1.Phase) *secretsv1alpha1.SecretRotation {
	t.Helper()
	var sr *secretsv1alpha1.SecretRotation
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		sr = get(g, ns, name)
		g.Expect(sr.Status.Rotation).NotTo(gomega.BeNil())
		g.Expect(sr.Status.Rotation.Number).To(gomega.Equal(n))
		g.Expect(sr.Status.Phase).To(gomega.Equal(phase))
	}, timeout, poll).Should(gomega.Succeed())
	return sr
}

// noValueIn fails when a value of data appears in what (a status or an Event note).
func noValueIn(t *testing.T, what string, data map[string][]byte) {
	t.Helper()
	for k, v := range data {
		if len(v) > 0 && strings.Contains(what, string(v)) {
			t.Errorf("the value of key %s appears in %s", k, what[:min(len(what), 80)])
		}
	}
}

// rollOutAfterRestart waits until the Deployment's template changed (its generation
// is past gen), then rolls it out.
func rollOutAfterRestart(t *testing.T, ns, name string, gen int64) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func(g gomega.Gomega) {
		g.Expect(deploymentOf(g, ns, name).Generation).To(gomega.BeNumerically(">", gen))
	}, timeout, poll).Should(gomega.Succeed())
	rollOut(t, ns, name)
}
