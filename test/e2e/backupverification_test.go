//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/localpg"
	"orderly.dev/orderly/internal/testing/testpg"
	"orderly.dev/orderly/internal/testing/tests3"
	"orderly.dev/orderly/test/launch"
)

// TestBackupVerification: the manager, as its own ServiceAccount, restores real
// pg_dump backups from a real S3 store (versitygw) into throwaway databases on a real
// PostgreSQL: a good backup passes with its evidence; a corrupted one, one older than
// maxAge and one whose check returns the wrong value fail with their reasons; a
// manager killed mid-restore leaves no throwaway database once it is back.
func TestBackupVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	c := dataClient(t)
	pg, err := testpg.Start()
	g.Expect(err).NotTo(HaveOccurred(), "starting PostgreSQL")
	t.Cleanup(pg.Close)
	s3s, err := tests3.Start(ctx)
	g.Expect(err).NotTo(HaveOccurred(), "starting versitygw")
	t.Cleanup(func() { _ = s3s.Close() })
	g.Expect(s3s.CreateBucket(ctx, "backups")).To(Succeed())

	// A real database, dumped with real pg_dump.
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	g.Expect(err).NotTo(HaveOccurred())
	defer admin.Close(ctx)
	_, err = admin.Exec(ctx, `CREATE DATABASE shop`)
	g.Expect(err).NotTo(HaveOccurred())
	shop, err := pgx.Connect(ctx, pg.URL("shop"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = shop.Exec(ctx, `CREATE TABLE orders (id int PRIMARY KEY, total numeric NOT NULL);
INSERT INTO orders SELECT g, g * 2.5 FROM generate_series(1, 2000) g;`)
	g.Expect(err).NotTo(HaveOccurred())
	shop.Close(ctx)
	bin, err := localpg.FindBinDir()
	g.Expect(err).NotTo(HaveOccurred())
	var stderr bytes.Buffer
	cmd := exec.Command(filepath.Join(bin, "pg_dump"), "-Fc", "--no-owner", "--no-privileges", "--dbname="+pg.URL("shop"))
	cmd.Stderr = &stderr
	dump, err := cmd.Output()
	g.Expect(err).NotTo(HaveOccurred(), stderr.String())
	corrupt := append([]byte(nil), dump...)
	for i := len(corrupt) / 3; i < len(corrupt)/3+100; i++ {
		corrupt[i] ^= 0x5a
	}
	put := func(key string, body []byte) {
		g.Expect(s3s.Put(ctx, "backups", key, body)).To(Succeed())
	}
	put("good/shop.dump", dump)
	put("corrupt/shop.dump", corrupt)
	put("old/shop.dump", dump)
	g.Expect(s3s.SetModTime("backups", "old/shop.dump", time.Now().Add(-72*time.Hour))).To(Succeed())
	put("slow/shop.sql", []byte("CREATE TABLE t (a int);\nSELECT pg_sleep(120);\n"))

	const ns = "e2e-backups"
	g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
	adminSecret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "e2e-bv-pg-admin"},
		StringData: map[string]string{"username": pg.Username, "password": pg.Password}}
	g.Expect(c.Create(ctx, adminSecret)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), adminSecret) })
	server := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "e2e-bv-pg"}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: pg.Host, Port: pg.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: adminSecret.Name},
	}}
	g.Expect(c.Create(ctx, server)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), server) })
	g.Expect(c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "s3"},
		StringData: map[string]string{datav1alpha1.S3AccessKeyIDKey: s3s.AccessKey, datav1alpha1.S3SecretAccessKeyKey: s3s.SecretKey}})).To(Succeed())

	bv := func(name, prefix string, mutate func(*datav1alpha1.BackupVerificationSpec)) *datav1alpha1.BackupVerification {
		b := &datav1alpha1.BackupVerification{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: datav1alpha1.BackupVerificationSpec{
			Source: datav1alpha1.BackupSource{S3: &datav1alpha1.S3BackupSource{Endpoint: s3s.Endpoint, Insecure: true, Bucket: "backups", Prefix: prefix,
				CredentialsSecretRef: datav1alpha1.LocalSecretKeyReference{Name: "s3"}}},
			Target:             datav1alpha1.BackupTarget{ServerRef: server.Name},
			MaxAge:             &metav1.Duration{Duration: 26 * time.Hour},
			MaxRestoreDuration: metav1.Duration{Duration: 5 * time.Minute},
			Checks: datav1alpha1.BackupChecks{
				Tables: []datav1alpha1.TableCheck{{Name: "orders", MinRows: 2000}},
				SQL:    []datav1alpha1.SQLCheck{{Name: "max-id", Query: "SELECT max(id) FROM orders", Expect: ptrString("2000")}},
			},
		}}
		if mutate != nil {
			mutate(&b.Spec)
		}
		g.Expect(c.Create(ctx, b)).To(Succeed())
		return b
	}
	lastRun := func(b *datav1alpha1.BackupVerification) *datav1alpha1.BackupVerification {
		var got datav1alpha1.BackupVerification
		g.Eventually(func(g Gomega) {
			g.Expect(c.Get(ctx, client.ObjectKeyFromObject(b), &got)).To(Succeed())
			g.Expect(got.Status.LastRun).NotTo(BeNil())
			g.Expect(got.Status.CurrentRun).To(BeNil())
		}, timeout, poll).Should(Succeed())
		return &got
	}
	throwaways := func() int {
		var n int
		g.Expect(admin.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname LIKE 'orderly\_%'`).Scan(&n)).To(Succeed())
		return n
	}

	good := bv("good", "good/", nil)
	corrupted := bv("corrupt", "corrupt/", nil)
	old := bv("old", "old/", nil)
	wrong := bv("wrong-check", "good/", func(s *datav1alpha1.BackupVerificationSpec) {
		s.Checks.SQL = []datav1alpha1.SQLCheck{{Name: "max-id", Query: "SELECT max(id) FROM orders", Expect: ptrString("1999")}}
	})

	got := lastRun(good)
	g.Expect(got.Status.LastRun.Result).To(Equal(datav1alpha1.RunPassed), got.Status.LastRun.Message)
	g.Expect(got.Status.LastRun.Backup.Key).To(Equal("good/shop.dump"))
	g.Expect(got.Status.LastRun.Backup.SizeBytes).To(Equal(int64(len(dump))))
	g.Expect(got.Status.LastRun.Backup.SHA256).To(HaveLen(64))
	g.Expect(got.Status.LastRun.RestoreDuration).NotTo(BeNil())
	g.Expect(got.Status.LastRun.Checks).To(HaveLen(2))
	g.Expect(got.Status.LastSuccessTime).NotTo(BeNil())

	got = lastRun(corrupted)
	g.Expect(got.Status.LastRun.Result).To(Equal(datav1alpha1.RunFailed))
	g.Expect(got.Status.LastRun.Reason).To(Equal("RestoreFailed"))
	g.Expect(got.Status.LastRun.Message).To(ContainSubstring("pg_restore failed"))

	got = lastRun(old)
	g.Expect(got.Status.LastRun.Result).To(Equal(datav1alpha1.RunFailed))
	g.Expect(got.Status.LastRun.Reason).To(Equal("BackupTooOld"))
	g.Expect(got.Status.LastRun.RestoreDuration).To(BeNil())

	got = lastRun(wrong)
	g.Expect(got.Status.LastRun.Result).To(Equal(datav1alpha1.RunFailed))
	g.Expect(got.Status.LastRun.Reason).To(Equal("CheckFailed"))
	g.Expect(got.Status.LastRun.Checks).To(ContainElement(HaveField("Value", "2000")))
	g.Expect(throwaways()).To(BeZero(), "throwaway databases left after the runs")

	// A manager killed (SIGKILL) mid-restore: its replacement drops what it left.
	withoutDefaultManager(t)
	own := func() *launch.Manager {
		m, err := launch.Start(ctx, launch.Options{Bin: managerBin, Kubeconfig: managerKubeconfig, Args: []string{"--leader-elect=false"}, LogPath: managerLog})
		g.Expect(err).NotTo(HaveOccurred())
		return m
	}
	m := own()
	slow := bv("slow", "slow/", func(s *datav1alpha1.BackupVerificationSpec) { s.Checks = datav1alpha1.BackupChecks{} })
	g.Eventually(func(g Gomega) {
		var cur datav1alpha1.BackupVerification
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(slow), &cur)).To(Succeed())
		g.Expect(cur.Status.CurrentRun).NotTo(BeNil())
		g.Expect(throwaways()).To(Equal(1))
	}, timeout, poll).Should(Succeed())
	g.Expect(m.Kill()).To(Succeed())
	m = own()
	t.Cleanup(func() { _ = m.Stop() })
	got = lastRun(slow)
	g.Expect(got.Status.LastRun.Reason).To(Equal("Interrupted"), got.Status.LastRun.Message)
	g.Expect(throwaways()).To(BeZero(), "the killed manager's throwaway database is still there")
	// Gone before its retry would restore the slow dump again.
	g.Expect(c.Delete(ctx, slow)).To(Succeed())
	g.Eventually(func() bool {
		return c.Get(ctx, client.ObjectKeyFromObject(slow), &datav1alpha1.BackupVerification{}) != nil
	}, timeout, poll).Should(BeTrue())
}

func ptrString(s string) *string { return &s }
