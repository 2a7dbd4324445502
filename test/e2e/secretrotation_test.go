//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/testing/testpg"
)

// consumerOf is a Deployment whose pods read the Secret secret through env.
func consumerOf(ns, name, secret string) *appsv1.Deployment {
	d := deployment(ns, name, 1)
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}
	return d
}

func rotationOf(g Gomega, ns, name string) *secretsv1alpha1.SecretRotation {
	var sr secretsv1alpha1.SecretRotation
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sr)).To(Succeed())
	return &sr
}

func waitRotation(g Gomega, ns, name string, n int64, phase secretsv1alpha1.Phase) *secretsv1alpha1.SecretRotation {
	var sr *secretsv1alpha1.SecretRotation
	g.Eventually(func(g Gomega) {
		sr = rotationOf(g, ns, name)
		g.Expect(sr.Status.Rotation).NotTo(BeNil())
		g.Expect(sr.Status.Rotation.Number).To(Equal(n))
		g.Expect(sr.Status.Phase).To(Equal(phase))
	}, 3*timeout, poll).Should(Succeed())
	return sr
}

func secretOf(g Gomega, ns, name string) map[string][]byte {
	var s corev1.Secret
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
	return s.Data
}

func pgLogin(data map[string][]byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%s/postgres?sslmode=disable", data["username"], data["password"], data["host"], data["port"]))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

func rotateNowCLI(g Gomega, ns, name string) {
	out, err := exec.Command(os.Getenv("ORDERLY_BIN"), "rotate", "now", name, "-n", ns,
		"--kubeconfig", devcluster.KubeconfigPath(clusterName)).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("rotation requested"))
}

// TestSecretRotationPostgresRole, on real PostgreSQL with the manager running as its
// ServiceAccount: during a rotation the old credential keeps working until the pods
// have rolled and the grace period is over, then PostgreSQL refuses it; a consumer
// whose new pods never become Ready triggers a rollback and the old credential stays
// valid.
func TestSecretRotationPostgresRole(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pg, err := testpg.Start()
	g.Expect(err).NotTo(HaveOccurred(), "starting PostgreSQL")
	t.Cleanup(pg.Close)
	const ns = "e2e-rotation"
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"rotation": "yes"}}})).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "e2e-rotation-pg-admin"},
		StringData: map[string]string{"username": pg.Username, "password": pg.Password}}
	g.Expect(k.Create(ctx, admin)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), admin) })
	server := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "e2e-rotation-pg"}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: pg.Host, Port: pg.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "e2e-rotation-pg-admin"},
		AllowedNamespaces:         &metav1.LabelSelector{MatchLabels: map[string]string{"rotation": "yes"}},
	}}
	g.Expect(k.Create(ctx, server)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), server) })

	g.Expect(k.Create(ctx, consumerOf(ns, "app", "db"))).To(Succeed())
	g.Expect(k.Create(ctx, consumerOf(ns, "worker", "db"))).To(Succeed())
	sr := &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "db"}, Spec: secretsv1alpha1.SecretRotationSpec{
		SecretName: "db", Interval: &metav1.Duration{Duration: 720 * time.Hour},
		Generator:   secretsv1alpha1.Generator{PostgresRole: &secretsv1alpha1.PostgresRoleGenerator{ServerRef: "e2e-rotation-pg", Role: "e2eapp"}},
		GracePeriod: &metav1.Duration{Duration: 20 * time.Second},
		HealthGate:  secretsv1alpha1.HealthGate{Timeout: &metav1.Duration{Duration: 60 * time.Second}},
	}}
	g.Expect(k.Create(ctx, sr)).To(Succeed())
	waitRotation(g, ns, "db", 1, secretsv1alpha1.PhaseDone)
	first := secretOf(g, ns, "db")
	g.Expect(string(first["username"])).To(Equal("e2eapp_a"))
	g.Expect(pgLogin(first)).To(Succeed())

	rotateNowCLI(g, ns, "db")
	// Every consumer rolls, and the old credential still works through the grace period.
	waitRotation(g, ns, "db", 2, secretsv1alpha1.PhaseGracePeriod)
	second := secretOf(g, ns, "db")
	g.Expect(string(second["username"])).To(Equal("e2eapp_b"))
	g.Expect(pgLogin(first)).To(Succeed(), "the old credential works until the grace period is over")
	g.Expect(pgLogin(second)).To(Succeed())
	for _, name := range []string{"app", "worker"} {
		g.Expect(readyPods(g, ns, name)).To(Equal(1))
	}
	waitRotation(g, ns, "db", 2, secretsv1alpha1.PhaseDone)
	g.Expect(pgLogin(first)).To(HaveOccurred(), "PostgreSQL refuses the old credential after the grace period")
	g.Expect(pgLogin(second)).To(Succeed())

	// A consumer whose new pods never become Ready (no node matches their selector):
	// the rotation rolls back, the Secret holds the current credential again, and it
	// keeps working.
	stuck := consumerOf(ns, "stuck", "db")
	stuck.Spec.Template.Spec.NodeSelector = map[string]string{"e2e.orderly.dev/no-such-node": "true"}
	g.Expect(k.Create(ctx, stuck)).To(Succeed())
	patch := client.MergeFrom(rotationOf(g, ns, "db"))
	cur := rotationOf(g, ns, "db")
	cur.Spec.HealthGate.Timeout = &metav1.Duration{Duration: 15 * time.Second}
	g.Expect(k.Patch(ctx, cur, patch)).To(Succeed())
	rotateNowCLI(g, ns, "db")
	rolledBack := waitRotation(g, ns, "db", 3, secretsv1alpha1.PhaseRolledBack)
	g.Expect(secretOf(g, ns, "db")).To(Equal(second), "the previous value is restored")
	g.Expect(pgLogin(second)).To(Succeed(), "the credential in use was never revoked")
	g.Expect(rolledBack.Status.ActiveRole).To(Equal("e2eapp_b"))
	t.Logf("history: %+v", rolledBack.Status.History)
}

