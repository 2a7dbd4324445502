//go:build e2e

package attack

import (
	"context"
	"fmt"
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
	"orderly.dev/orderly/internal/labels"
)

// SecretRotation: mallory has Orderly overwrite a Secret it did not create (plain, or
// wearing Orderly's labels), restart team-b's workloads by naming them, and, with the
// postgresRole generator, use a DatabaseServer that does not allow her, take over
// team-b's login role, and grant herself a role that was not made grantable to her.

// rotation is a SecretRotation of secret in ns with generator g, rotated now.
func rotation(ns, name, secret string, g secretsv1alpha1.Generator, mutate ...func(*secretsv1alpha1.SecretRotationSpec)) *secretsv1alpha1.SecretRotation {
	sr := &secretsv1alpha1.SecretRotation{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: secretsv1alpha1.SecretRotationSpec{
		SecretName:  secret,
		Interval:    &metav1.Duration{Duration: 720 * time.Hour},
		Generator:   g,
		GracePeriod: &metav1.Duration{},
		HealthGate:  secretsv1alpha1.HealthGate{Timeout: &metav1.Duration{Duration: 60 * time.Second}},
	}}
	for _, m := range mutate {
		m(&sr.Spec)
	}
	return sr
}

// rotate creates sr as c and, when the test ends, the Secrets it made: its target has
// no owner reference (workloads use it), and a later run must not find it as a Secret
// Orderly did not create.
func rotate(t *testing.T, c client.Client, sr *secretsv1alpha1.SecretRotation) {
	t.Helper()
	for _, name := range []string{sr.Spec.SecretName, sr.Name + "-rotation"} {
		cleanup(t, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: sr.Namespace, Name: name}})
	}
	create(t, c, sr)
}

func password() secretsv1alpha1.Generator {
	return secretsv1alpha1.Generator{Password: &secretsv1alpha1.PasswordGenerator{Length: 24}}
}

// rotated waits until the first rotation of sr is Done.
func rotated(g Gomega, sr *secretsv1alpha1.SecretRotation) {
	g.EventuallyWithOffset(1, func(g Gomega) {
		get(g, sr)
		g.Expect(sr.Status.Rotation).NotTo(BeNil())
		g.Expect(sr.Status.Phase).To(Equal(secretsv1alpha1.PhaseDone), "%+v", sr.Status.Conditions)
	}, 3*timeout, poll).Should(Succeed())
}

// srReady waits for sr's Ready condition to have reason.
func srReady(g Gomega, sr *secretsv1alpha1.SecretRotation, reason string) {
	waitCondition(g, sr, func() []metav1.Condition { return sr.Status.Conditions }, "Ready", reason)
}

// consumer is a Deployment whose pods read secret through envFrom.
func consumer(ns, name, secret string) *appsv1.Deployment {
	d := deployment(ns, name)
	d.Spec.Template.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: secret}}}}
	return d
}

