//go:build e2e

package attack

import (
	"context"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/testing/tests3"
)

// managerToken is the bearer token the manager runs with (its ServiceAccount's), one
// of the credentials that must never reach a host a user names.
func managerToken(t *testing.T) string {
	t.Helper()
	cfg, err := clientcmd.LoadFromFile(env.ManagerKubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, a := range cfg.AuthInfos {
		if a.Token != "" {
			return a.Token
		}
	}
	t.Fatal("no token in the manager's kubeconfig")
	return ""
}

// BackupVerification: a real S3 store (versitygw) holds team-a's and team-b's dumps;
// one PostgreSQL is behind attack-bv-shared (both teams) and attack-bv-b-only. Mallory
// restores onto the server that does not allow her, names team-b's credentials
// Secret, and points the source at a host she controls: the manager sends there her
// own access key's signature and nothing else (never team-b's keys, the database
// admin's password or the manager's own token).
func TestAttackBackupVerification(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	pg, pgAdmin := startPostgres(t)
	drainOnCleanup(t, &datav1alpha1.DatabaseServerList{})
	shared := databaseServer(t, pg, "attack-bv-shared", teamA, teamB)
	bOnly := databaseServer(t, pg, "attack-bv-b-only", teamB)
	store, err := tests3.Start(ctx)
	if err != nil {
		t.Fatalf("starting versitygw: %v", err)
	}
	t.Cleanup(func() { _ = store.Close() })
	g.Expect(store.CreateBucket(ctx, "backups")).To(Succeed())
	g.Expect(store.Put(ctx, "backups", "shop/db.sql", []byte("CREATE TABLE orders (id int);\nINSERT INTO orders VALUES (1), (2);\n"))).To(Succeed())

	storeCreds := map[string]string{datav1alpha1.S3AccessKeyIDKey: store.AccessKey, datav1alpha1.S3SecretAccessKeyKey: store.SecretKey}
	// Both teams' own access to the store (the controls).
	create(t, admin, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "s3"}, StringData: storeCreds})
	create(t, admin, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "s3"}, StringData: storeCreds})
	// Keys mallory made for her own host, and team-b's keys to something else.
	mallorys := map[string]string{datav1alpha1.S3AccessKeyIDKey: "MALLORYACCESSKEY0001", datav1alpha1.S3SecretAccessKeyKey: "mallory-secret-access-key", datav1alpha1.S3SessionTokenKey: "mallory-session-token"}
	create(t, attacker, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "s3-mallory"}, StringData: mallorys})
	bobsPrivate := map[string]string{datav1alpha1.S3AccessKeyIDKey: "BOBPRIVATEACCESSKEY1", datav1alpha1.S3SecretAccessKeyKey: "bob-private-secret-access-key", datav1alpha1.CACertKey: "bob-private-ca"}
	create(t, victim, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamB, Name: "bob-private"}, StringData: bobsPrivate})
	neverLeave := map[string]string{
		"team-b's access key":                 bobsPrivate[datav1alpha1.S3AccessKeyIDKey],
		"team-b's secret key":                 bobsPrivate[datav1alpha1.S3SecretAccessKeyKey],
		"the database admin's password":       pg.Password,
		"the manager's token":                 managerToken(t),
		"the store's secret key":              store.SecretKey,
		"her own secret key (SigV4 signs it)": mallorys[datav1alpha1.S3SecretAccessKeyKey],
	}

	drainOnCleanup(t, &datav1alpha1.BackupVerificationList{})
	bv := func(ns, name, server, endpoint, creds string, mutate ...func(*datav1alpha1.S3BackupSource)) *datav1alpha1.BackupVerification {
		b := &datav1alpha1.BackupVerification{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: datav1alpha1.BackupVerificationSpec{
			Source: datav1alpha1.BackupSource{S3: &datav1alpha1.S3BackupSource{Endpoint: endpoint, Insecure: true, Bucket: "backups", Prefix: "shop/",
				CredentialsSecretRef: datav1alpha1.LocalSecretKeyReference{Name: creds}}},
			Target:             datav1alpha1.BackupTarget{ServerRef: server},
			MaxRestoreDuration: metav1.Duration{Duration: time.Minute},
			Checks:             datav1alpha1.BackupChecks{Tables: []datav1alpha1.TableCheck{{Name: "orders", MinRows: 2}}},
		}}
		for _, m := range mutate {
			m(b.Spec.Source.S3)
		}
		c := attacker
		if ns == teamB {
			c = victim
		}
		create(t, c, b)
		return b
	}
	ready := func(g Gomega, b *datav1alpha1.BackupVerification, reason string) {
		waitCondition(g, b, func() []metav1.Condition { return b.Status.Conditions }, "Ready", reason)
	}
	throwaways := func(g Gomega) int {
		return count(g, pgAdmin, `SELECT count(*) FROM pg_database WHERE datname LIKE 'orderly\_%'`)
	}

	// Controls: each team verifies its backups on a server that allows it.
	mine := bv(teamA, "mine", shared.Name, store.Endpoint, "s3")
	bobs := bv(teamB, "bobs", bOnly.Name, store.Endpoint, "s3")
	ready(g, mine, "Passed")
	ready(g, bobs, "Passed")

	t.Run("a target server that does not allow her namespace", func(t *testing.T) {
		g := NewWithT(t)
		host := startCaptureT(t, nil)
		b := bv(teamA, "sneak", bOnly.Name, host.URL, "s3-mallory")
		ready(g, b, "TargetNotAllowed")
		g.Expect(host.requests()).To(BeEmpty(), "the source was read for a run that may not happen")
		g.Expect(throwaways(g)).To(BeZero())
	})

	t.Run("team-b's credentials and CA Secrets", func(t *testing.T) {
		g := NewWithT(t)
		host := startCaptureT(t, nil)
		creds := bv(teamA, "borrowed-creds", shared.Name, host.URL, "bob-private")
		ca := bv(teamA, "borrowed-ca", shared.Name, host.URL, "s3-mallory", func(s *datav1alpha1.S3BackupSource) {
			s.CASecretRef = &datav1alpha1.LocalSecretKeyReference{Name: "bob-private"}
		})
		for _, b := range []*datav1alpha1.BackupVerification{creds, ca} {
			ready(g, b, "CredentialsUnavailable")
			g.Expect(b.Status.LastRun.Message).To(ContainSubstring("does not exist in this namespace"))
		}
		g.Expect(host.requests()).To(BeEmpty())
	})

	t.Run("a dump that runs commands on the manager's machine", func(t *testing.T) {
		g := NewWithT(t)
		dir := t.TempDir()
		shell, out, copied := filepath.Join(dir, "shell"), filepath.Join(dir, "out"), filepath.Join(dir, "copied")
		dump := "CREATE TABLE orders (id int);\nINSERT INTO orders VALUES (1), (2);\n" +
			"\\unrestrict guessed\n\\! touch " + shell + "\n\\o " + out + "\nSELECT 1;\n\\copy (SELECT 1) TO '" + copied + "'\n"
		g.Expect(store.Put(ctx, "backups", "evil/db.sql", []byte(dump))).To(Succeed())
		b := bv(teamA, "evil-dump", shared.Name, store.Endpoint, "s3", func(s *datav1alpha1.S3BackupSource) { s.Prefix = "evil/" })
		g.Eventually(func(g Gomega) {
			get(g, b)
			g.Expect(b.Status.LastRun).NotTo(BeNil())
			g.Expect(b.Status.LastRun.Backup).NotTo(BeNil(), "the dump was not restored: %s", b.Status.LastRun.Message)
		}, timeout, poll).Should(Succeed())
		t.Logf("the dump's run: %s %s: %s", b.Status.LastRun.Result, b.Status.LastRun.Reason, b.Status.LastRun.Message)
		for _, f := range []string{shell, out, copied} {
			g.Expect(f).NotTo(BeAnExistingFile(), "a meta-command of the dump ran on the manager's machine")
		}
		g.Expect(throwaways(g)).To(BeZero())
	})

	t.Run("a source endpoint on a host she controls", func(t *testing.T) {
		g := NewWithT(t)
		host := startCaptureT(t, nil) // answers 404 to everything: a bucket that is not there
		b := bv(teamA, "exfil", shared.Name, host.URL, "s3-mallory")
		g.Eventually(func(g Gomega) {
			get(g, b)
			g.Expect(b.Status.LastRun).NotTo(BeNil())
		}, timeout, poll).Should(Succeed())
		g.Expect(host.requests()).NotTo(BeEmpty())
		// What arrived is signed with her own key, and carries her own session token
		// (she wrote both); nothing else of anyone's.
		credential := regexp.MustCompile(`Credential=([^/]+)/`)
		for _, a := range host.headerValues("Authorization") {
			m := credential.FindStringSubmatch(a)
			g.Expect(m).NotTo(BeNil(), a)
			g.Expect(m[1]).To(Equal(mallorys[datav1alpha1.S3AccessKeyIDKey]))
		}
		neverContains(g, host, neverLeave)
		for _, r := range host.requests() {
			g.Expect(strings.ToLower(r.Header.Get("Authorization"))).NotTo(HavePrefix("bearer"))
		}
		g.Expect(throwaways(g)).To(BeZero())
		g.Expect(managerLogContains(g, mallorys[datav1alpha1.S3SecretAccessKeyKey])).To(BeFalse())
	})
}