// TestSecretRotationExternalNoRestartStorm: with the external generator, consumers
// roll once per change of the Secret's content, and never because the manager
// restarted (three restarts, rollouts counted).
func TestSecretRotationExternalNoRestartStorm(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "e2e-rotation-external"
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, StringData: map[string]string{"tls.crt": "v1"}}
	g.Expect(k.Create(ctx, secret)).To(Succeed())
	g.Expect(k.Create(ctx, consumerOf(ns, "web", "tls"))).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(readyPods(g, ns, "web")).To(Equal(1)) }, timeout, poll).Should(Succeed())
	g.Expect(k.Create(ctx, &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "tls"}, Spec: secretsv1alpha1.SecretRotationSpec{
		SecretName: "tls", Generator: secretsv1alpha1.Generator{External: &secretsv1alpha1.ExternalGenerator{}}}})).To(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(rotationOf(g, ns, "tls").Status.CurrentVersion).NotTo(BeEmpty()) }, timeout, poll).Should(Succeed())

	rollouts := func(g Gomega) int {
		var rs appsv1.ReplicaSetList
		g.Expect(k.List(ctx, &rs, client.InNamespace(ns), client.MatchingLabels{"app": "web"})).To(Succeed())
		return len(rs.Items) - 1 // the first ReplicaSet is the Deployment's creation
	}
	g.Expect(rollouts(g)).To(Equal(0), "seeing the Secret for the first time rolls nothing")
	for i := 2; i <= 3; i++ {
		var s corev1.Secret
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(secret), &s)).To(Succeed())
		s.Data = map[string][]byte{"tls.crt": []byte(fmt.Sprintf("v%d", i))}
		g.Expect(k.Update(ctx, &s)).To(Succeed())
		// Noticed when made: the Secret is watched.
		waitRotation(g, ns, "tls", int64(i-1), secretsv1alpha1.PhaseDone)
		g.Expect(rollouts(g)).To(Equal(i-1), "one rollout per content change")
	}
	for range 3 {
		stopManager()
		stop, err := startManager(managerBin, managerKubeconfig)
		g.Expect(err).NotTo(HaveOccurred())
		stopManager = stop
		g.Consistently(func(g Gomega) { g.Expect(rollouts(g)).To(Equal(2)) }, 10*time.Second, poll).Should(Succeed())
	}
	g.Expect(rotationOf(g, ns, "tls").Status.Rotation.Number).To(Equal(int64(2)))
}
