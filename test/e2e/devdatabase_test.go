//go:build e2e

package e2e

import (
	"context"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/testing/testpg"
)

// dataClient is an admin client that knows the data.orderly.dev types.
func dataClient(t *testing.T) client.Client {
	t.Helper()
	scheme := runtime.NewScheme()
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(datav1alpha1.AddToScheme(scheme))
	c, err := client.New(adminCfg, client.Options{Scheme: scheme})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return c
}

func waitDevDBReason(g Gomega, c client.Client, ns, name, reason string) *datav1alpha1.DevDatabase {
	var d datav1alpha1.DevDatabase
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)).To(Succeed())
		cond := meta.FindStatusCondition(d.Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal(reason), cond.Message)
	}, timeout, poll).Should(Succeed())
	return &d
}

func connectWithSecret(ctx context.Context, sec *corev1.Secret, database string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(string(sec.Data[datav1alpha1.SecretKeyURI]))
	if err != nil {
		return nil, err
	}
	if database != "" {
		cfg.Database = database
	}
	return pgx.ConnectConfig(ctx, cfg)
}

// TestDevDatabaseOnRealPostgres: a developer gets a database in seconds and connects
// with the Secret's credentials; another developer's role cannot get in; the ttl is
// extended with the CLI; deleting the namespace drops the database.
func TestDevDatabaseOnRealPostgres(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := dataClient(t)
	pg, err := testpg.Start()
	g.Expect(err).NotTo(HaveOccurred(), "starting PostgreSQL")
	t.Cleanup(pg.Close)

	for _, ns := range []string{"e2e-db-team-a", "e2e-db-team-b"} {
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"databases": "yes"}}})).To(Succeed())
	}
	t.Cleanup(func() {
		for _, ns := range []string{"e2e-db-team-a", "e2e-db-team-b"} {
			_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		}
	})
	// The admin credentials live in the manager's namespace, the only one Orderly
	// reads a DatabaseServer's Secrets from.
	adminSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "e2e-pg-admin"},
		StringData: map[string]string{"username": pg.Username, "password": pg.Password}}
	g.Expect(c.Create(ctx, adminSecret)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), adminSecret) })
	server := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "e2e-pg"}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: pg.Host, Port: pg.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: "e2e-pg-admin"},
		AllowedNamespaces:         &metav1.LabelSelector{MatchLabels: map[string]string{"databases": "yes"}},
		MaxTTL:                    metav1.Duration{Duration: 72 * time.Hour},
	}}
	g.Expect(c.Create(ctx, server)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), server) })

	start := time.Now()
	for _, ns := range []string{"e2e-db-team-a", "e2e-db-team-b"} {
		g.Expect(c.Create(ctx, &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
			Spec: datav1alpha1.DevDatabaseSpec{ServerRef: "e2e-pg"}})).To(Succeed())
	}
	a := waitDevDBReason(g, c, "e2e-db-team-a", "app", "Ready")
	b := waitDevDBReason(g, c, "e2e-db-team-b", "app", "Ready")
	t.Logf("two DevDatabases ready in %s", time.Since(start).Round(time.Millisecond))

	var secA, secB corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "e2e-db-team-a", Name: "app"}, &secA)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "e2e-db-team-b", Name: "app"}, &secB)).To(Succeed())
	g.Expect(metav1.IsControlledBy(&secA, a)).To(BeTrue())

	connA, err := connectWithSecret(ctx, &secA, "")
	g.Expect(err).NotTo(HaveOccurred())
	defer connA.Close(ctx)
	_, err = connA.Exec(ctx, "CREATE TABLE orders (id serial primary key, total numeric); INSERT INTO orders (total) VALUES (9.99)")
	g.Expect(err).NotTo(HaveOccurred())
	var total string
	g.Expect(connA.QueryRow(ctx, "SELECT total::text FROM orders").Scan(&total)).To(Succeed())
	g.Expect(total).To(Equal("9.99"))

	// Team B's role can neither connect to team A's database nor read it.
	_, err = connectWithSecret(ctx, &secB, a.Status.Database)
	g.Expect(err).To(MatchError(ContainSubstring("permission denied for database")))

	// The server reports itself.
	g.Eventually(func(g Gomega) {
		var s datav1alpha1.DatabaseServer
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "e2e-pg"}, &s)).To(Succeed())
		g.Expect(s.Status.Reachable).To(BeTrue())
		g.Expect(s.Status.DatabasesInUse).To(BeNumerically(">=", 1))
	}, timeout, poll).Should(Succeed())

	// orderly db extend pushes the expiry later.
	before := a.Status.ExpiresAt.Time
	out, err := exec.Command(os.Getenv("ORDERLY_BIN"), "db", "extend", "app", "--by", "24h", "-n", "e2e-db-team-a",
		"--kubeconfig", devcluster.KubeconfigPath(clusterName)).CombinedOutput()
	g.Expect(err).NotTo(HaveOccurred(), string(out))
	g.Expect(string(out)).To(ContainSubstring("now expires at"))
	g.Eventually(func(g Gomega) {
		var d datav1alpha1.DevDatabase
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(a), &d)).To(Succeed())
		g.Expect(d.Status.ExpiresAt.Time).To(BeTemporally("~", before.Add(24*time.Hour), time.Second))
	}, timeout, poll).Should(Succeed())
	// Beyond the server's maxTTL it is refused.
	out, err = exec.Command(os.Getenv("ORDERLY_BIN"), "db", "extend", "app", "--by", "72h", "-n", "e2e-db-team-a",
		"--kubeconfig", devcluster.KubeconfigPath(clusterName)).CombinedOutput()
	g.Expect(err).To(HaveOccurred())
	g.Expect(string(out)).To(ContainSubstring("maxTTL"))

	// Deleting the namespace (connection still open) drops the database and frees the namespace.
	g.Expect(c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "e2e-db-team-a"}})).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "e2e-db-team-a"}, &corev1.Namespace{}))
	}, timeout, poll).Should(BeTrue())
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	g.Expect(err).NotTo(HaveOccurred())
	defer admin.Close(ctx)
	var n int
	g.Expect(admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", a.Status.Database).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(0))
	g.Expect(admin.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", a.Status.Role).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(0))
	g.Expect(admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", b.Status.Database).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(1), "team B's database is untouched")

	// Expiry in the real cluster: a short ttl drops the database and removes the Secret.
	g.Expect(c.Create(ctx, &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "e2e-db-team-b", Name: "brief"},
		Spec: datav1alpha1.DevDatabaseSpec{ServerRef: "e2e-pg", TTL: metav1.Duration{Duration: 10 * time.Second}}})).To(Succeed())
	brief := waitDevDBReason(g, c, "e2e-db-team-b", "brief", "Ready")
	waitDevDBReason(g, c, "e2e-db-team-b", "brief", "Expired")
	g.Expect(admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", brief.Status.Database).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(0))
	err = c.Get(ctx, client.ObjectKey{Namespace: "e2e-db-team-b", Name: "brief"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())

	// The manager never logged a password.
	logs, err := os.ReadFile(os.TempDir() + "/orderly-e2e-manager.log")
	g.Expect(err).NotTo(HaveOccurred())
	for _, sec := range []*corev1.Secret{&secA, &secB} {
		g.Expect(strings.Contains(string(logs), string(sec.Data[datav1alpha1.SecretKeyPassword]))).To(BeFalse())
	}
	g.Expect(strings.Contains(string(logs), pg.Password)).To(BeFalse())
}
