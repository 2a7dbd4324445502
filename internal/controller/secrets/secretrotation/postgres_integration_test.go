//go:build integration

package secretrotation

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testpg"
)

const managerNamespace = "orderly-system"

var (
	pgOnce sync.Once
	pg     *testpg.Server
	pgErr  error
)

// postgresServer starts one throwaway PostgreSQL for the suite, and a DatabaseServer
// for it (admin credentials in the manager's namespace) that allows the namespaces
// labelled rotation=allowed.
func postgresServer(t *testing.T) {
	t.Helper()
	pgOnce.Do(func() {
		if pg, pgErr = testpg.Start(); pgErr != nil {
			return
		}
		ctx := context.Background()
		_ = k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNamespace}})
		if pgErr = k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "pg-admin"},
			Data: map[string][]byte{"username": []byte(pg.Username), "password": []byte(pg.Password)}}); pgErr != nil {
			return
		}
		pgErr = k.Create(ctx, &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: datav1alpha1.DatabaseServerSpec{
			Host: pg.Host, Port: pg.Port, SSLMode: "disable",
			AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "pg-admin"},
			AllowedNamespaces:         &metav1.LabelSelector{MatchLabels: map[string]string{"rotation": "allowed"}},
		}})
	})
	if pgErr != nil {
		t.Fatalf("starting PostgreSQL: %v", pgErr)
	}
}

func startManagerWithDatabases(t *testing.T) {
	connector := postgres.NewConnector()
	t.Cleanup(connector.Close)
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: kit.EventsFor(mgr, "orderly-secretrotation"),
			Clock: deps.ClockOrReal(), MinInterval: time.Second, Poll: 500 * time.Millisecond, Namespace: deps.Namespace, Databases: connector}
		return r.SetupWithManager(ctx, mgr, deps.Options)
	}
	env.StartManagerForTest(t, kit.Deps{Namespace: managerNamespace, Databases: connector}, []kit.Controller{c})
}

func login(data map[string][]byte, password []byte) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := pgx.Connect(ctx, fmt.Sprintf("postgres://%s:%s@%s:%s/postgres?sslmode=disable", data["username"], password, data["host"], data["port"]))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	var one int
	return conn.QueryRow(ctx, "SELECT 1").Scan(&one)
}

// postgresRole: the inactive role gets the new password; a client on the old
// credential keeps working while consumers roll; after the grace period the old
// credential is refused by PostgreSQL, and the new one works.
func TestPostgresRoleAlternates(t *testing.T) {
	g := gomega.NewWithT(t)
	postgresServer(t)
	ns := namespace(t)
	labelNamespace(t, ns, "allowed")
	consumer(t, ns, "app", "db")
	startManagerWithDatabases(t)
	r := newRotation(ns, "db", "db").grace(3 * time.Second)
	r.Spec.Generator = secretsv1alpha1.Generator{PostgresRole: &secretsv1alpha1.PostgresRoleGenerator{ServerRef: "pg", Role: fmt.Sprintf("rot%d", time.Now().UnixNano()%1000000)}}
	r.create(t)
	base := r.Spec.Generator.PostgresRole.Role

	// The first rotation creates <role>_a; the consumer rolls to it.
	rollOutAfterRestart(t, ns, "app", 1)
	sr := waitPhase(t, ns, "db", 1, secretsv1alpha1.PhaseDone)
	first := secretData(g, ns, "db")
	g.Expect(string(first["username"])).To(gomega.Equal(base + "_a"))
	g.Expect(sr.Status.ActiveRole).To(gomega.Equal(base + "_a"))
	g.Expect(login(first, first["password"])).To(gomega.Succeed())

	// The second switches to <role>_b. While the consumer rolls, the old one works.
	rotateNow(t, ns, "2")
	g.Eventually(func(g gomega.Gomega) { g.Expect(deploymentOf(g, ns, "app").Generation).To(gomega.Equal(int64(3))) }, timeout, poll).Should(gomega.Succeed())
	g.Expect(get(g, ns, "db").Status.Phase).To(gomega.Equal(secretsv1alpha1.PhaseRolling))
	second := secretData(g, ns, "db")
	g.Expect(string(second["username"])).To(gomega.Equal(base + "_b"))
	g.Expect(login(first, first["password"])).To(gomega.Succeed(), "the old credential works while consumers roll")
	g.Expect(login(second, second["password"])).To(gomega.Succeed())
	rollOutAfterRestart(t, ns, "app", 2)
	waitPhase(t, ns, "db", 2, secretsv1alpha1.PhaseGracePeriod)
	g.Expect(login(first, first["password"])).To(gomega.Succeed(), "the old credential works in the grace period")
	waitPhase(t, ns, "db", 2, secretsv1alpha1.PhaseDone)
	g.Expect(login(first, first["password"])).NotTo(gomega.Succeed(), "the old credential is refused after the grace period")
	g.Expect(login(second, second["password"])).To(gomega.Succeed())
}

// A namespace the DatabaseServer does not allow gets nothing, and says why.
func TestPostgresRoleServerNotAllowed(t *testing.T) {
	g := gomega.NewWithT(t)
	postgresServer(t)
	ns := namespace(t)
	startManagerWithDatabases(t)
	r := newRotation(ns, "db", "db")
	r.Spec.Generator = secretsv1alpha1.Generator{PostgresRole: &secretsv1alpha1.PostgresRoleGenerator{ServerRef: "pg", Role: "notallowed"}}
	r.create(t)
	g.Eventually(func(g gomega.Gomega) {
		c := findCondition(get(g, ns, "db"), ConditionReady)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Reason).To(gomega.Equal(ReasonServerNotAllowed))
	}, timeout, poll).Should(gomega.Succeed())
	missing := newRotation(ns, "db2", "db2")
	missing.Spec.Generator = secretsv1alpha1.Generator{PostgresRole: &secretsv1alpha1.PostgresRoleGenerator{ServerRef: "nope", Role: "nope"}}
	missing.create(t)
	g.Eventually(func(g gomega.Gomega) {
		c := findCondition(get(g, ns, "db2"), ConditionReady)
		g.Expect(c).NotTo(gomega.BeNil())
		g.Expect(c.Reason).To(gomega.Equal(ReasonServerNotFound))
	}, timeout, poll).Should(gomega.Succeed())
}

func labelNamespace(t *testing.T, name, value string) {
	t.Helper()
	gomega.NewWithT(t).Eventually(func() error {
		var ns corev1.Namespace
		if err := k.Get(context.Background(), client.ObjectKey{Name: name}, &ns); err != nil {
			return err
		}
		if ns.Labels == nil {
			ns.Labels = map[string]string{}
		}
		ns.Labels["rotation"] = value
		return k.Update(context.Background(), &ns)
	}, timeout, poll).Should(gomega.Succeed())
}
