//go:build e2e

package e2e

import (
	"context"
	"database/sql"
	"os"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/testing/testmysql"
)

// openDSN opens the Secret's Go DSN (one connection, so a killed session shows).
func openDSN(dsn string) (*sql.DB, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	cfg.Logger = &gomysql.NopLogger{}
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	return db, nil
}

// TestDevDatabaseOnRealMariaDB: a DatabaseServer with engine mysql; a DevDatabase's
// Secret logs in to the real MariaDB with its DSN and works in its database, and
// reaches no other; a second one, with init SQL from a ConfigMap, a ReadOnly user and
// a secretTemplate, is seeded and its reader logs in with the rendered DSN, reads and
// cannot write; deleting a DevDatabase kills its session and drops database and user.
func TestDevDatabaseOnRealMariaDB(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := dataClient(t)
	maria, err := testmysql.Start()
	g.Expect(err).NotTo(HaveOccurred(), "starting MariaDB")
	t.Cleanup(maria.Close)

	const ns = "e2e-mysql-team"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	adminSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "e2e-maria-admin"},
		StringData: map[string]string{"username": maria.Username, "password": maria.Password}}
	g.Expect(c.Create(ctx, adminSecret)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), adminSecret) })
	server := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "e2e-maria"}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: datav1alpha1.EngineMySQL, Host: maria.Host, Port: maria.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "e2e-maria-admin"},
	}}
	g.Expect(c.Create(ctx, server)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), server) })

	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "schema"}, Data: map[string]string{
		"init.sql": "CREATE TABLE products (id INT AUTO_INCREMENT PRIMARY KEY, name VARCHAR(50) NOT NULL);\nINSERT INTO products (name) VALUES ('tea'), ('coffee');\n",
	}})).To(Succeed())
	start := time.Now()
	g.Expect(c.Create(ctx, &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"},
		Spec: datav1alpha1.DevDatabaseSpec{ServerRef: "e2e-maria"}})).To(Succeed())
	g.Expect(c.Create(ctx, &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "other"},
		Spec: datav1alpha1.DevDatabaseSpec{
			ServerRef:      "e2e-maria",
			Users:          []datav1alpha1.DevDatabaseUser{{Name: "reporting", Access: datav1alpha1.UserAccessReadOnly}},
			SecretTemplate: map[string]string{"GO_DSN": "{{.Username}}:{{.Password}}@tcp({{.Host}}:{{.Port}})/{{.Database}}"},
			Init:           &datav1alpha1.DevDatabaseInit{ConfigMapRef: datav1alpha1.ConfigMapKeyReference{Name: "schema", Key: "init.sql"}},
		}})).To(Succeed())
	app := waitDevDBReason(g, c, ns, "app", "Ready")
	other := waitDevDBReason(g, c, ns, "other", "Ready")
	g.Expect(meta.IsStatusConditionTrue(other.Status.Conditions, datav1alpha1.ConditionInitialized)).To(BeTrue())
	t.Logf("two MariaDB DevDatabases ready (one seeded, with a user) in %s", time.Since(start).Round(time.Millisecond))

	// The ReadOnly user logs in with its rendered DSN, reads the seeded table, and
	// cannot write.
	var reporting corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other-reporting"}, &reporting)).To(Succeed())
	reader, err := openDSN(string(reporting.Data["GO_DSN"]))
	g.Expect(err).NotTo(HaveOccurred())
	defer reader.Close()
	var products int
	g.Expect(reader.QueryRowContext(ctx, "SELECT COUNT(*) FROM products").Scan(&products)).To(Succeed())
	g.Expect(products).To(Equal(2))
	_, err = reader.ExecContext(ctx, "INSERT INTO products (name) VALUES ('cake')")
	g.Expect(err).To(MatchError(ContainSubstring("denied")))
	g.Expect(len(app.Status.Role)).To(BeNumerically("<=", 32))

	var sec, otherSec corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "app"}, &sec)).To(Succeed())
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "other"}, &otherSec)).To(Succeed())
	g.Expect(string(sec.Data[datav1alpha1.SecretKeyUsername])).To(Equal(app.Status.Role))
	g.Expect(string(sec.Data[datav1alpha1.SecretKeyURI])).To(HavePrefix("mysql://"))
	g.Expect(string(sec.Data[datav1alpha1.SecretKeyJDBCURL])).To(HavePrefix("jdbc:mysql://"))

	conn, err := openDSN(string(sec.Data[datav1alpha1.SecretKeyDSN]))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	for _, stmt := range []string{"CREATE TABLE orders (id INT AUTO_INCREMENT PRIMARY KEY, total DECIMAL(8,2))", "INSERT INTO orders (total) VALUES (9.99)"} {
		_, err := conn.ExecContext(ctx, stmt)
		g.Expect(err).NotTo(HaveOccurred(), stmt)
	}
	var total string
	g.Expect(conn.QueryRowContext(ctx, "SELECT total FROM orders").Scan(&total)).To(Succeed())
	g.Expect(total).To(Equal("9.99"))
	// Not another DevDatabase's database.
	_, err = conn.ExecContext(ctx, "CREATE TABLE `"+other.Status.Database+"`.stolen (id INT)")
	g.Expect(err).To(MatchError(ContainSubstring("denied")))

	g.Eventually(func(g Gomega) {
		var s datav1alpha1.DatabaseServer
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "e2e-maria"}, &s)).To(Succeed())
		g.Expect(s.Status.Reachable).To(BeTrue())
		g.Expect(s.Status.ServerVersion).To(ContainSubstring("MariaDB"))
	}, timeout, poll).Should(Succeed())

	// Deleting the DevDatabase kills the open session and drops database and user.
	g.Expect(c.Delete(ctx, app)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(app), &datav1alpha1.DevDatabase{}))
	}, timeout, poll).Should(BeTrue())
	g.Expect(conn.PingContext(ctx)).NotTo(Succeed(), "the user's session survived the drop")
	again, err := openDSN(string(sec.Data[datav1alpha1.SecretKeyDSN]))
	g.Expect(err).NotTo(HaveOccurred())
	defer again.Close()
	g.Expect(again.PingContext(ctx)).NotTo(Succeed(), "the dropped user can still log in")
	admin, err := maria.Admin("")
	g.Expect(err).NotTo(HaveOccurred())
	defer admin.Close()
	var n int
	g.Expect(admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", app.Status.Database).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(0))
	g.Expect(admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM mysql.user WHERE User = ?", app.Status.Role).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(0))
	g.Expect(admin.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", other.Status.Database).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(1), "the other DevDatabase's database is untouched")

	// The manager never logged a password.
	logs, err := os.ReadFile(managerLog)
	g.Expect(err).NotTo(HaveOccurred())
	for _, s := range []*corev1.Secret{&sec, &otherSec, &reporting} {
		g.Expect(strings.Contains(string(logs), string(s.Data[datav1alpha1.SecretKeyPassword]))).To(BeFalse())
	}
	g.Expect(strings.Contains(string(logs), maria.Password)).To(BeFalse())
}