func TestAttackSecretRotation(t *testing.T) {
	ctx := context.Background()

	t.Run("a Secret Orderly did not create", func(t *testing.T) {
		g := NewWithT(t)
		theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "payments-api-key"}, StringData: map[string]string{"password": "a teammate's"}}
		create(t, admin, theirs)
		forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "forged-key",
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, secretsv1alpha1.SecretRotationLabel: "forged-key"}},
			StringData: map[string]string{"password": "forged labels"}}
		create(t, attacker, forged)
		for _, s := range []*corev1.Secret{theirs, forged} {
			before := snap(g, s)
			sr := rotation(teamA, s.Name, s.Name, password())
			rotate(t, attacker, sr)
			srReady(g, sr, "SecretNotOwned")
			unchanged(g, s, before)
		}
		// Team-b's Secret of the name she gives: a Secret of that name in her own
		// namespace is created (the control: a name free in team-a), team-b's is not
		// touched.
		bobs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "fresh-key"}, StringData: map[string]string{"password": "bob's"}}
		create(t, victim, bobs)
		before := snap(g, bobs)
		sr := rotation(teamA, "fresh-key", "fresh-key", password())
		rotate(t, attacker, sr)
		rotated(g, sr)
		var s corev1.Secret
		g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: teamA, Name: "fresh-key"}, &s)).To(Succeed())
		g.Expect(s.Data["password"]).To(HaveLen(24))
		unchanged(g, bobs, before)
	})

	t.Run("team-b's workloads as consumers", func(t *testing.T) {
		g := NewWithT(t)
		// Team-b's workload of the same name reads a Secret of the same name.
		bAPI := consumer(teamB, "api", "api-key")
		create(t, victim, bAPI)
		// Control: her own consumer, found by discovery, and one she names.
		worker := consumer(teamA, "worker", "api-key")
		create(t, attacker, worker)
		named := deployment(teamA, "named")
		create(t, attacker, named)
		g.Eventually(func(g Gomega) {
			get(g, bAPI)
			g.Expect(bAPI.Status.ObservedGeneration).To(Equal(bAPI.Generation))
		}, timeout, poll).Should(Succeed())
		before := snap(g, bAPI)
		sr := rotation(teamA, "api-key", "api-key", password(), func(s *secretsv1alpha1.SecretRotationSpec) {
			s.Consumers.Targets = []secretsv1alpha1.ConsumerRef{{Kind: secretsv1alpha1.KindDeployment, Name: "api"}, {Kind: secretsv1alpha1.KindDeployment, Name: "named"}}
		})
		rotate(t, attacker, sr)
		rotated(g, sr)
		annotation := secretsv1alpha1.VersionAnnotationPrefix + sr.Name
		for _, d := range []*appsv1.Deployment{worker, named} {
			get(g, d)
			g.Expect(d.Spec.Template.Annotations).To(HaveKeyWithValue(annotation, sr.Status.CurrentVersion), "%s was not rolled", d.Name)
		}
		untouched(g, bAPI, before)
		g.Expect(sr.Status.Consumers).NotTo(ContainElement(HaveField("Name", "api")))
	})

	t.Run("postgresRole", func(t *testing.T) {
		pg, pgAdmin := startPostgres(t)
		drainOnCleanup(t, &datav1alpha1.DatabaseServerList{})
		shared := databaseServer(t, pg, "attack-rotation-shared", teamA, teamB)
		bOnly := databaseServer(t, pg, "attack-rotation-b-only", teamB)
		drainOnCleanup(t, &secretsv1alpha1.SecretRotationList{})
		_, err := pgAdmin.Exec(ctx, `CREATE ROLE reports_b NOLOGIN; COMMENT ON ROLE reports_b IS 'orderly.dev/grantable-to=`+teamB+`';
CREATE ROLE reports_a NOLOGIN; COMMENT ON ROLE reports_a IS 'orderly.dev/grantable-to=`+teamA+`';
CREATE ROLE legacy_a LOGIN PASSWORD 'dba-made';`)
		if err != nil {
			t.Fatal(err)
		}
		pgRole := func(server, role string, grants ...string) secretsv1alpha1.Generator {
			return secretsv1alpha1.Generator{PostgresRole: &secretsv1alpha1.PostgresRoleGenerator{ServerRef: server, Role: role, GrantRoles: grants}}
		}
		login := func(data map[string][]byte) error {
			ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			defer cancel()
			conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%s/postgres?sslmode=disable", data["username"], data["password"], data["host"], data["port"]))
			if err != nil {
				return err
			}
			return conn.Close(ctx)
		}
		secretData := func(g Gomega, ns, name string) map[string][]byte {
			var s corev1.Secret
			g.Expect(admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
			return s.Data
		}
		roles := func(g Gomega, like string) int {
			return count(g, pgAdmin, "SELECT count(*) FROM pg_roles WHERE rolname LIKE $1", like)
		}

		// Team-b's role, made by bob's rotation.
		g := NewWithT(t)
		bobs := rotation(teamB, "orders-db", "orders-db", pgRole(shared.Name, "orders", "reports_b"))
		rotate(t, victim, bobs)
		rotated(g, bobs)
		bobsLogin := secretData(g, teamB, "orders-db")
		g.Expect(login(bobsLogin)).To(Succeed())

		t.Run("a server that does not allow her namespace", func(t *testing.T) {
			g := NewWithT(t)
			sr := rotation(teamA, "sneak-db", "sneak-db", pgRole(bOnly.Name, "sneak"))
			rotate(t, attacker, sr)
			srReady(g, sr, "ServerNotAllowed")
			g.Expect(roles(g, "sneak\\_%")).To(BeZero())
			// Control: the server serves team-b.
			bobs := rotation(teamB, "ledger-db", "ledger-db", pgRole(bOnly.Name, "ledger"))
			rotate(t, victim, bobs)
			rotated(g, bobs)
			g.Expect(login(secretData(g, teamB, "ledger-db"))).To(Succeed())
		})

		t.Run("team-b's role, or one the DBA made", func(t *testing.T) {
			g := NewWithT(t)
			for _, role := range []string{"orders", "legacy"} {
				sr := rotation(teamA, role+"-takeover", role+"-takeover", pgRole(shared.Name, role))
				rotate(t, attacker, sr)
				srReady(g, sr, "ServerFailed")
			}
			// Bob's credential still works: its password was not changed.
			g.Expect(login(bobsLogin)).To(Succeed())
			g.Expect(count(g, pgAdmin, "SELECT count(*) FROM pg_roles WHERE rolname = 'legacy_a' AND rolcanlogin")).To(Equal(1))
		})

		t.Run("a grant that is not hers", func(t *testing.T) {
			g := NewWithT(t)
			for i, grant := range []string{"reports_b", "pg_read_all_data", pg.Username} {
				sr := rotation(teamA, fmt.Sprintf("grab-%d", i), fmt.Sprintf("grab-%d", i), pgRole(shared.Name, fmt.Sprintf("grab%d", i), grant))
				rotate(t, attacker, sr)
				srReady(g, sr, "ServerFailed")
				g.Expect(count(g, pgAdmin, `SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member WHERE r.rolname LIKE $1`, fmt.Sprintf("grab%d\\_%%", i))).To(BeZero())
			}
			// Control: the role the DBA made grantable to team-a.
			sr := rotation(teamA, "reports", "reports", pgRole(shared.Name, "malreports", "reports_a"))
			rotate(t, attacker, sr)
			rotated(g, sr)
			g.Expect(login(secretData(g, teamA, "reports"))).To(Succeed())
			g.Expect(count(g, pgAdmin, `SELECT count(*) FROM pg_auth_members m JOIN pg_roles r ON r.oid = m.member JOIN pg_roles gr ON gr.oid = m.roleid
WHERE r.rolname = 'malreports_a' AND gr.rolname = 'reports_a'`)).To(Equal(1))
		})
	})
}
