//go:build e2e

package attack

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// DevDatabase: one PostgreSQL behind two DatabaseServers, attack-shared (team-a and
// team-b) and attack-b-only. Mallory asks for a database on the server that does not
// allow her, reaches for team-b's database with her own credentials, has Orderly
// write its connection Secret over one it did not make, runs init SQL that reaches for
// the admin's rights, and looks for the admin's credentials in what she can read.
func TestAttackDevDatabase(t *testing.T) {
	ctx := context.Background()
	pg, pgAdmin := startPostgres(t)
	drainOnCleanup(t, &datav1alpha1.DatabaseServerList{})
	shared := databaseServer(t, pg, "attack-shared", teamA, teamB)
	bOnly := databaseServer(t, pg, "attack-b-only", teamB)
	drainOnCleanup(t, &datav1alpha1.DevDatabaseList{})

	devdb := func(c client.Client, ns, name, server string, mutate ...func(*datav1alpha1.DevDatabaseSpec)) *datav1alpha1.DevDatabase {
		d := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: datav1alpha1.DevDatabaseSpec{ServerRef: server}}
		for _, m := range mutate {
			m(&d.Spec)
		}
		create(t, c, d)
		return d
	}
	ready := func(g Gomega, d *datav1alpha1.DevDatabase, reason string) metav1.Condition {
		return waitCondition(g, d, func() []metav1.Condition { return d.Status.Conditions }, datav1alpha1.ConditionReady, reason)
	}
	databaseExists := func(g Gomega, d *datav1alpha1.DevDatabase) bool {
		return count(g, pgAdmin, "SELECT count(*) FROM pg_database WHERE datname = $1", databaseOf(d)) == 1
	}
	secret := func(g Gomega, ns, name string) *corev1.Secret {
		var s corev1.Secret
		g.ExpectWithOffset(1, admin.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &s)).To(Succeed())
		return &s
	}

	// Team-b's database, made by bob on the server only team-b may use.
	bobs := devdb(victim, teamB, "orders", bOnly.Name)
	ready(NewWithT(t), bobs, "Ready")
	mine := devdb(attacker, teamA, "mine", shared.Name)
	ready(NewWithT(t), mine, "Ready")

	t.Run("a server that does not allow her namespace", func(t *testing.T) {
		g := NewWithT(t)
		sneak := devdb(attacker, teamA, "sneak", bOnly.Name)
		c := ready(g, sneak, "NamespaceNotAllowed")
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(databaseExists(g, sneak)).To(BeFalse())
		g.Expect(apierrors.IsNotFound(admin.Get(ctx, client.ObjectKeyFromObject(sneak), &corev1.Secret{}))).To(BeTrue())
		// Control: the same server serves team-b (bob's database is there).
		g.Expect(databaseExists(g, bobs)).To(BeTrue())
	})

	t.Run("another team's database with her own credentials", func(t *testing.T) {
		g := NewWithT(t)
		sec := secret(g, teamA, mine.Name)
		// Control: her credentials open her database.
		conn, err := connectAs(ctx, sec, "")
		g.Expect(err).NotTo(HaveOccurred())
		_, err = conn.Exec(ctx, "CREATE TABLE notes (t text)")
		g.Expect(err).NotTo(HaveOccurred())
		_ = conn.Close(ctx)
		get(g, bobs)
		_, err = connectAs(ctx, sec, bobs.Status.Database)
		g.Expect(err).To(MatchError(ContainSubstring("permission denied for database")))
	})

	t.Run("a connection Secret over one Orderly did not make", func(t *testing.T) {
		g := NewWithT(t)
		theirs := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "payments-credentials"},
			StringData: map[string]string{"password": "a teammate's, not Orderly's"}}
		create(t, admin, theirs)
		// Orderly's labels, forged: anyone who may create Secrets may write them.
		forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "forged",
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, datav1alpha1.DevDatabaseLabel: "forged"}},
			StringData: map[string]string{"password": "forged labels"}}
		create(t, attacker, forged)
		for _, target := range []*corev1.Secret{theirs, forged} {
			before := snap(g, target)
			d := devdb(attacker, teamA, target.Name+"-db", shared.Name, func(s *datav1alpha1.DevDatabaseSpec) { s.SecretName = target.Name })
			ready(g, d, "SecretConflict")
			unchanged(g, target, before)
		}
		// Control: a Secret of a free name is written (the database "mine" above).
		g.Expect(secret(g, teamA, mine.Name).Data).To(HaveKey(datav1alpha1.SecretKeyPassword))
	})

	t.Run("init SQL that reaches for the admin's rights", func(t *testing.T) {
		g := NewWithT(t)
		marker := filepath.Join(os.TempDir(), "attack-copy-to-program")
		sqls := map[string]string{
			"superuser":  "CREATE ROLE mallory_root SUPERUSER LOGIN PASSWORD 'x'",
			"escalate":   "ALTER ROLE CURRENT_USER SUPERUSER",
			"program":    "COPY (SELECT 1) TO PROGRAM 'touch " + marker + "'",
			"other-data": "CREATE TABLE stolen AS SELECT * FROM pg_authid",
			"ok":         "CREATE TABLE seeded (id int); INSERT INTO seeded VALUES (1), (2)",
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "init-sql"}, Data: sqls}
		create(t, attacker, cm)
		dbs := map[string]*datav1alpha1.DevDatabase{}
		for key := range sqls {
			dbs[key] = devdb(attacker, teamA, "init-"+key, shared.Name, func(s *datav1alpha1.DevDatabaseSpec) {
				s.Init = &datav1alpha1.DevDatabaseInit{ConfigMapRef: datav1alpha1.ConfigMapKeyReference{Name: cm.Name, Key: key}}
			})
		}
		for key, d := range dbs {
			reason := "InitFailed"
			if key == "ok" {
				reason = "InitSucceeded"
			}
			waitCondition(g, d, func() []metav1.Condition { return d.Status.Conditions }, datav1alpha1.ConditionInitialized, reason)
		}
		g.Expect(count(g, pgAdmin, "SELECT count(*) FROM pg_roles WHERE rolname = 'mallory_root'")).To(BeZero())
		g.Expect(count(g, pgAdmin, "SELECT count(*) FROM pg_roles WHERE rolname LIKE 'orderly\\_%' AND rolname <> $1 AND (rolsuper OR rolcreaterole OR rolcreatedb)", pg.Username)).To(BeZero())
		g.Expect(marker).NotTo(BeAnExistingFile())
		// Control: the tenant's own SQL ran, in her database.
		ok := dbs["ok"]
		conn, err := connectAs(ctx, secret(g, teamA, ok.Name), "")
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close(ctx)
		var n int
		g.Expect(conn.QueryRow(ctx, "SELECT count(*) FROM seeded").Scan(&n)).To(Succeed())
		g.Expect(n).To(Equal(2))
	})

	t.Run("the admin's credentials never reach her namespace", func(t *testing.T) {
		g := NewWithT(t)
		var secrets corev1.SecretList
		g.Expect(attacker.List(ctx, &secrets, client.InNamespace(teamA))).To(Succeed())
		var events string
		for _, s := range secrets.Items {
			for k, v := range s.Data {
				g.Expect(string(v)).NotTo(ContainSubstring(pg.Password), "Secret %s key %s", s.Name, k)
				if k == datav1alpha1.SecretKeyUsername {
					g.Expect(string(v)).NotTo(Equal(pg.Username))
				}
			}
		}
		events = eventText(g, teamA)
		var list datav1alpha1.DevDatabaseList
		g.Expect(attacker.List(ctx, &list, client.InNamespace(teamA))).To(Succeed())
		for _, d := range list.Items {
			for _, c := range d.Status.Conditions {
				events += c.Message + "\n"
			}
		}
		for _, s := range []string{pg.Password, pg.Username, shared.Spec.AdminCredentialsSecretRef.Name} {
			g.Expect(events).NotTo(ContainSubstring(s))
		}
		g.Expect(managerLogContains(g, pg.Password)).To(BeFalse())
		// Control: what she can read does let her in (her own role, not the admin's).
		sec := secret(g, teamA, mine.Name)
		g.Expect(string(sec.Data[datav1alpha1.SecretKeyUsername])).To(Equal(databaseOf(mine)))
	})
}
