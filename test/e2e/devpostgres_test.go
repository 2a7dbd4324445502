//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// readSamples decodes a config/samples file, with its local PostgreSQL port replaced.
func readSamples(t *testing.T, path string, port int32) []*unstructured.Unstructured {
	t.Helper()
	b, err := os.ReadFile(path)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	b = bytes.ReplaceAll(b, []byte("port: 55432"), []byte("port: "+strconv.Itoa(int(port))))
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	var out []*unstructured.Unstructured
	for {
		u := &unstructured.Unstructured{}
		err := dec.Decode(&u.Object)
		if errors.Is(err, io.EOF) {
			return out
		}
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// TestDevPostgresServesTheSamples: what `make run` does for DevDatabases. `orderly
// dev postgres up` starts a local PostgreSQL and writes its admin Secret; the
// samples' DatabaseServer becomes Reachable and their DevDatabases (one cloned from
// the template the command seeded) become Ready.
func TestDevPostgresServesTheSamples(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := dataClient(t)
	bin := os.Getenv("ORDERLY_BIN")

	dir, err := os.MkdirTemp("", "orderly-e2e-devpg-")
	g.Expect(err).NotTo(HaveOccurred())
	l, err := net.Listen("tcp", "127.0.0.1:0")
	g.Expect(err).NotTo(HaveOccurred())
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	pgFlags := []string{"--dir", dir, "--port", strconv.Itoa(int(port))}
	devpg := func(args ...string) (string, error) {
		out, err := exec.Command(bin, append(append([]string{"dev", "postgres"}, args...), pgFlags...)...).CombinedOutput()
		return string(out), err
	}
	t.Cleanup(func() {
		out, err := devpg("down")
		if err != nil {
			t.Logf("orderly dev postgres down: %v\n%s", err, out)
		}
	})

	out, err := devpg("up", "--name", clusterName)
	g.Expect(err).NotTo(HaveOccurred(), out)
	g.Expect(out).To(ContainSubstring("runs on 127.0.0.1:" + strconv.Itoa(int(port))))
	// A second up is harmless and keeps the password.
	out, err = devpg("up", "--name", clusterName)
	g.Expect(err).NotTo(HaveOccurred(), out)
	out, err = devpg("status")
	g.Expect(err).NotTo(HaveOccurred(), out)

	// In the manager's namespace, the only one Orderly reads a DatabaseServer's Secrets from.
	var admin corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "postgres-admin"}, &admin)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), &admin) })

	var objs []*unstructured.Unstructured
	for _, f := range []string{"../../config/samples/data_v1alpha1_databaseserver.yaml", "../../config/samples/data_v1beta1_devdatabase.yaml"} {
		objs = append(objs, readSamples(t, f, port)...)
	}
	for _, o := range objs {
		g.Expect(c.Create(ctx, o)).To(Succeed(), o.GetName())
	}
	t.Cleanup(func() {
		// DevDatabases first: the server's finalizer holds it until they are gone.
		for i := len(objs) - 1; i >= 0; i-- {
			_ = c.Delete(context.Background(), objs[i])
		}
	})

	g.Eventually(func(g Gomega) {
		var s datav1alpha1.DatabaseServer
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "shared-postgres"}, &s)).To(Succeed())
		g.Expect(meta.IsStatusConditionTrue(s.Status.Conditions, datav1alpha1.ConditionReachable)).To(BeTrue(), "%+v", s.Status.Conditions)
	}, timeout, poll).Should(Succeed())
	waitDevDBReason(g, c, "default", "checkout-tests", "Ready")
	seeded := waitDevDBReason(g, c, "default", "checkout-seeded", "Ready")

	// The clone holds the template's rows and is reachable with its Secret.
	var sec corev1.Secret
	g.Expect(c.Get(ctx, client.ObjectKey{Namespace: "default", Name: "checkout-seeded-db"}, &sec)).To(Succeed())
	g.Expect(string(sec.Data[datav1alpha1.SecretKeyPort])).To(Equal(strconv.Itoa(int(port))))
	conn, err := connectWithSecret(ctx, &sec, "")
	g.Expect(err).NotTo(HaveOccurred())
	var n int
	g.Expect(conn.QueryRow(ctx, "SELECT count(*) FROM products").Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(3))
	_ = conn.Close(ctx)

	// Deleting the server first: it waits for its DevDatabases, whose databases are dropped.
	var server datav1alpha1.DatabaseServer
	g.Expect(c.Get(ctx, client.ObjectKey{Name: "shared-postgres"}, &server)).To(Succeed())
	g.Expect(c.Delete(ctx, &server)).To(Succeed())
	g.Eventually(func(g Gomega) {
		g.Expect(c.Get(ctx, client.ObjectKey{Name: "shared-postgres"}, &server)).To(Succeed())
		cond := meta.FindStatusCondition(server.Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(cond).NotTo(BeNil())
		g.Expect(cond.Reason).To(Equal("InUse"))
		g.Expect(cond.Message).To(ContainSubstring("default/checkout-seeded"))
	}, timeout, poll).Should(Succeed())
	for _, name := range []string{"checkout-tests", "checkout-seeded"} {
		g.Expect(c.Delete(ctx, &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}})).To(Succeed())
	}
	g.Eventually(func() bool {
		return apierrors.IsNotFound(c.Get(ctx, client.ObjectKey{Name: "shared-postgres"}, &datav1alpha1.DatabaseServer{}))
	}, timeout, poll).Should(BeTrue())
	password := string(admin.Data["password"])
	pg, err := pgx.Connect(ctx, "postgres://orderly_admin:"+password+"@127.0.0.1:"+strconv.Itoa(int(port))+"/postgres?sslmode=disable")
	g.Expect(err).NotTo(HaveOccurred())
	defer pg.Close(ctx)
	g.Expect(pg.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", seeded.Status.Database).Scan(&n)).To(Succeed())
	g.Expect(n).To(Equal(0))
	g.Expect(strings.HasPrefix(seeded.Status.Database, "orderly_")).To(BeTrue())
}
