//go:build e2e

package attack

import (
	"context"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/testing/testpg"
)

// The database capabilities (DevDatabase, SecretRotation's postgresRole,
// BackupVerification) share the platform's side: a real PostgreSQL and DatabaseServers
// whose admin Secret is in the manager's namespace.

// startPostgres starts a throwaway PostgreSQL for one test and connects to it as its
// administrator (who observes the world).
func startPostgres(t *testing.T) (*testpg.Server, *pgx.Conn) {
	t.Helper()
	pg, err := testpg.Start()
	if err != nil {
		t.Fatalf("starting PostgreSQL: %v", err)
	}
	t.Cleanup(pg.Close)
	conn, err := pgx.Connect(context.Background(), pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	return pg, conn
}

// databaseServer registers pg as DatabaseServer name, allowing the namespaces given
// (by their name label, which nobody can forge), its admin Secret in the manager's
// namespace.
func databaseServer(t *testing.T, pg *testpg.Server, name string, allowed ...string) *datav1alpha1.DatabaseServer {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: name + "-admin"},
		StringData: map[string]string{"username": pg.Username, "password": pg.Password}}
	create(t, admin, sec)
	s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: pg.Host, Port: pg.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: sec.Name},
		AllowedNamespaces: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpIn, Values: allowed}}},
	}}
	create(t, admin, s)
	return s
}

// count runs a count(*) query as the administrator.
func count(g Gomega, conn *pgx.Conn, query string, args ...any) int {
	var n int
	g.ExpectWithOffset(1, conn.QueryRow(context.Background(), query, args...).Scan(&n)).To(Succeed())
	return n
}

// databaseOf is the database (and role) name Orderly gives a DevDatabase: its UID.
func databaseOf(d *datav1alpha1.DevDatabase) string {
	return "orderly_" + strings.ReplaceAll(string(d.UID), "-", "")
}

// connectAs logs in with a connection Secret's URI, to database (the Secret's own when "").
func connectAs(ctx context.Context, sec *corev1.Secret, database string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(string(sec.Data[datav1alpha1.SecretKeyURI]))
	if err != nil {
		return nil, err
	}
	if database != "" {
		cfg.Database = database
	}
	return pgx.ConnectConfig(ctx, cfg)
}
