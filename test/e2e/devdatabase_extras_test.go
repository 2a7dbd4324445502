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
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/testing/testpg"
)

// TestDevDatabaseUsersInitTemplateAndProtection: on the full cluster, with the
// manager's own RBAC, a DevDatabase with a ReadOnly user, an init ConfigMap and a
// secretTemplate is usable by logging in with the rendered DATABASE_URL; kubectl
// delete is refused while it is deletion-protected, and goes through once lifted.
func TestDevDatabaseUsersInitTemplateAndProtection(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := dataClient(t)
	pg, err := testpg.Start()
	g.Expect(err).NotTo(HaveOccurred(), "starting PostgreSQL")
	t.Cleanup(pg.Close)
	start := time.Now()

	const ns = "e2e-db-extras"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	adminSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "e2e-pg-extras-admin"},
		StringData: map[string]string{"username": pg.Username, "password": pg.Password}}
	g.Expect(c.Create(ctx, adminSecret)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), adminSecret) })
	server := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "e2e-pg-extras"}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: pg.Host, Port: pg.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: adminSecret.Name},
	}}
	g.Expect(c.Create(ctx, server)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), server) })

	g.Expect(c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "schema"}, Data: map[string]string{
		"init.sql": "CREATE TABLE products (id serial PRIMARY KEY, name text NOT NULL);\nINSERT INTO products (name) VALUES ('tea'), ('coffee');\n",
	}})).To(Succeed())
	d := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "shop"}, Spec: datav1alpha1.DevDatabaseSpec{
		ServerRef:         server.Name,
		Users:             []datav1alpha1.DevDatabaseUser{{Name: "reporting", Access: datav1alpha1.UserAccessReadOnly}},
		SecretTemplate:    map[string]string{"DATABASE_URL": "postgres://{{urlquery .Username}}:{{urlquery .Password}}@{{.Host}}:{{.Port}}/{{.Database}}?sslmode=disable"},
		Init:              &datav1alpha1.DevDatabaseInit{ConfigMapRef: datav1alpha1.ConfigMapKeyReference{Name: "schema", Key: "init.sql"}},
		DeletionProtected: true,
	}}
	g.Expect(c.Create(ctx, d)).To(Succeed())
	t.Cleanup(func() {
		_ = c.Patch(context.Background(), d.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"deletionProtected":false}}`)))
		_ = c.Delete(context.Background(), d)
	})
	got := waitDevDBReason(g, c, ns, "shop", "Ready")
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, datav1alpha1.ConditionInitialized)).To(BeTrue())
	t.Logf("DevDatabase with a user, init SQL and a template ready in %s", time.Since(start).Round(time.Millisecond))

	// The ReadOnly user logs in with its rendered DATABASE_URL, reads the seeded
	// table, and cannot write.
	var reporting corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-reporting"}, &reporting)).To(Succeed())
	conn, err := pgx.Connect(ctx, string(reporting.Data["DATABASE_URL"]))
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close(ctx)
	var n int
	g.Expect(conn.QueryRow(ctx, "SELECT count(*) FROM products").Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(2))
	_, err = conn.Exec(ctx, "INSERT INTO products (name) VALUES ('cake')")
	g.Expect(err).To(MatchError(ContainSubstring("permission denied")))

	// kubectl delete is refused by the API server, with how to lift it.
	bins, err := devcluster.EnsureBinaries(ctx, os.Stderr)
	g.Expect(err).NotTo(HaveOccurred())
	kubectl := func(args ...string) (string, error) {
		out, err := exec.Command(bins.Kubectl, append([]string{"--kubeconfig", devcluster.KubeconfigPath(clusterName)}, args...)...).CombinedOutput()
		return string(out), err
	}
	var out string
	g.Eventually(func(g Gomega) {
		out, err = kubectl("delete", "devdatabase", "shop", "-n", ns, "--wait=false")
		g.Expect(err).To(HaveOccurred(), out)
	}, timeout, poll).Should(Succeed())
	g.Expect(out).To(ContainSubstring("DevDatabase " + ns + "/shop is deletion-protected"))
	g.Expect(out).To(ContainSubstring("kubectl patch devdatabase shop -n " + ns))
	g.Expect(conn.Ping(ctx)).To(Succeed(), "the database is still there")

	// Lifted: the deletion goes through, and the drop ends the open session.
	out, err = kubectl("patch", "devdatabase", "shop", "-n", ns, "--type", "merge", "-p", `{"spec":{"deletionProtected":false}}`)
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = kubectl("delete", "devdatabase", "shop", "-n", ns, "--timeout=30s")
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKeyFromObject(d), &datav1alpha1.DevDatabase{}))
	}, timeout, poll).Should(BeTrue())
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	g.Expect(err).NotTo(HaveOccurred())
	defer admin.Close(ctx)
	g.Expect(admin.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE starts_with(rolname, $1)", got.Status.Role).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(0), "the database's roles are gone")
	g.Expect(conn.Ping(ctx)).NotTo(Succeed(), "the user's session was terminated")

	// No password in the manager's log.
	logs, err := os.ReadFile(managerLog)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(strings.Contains(string(logs), string(reporting.Data[datav1alpha1.SecretKeyPassword]))).To(BeFalse())
	t.Logf("whole case in %s", time.Since(start).Round(time.Millisecond))
}
