//go:build integration

package devdatabase

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/mysql"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
)

// newConfigMap creates a ConfigMap with one key of SQL.
func newConfigMap(t *testing.T, ns, name, sql string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string]string{"init.sql": sql}}
	NewWithT(t).Expect(k.Create(context.Background(), cm)).To(Succeed())
	return cm
}

func withInit(cm string) func(*datav1alpha1.DevDatabaseSpec) {
	return func(sp *datav1alpha1.DevDatabaseSpec) {
		sp.Init = &datav1alpha1.DevDatabaseInit{ConfigMapRef: datav1alpha1.ConfigMapKeyReference{Name: cm, Key: "init.sql"}}
	}
}

func patchSpec(t *testing.T, d *datav1alpha1.DevDatabase, spec string) {
	t.Helper()
	NewWithT(t).Expect(k.Patch(context.Background(), d.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":`+spec+`}`)))).To(Succeed())
}

func condition(g Gomega, d *datav1alpha1.DevDatabase, typ string) *metav1.Condition {
	c := meta.FindStatusCondition(getDevDB(g, d).Status.Conditions, typ)
	g.Expect(c).NotTo(BeNil(), "no condition %s", typ)
	return c
}

// notLeaked checks that a password appears in no status or Event of d.
func notLeaked(g Gomega, d *datav1alpha1.DevDatabase, passwords ...string) {
	status := fmt.Sprintf("%+v", getDevDB(g, d).Status)
	for _, p := range passwords {
		g.Expect(p).NotTo(BeEmpty())
		g.Expect(status).NotTo(ContainSubstring(p))
		for _, e := range eventsFor(g, d) {
			g.Expect(e.Note).NotTo(ContainSubstring(p))
		}
	}
}

// Extra users log in with their own Secrets and the rights they were given: a
// ReadOnly user reads the owner's tables (present and future) and cannot write, a
// ReadWrite one writes rows; each Secret carries the template's keys rendered with
// its own credentials. A user removed from the list is dropped with its Secret;
// deleting the DevDatabase drops every role and says how many connections it ended.
func usersAndSecretTemplates(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "shop", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) {
		sp.Users = []datav1alpha1.DevDatabaseUser{{Name: "reporting", Access: datav1alpha1.UserAccessReadOnly}, {Name: "app", Access: datav1alpha1.UserAccessReadWrite}}
		sp.SecretTemplate = map[string]string{
			"DATABASE_URL": b.urlTemplate,
			"application.properties": "spring.datasource.url=jdbc:postgresql://{{.Host}}:{{.Port}}/{{.Database}}\n" +
				"spring.datasource.username={{.Username}}\nspring.datasource.password={{.Password}}\n",
		}
	})
	got := waitReason(t, d, ReasonReady)
	g.Expect(got.Status.Users).To(HaveLen(2))
	g.Expect(got.Status.Users[0].SecretName).To(Or(Equal("shop-reporting"), Equal("shop-app")))

	owner := secretOf(g, ns, "shop")
	reporting := secretOf(g, ns, "shop-reporting")
	app := secretOf(g, ns, "shop-app")
	g.Expect(reporting[datav1alpha1.SecretKeyUsername]).To(Equal(b.userRole(got, "reporting")))
	g.Expect(reporting[datav1alpha1.SecretKeyDatabase]).To(Equal(got.Status.Database))
	for _, sec := range []map[string]string{owner, reporting, app} {
		g.Expect(sec["DATABASE_URL"]).To(Equal(fmt.Sprintf(b.urlFormat,
			sec[datav1alpha1.SecretKeyUsername], sec[datav1alpha1.SecretKeyPassword], b.host, b.port, got.Status.Database)))
		g.Expect(sec["application.properties"]).To(ContainSubstring("spring.datasource.password=" + sec[datav1alpha1.SecretKeyPassword] + "\n"))
		g.Expect(sec).To(HaveKey(datav1alpha1.SecretKeyJDBCURL))
	}
	var userSecret corev1.Secret
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-app"}, &userSecret)).To(Succeed())
	g.Expect(metav1.IsControlledBy(&userSecret, got)).To(BeTrue())
	g.Expect(userSecret.Labels).To(HaveKeyWithValue(datav1alpha1.DevDatabaseUserLabel, "app"))

	ownerConn, err := b.connect(ctx, owner, "")
	g.Expect(err).NotTo(HaveOccurred())
	defer ownerConn.Close()
	g.Expect(ownerConn.Exec(ctx, "CREATE TABLE orders (id "+b.serialType+" primary key, total numeric); INSERT INTO orders (total) VALUES (1)")).To(Succeed())

	// The template's own URL works as it is.
	roConn, err := b.connectURL(ctx, reporting["DATABASE_URL"])
	g.Expect(err).NotTo(HaveOccurred())
	defer roConn.Close()
	n, err := roConn.Int(ctx, "SELECT count(*) FROM orders")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(1))
	g.Expect(roConn.Exec(ctx, "INSERT INTO orders (total) VALUES (2)")).To(MatchError(ContainSubstring(b.deniedWrite)))

	rwConn, err := b.connect(ctx, app, "")
	g.Expect(err).NotTo(HaveOccurred())
	defer rwConn.Close()
	g.Expect(rwConn.Exec(ctx, "INSERT INTO orders (total) VALUES (2)")).To(Succeed())
	g.Expect(rwConn.Exec(ctx, "DROP TABLE orders")).To(MatchError(ContainSubstring(b.deniedDrop)))
	// A user cannot reach another DevDatabase's database.
	other := newDevDB(t, ns, "other", s.Name, nil)
	gotOther := waitReason(t, other, ReasonReady)
	_, err = b.connect(ctx, app, gotOther.Status.Database)
	g.Expect(err).To(MatchError(ContainSubstring(b.deniedDatabase)))

	notLeaked(g, d, owner[datav1alpha1.SecretKeyPassword], reporting[datav1alpha1.SecretKeyPassword], app[datav1alpha1.SecretKeyPassword])

	// reporting removed: its role and Secret go, app stays as it was.
	patchSpec(t, d, `{"users":[{"name":"app","access":"ReadWrite"}]}`)
	g.Eventually(func() bool { return b.roleExists(t, b.userRole(got, "reporting")) }, timeout, poll).Should(BeFalse())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "shop-reporting"}, &corev1.Secret{}))
	}, timeout, poll).Should(BeTrue())
	g.Eventually(func(g Gomega) { g.Expect(reasonsOf(g, d)).To(ContainElement(ReasonUserDropped)) }, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) { g.Expect(getDevDB(g, d).Status.Users).To(HaveLen(1)) }, timeout, poll).Should(Succeed())
	g.Expect(secretOf(g, ns, "shop-app")[datav1alpha1.SecretKeyPassword]).To(Equal(app[datav1alpha1.SecretKeyPassword]))
	g.Expect(rwConn.Exec(ctx, "INSERT INTO orders (total) VALUES (3)")).To(Succeed())

	// Deleting drops the database and every role, ending the open sessions, and says how many.
	g.Expect(k.Delete(ctx, d)).To(Succeed())
	waitGone(t, d)
	g.Expect(b.databaseExists(t, got.Status.Database)).To(BeFalse())
	g.Expect(b.roleExists(t, got.Status.Role)).To(BeFalse())
	g.Expect(b.roleExists(t, b.userRole(got, "app"))).To(BeFalse())
	g.Eventually(func(g Gomega) {
		var notes []string
		for _, e := range eventsFor(g, d) {
			if e.Reason == ReasonDropped {
				notes = append(notes, e.Note)
			}
		}
		g.Expect(notes).To(ContainElement(MatchRegexp(`database orderly_\w+ dropped; [2-9] open connection\(s\) terminated`)))
	}, timeout, poll).Should(Succeed())
}

// A secretTemplate that does not parse, or does not render, is refused by the API
// server where it can (keys), and otherwise reported as InvalidSecretTemplate
// without the password reaching status or Events, the Secret keeping its
// standard keys.
func badSecretTemplatesAreReportedWithoutLeaking(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)

	for spec, msg := range map[string]string{
		`{"password":"x"}`:                          "cannot replace the standard keys",
		`{"bad/key":"x"}`:                           "must be Secret keys",
		`{"k":"` + strings.Repeat("x", 4097) + `"}`: "at most 4096 bytes",
	} {
		bad := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "bad"}, Spec: datav1alpha1.DevDatabaseSpec{ServerRef: s.Name}}
		g.Expect(k.Create(ctx, bad)).To(Succeed())
		err := k.Patch(ctx, bad, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"secretTemplate":`+spec+`}}`)))
		g.Expect(err).To(MatchError(ContainSubstring(msg)), spec[:min(len(spec), 40)])
		g.Expect(k.Delete(ctx, bad)).To(Succeed())
		waitGone(t, bad)
	}

	// Not parsed: nothing created until it is corrected.
	d := newDevDB(t, ns, "tmpl", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) {
		sp.SecretTemplate = map[string]string{"HOME": `{{env "HOME"}}`}
	})
	got := waitReason(t, d, ReasonInvalidSecretTemplate)
	g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhaseFailed))
	g.Expect(condition(g, d, datav1alpha1.ConditionReady).Message).To(ContainSubstring(`function "env" not defined`))
	g.Expect(b.databaseExists(t, got.Status.Database)).To(BeFalse())

	patchSpec(t, d, `{"secretTemplate":{"HOME":null,"URL":"{{.Username}}@{{.Host}}"}}`)
	got = waitReason(t, d, ReasonReady)
	sec := secretOf(g, ns, "tmpl")
	g.Expect(sec["URL"]).To(Equal(got.Status.Role + "@" + b.host))
	password := sec[datav1alpha1.SecretKeyPassword]

	// Parses but fails when rendered with the password: the cause is not shown, and
	// the Secret keeps what it had.
	// (Templates refuse range, whose message would have been "range can't iterate
	// over <password>"; an index past the password's end fails at render time alike.)
	patchSpec(t, d, `{"secretTemplate":{"URL":"{{index .Password 1000}}"}}`)
	waitReason(t, d, ReasonInvalidSecretTemplate)
	g.Expect(condition(g, d, datav1alpha1.ConditionReady).Message).To(ContainSubstring("the cause is not shown"))
	g.Consistently(func(g Gomega) {
		notLeaked(g, d, password)
		g.Expect(secretOf(g, ns, "tmpl")[datav1alpha1.SecretKeyPassword]).To(Equal(password))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// The init SQL runs once, as the database's role, with its result in status; it is
// not run again on later reconciles, nor by a reconciler started afresh (a
// restarted manager), which knows only what status says.
func initRunsOnceAsTheDatabaseRole(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	sql := "CREATE TABLE runs (at timestamptz DEFAULT now(), by_role text DEFAULT current_user);\nINSERT INTO runs DEFAULT VALUES;"
	if b.engine == datav1alpha1.EngineMySQL {
		sql = "CREATE TABLE runs (at TIMESTAMP DEFAULT CURRENT_TIMESTAMP, by_role VARCHAR(100));\nINSERT INTO runs (by_role) VALUES (" + b.currentUser + ");"
	}
	cm := newConfigMap(t, ns, "schema", sql)
	d := newDevDB(t, ns, "seeded", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) {
		withInit("schema")(sp)
		sp.Users = []datav1alpha1.DevDatabaseUser{{Name: "ro", Access: datav1alpha1.UserAccessReadOnly}}
	})
	got := waitReason(t, d, ReasonReady)
	c := condition(g, d, datav1alpha1.ConditionInitialized)
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
	g.Expect(c.Reason).To(Equal(ReasonInitSucceeded))
	g.Expect(got.Status.Init.State).To(Equal(datav1alpha1.InitSucceededState))
	g.Expect(got.Status.Init.ResourceVersion).To(Equal(cm.ResourceVersion))
	g.Expect(got.Status.Init.SHA256).To(HaveLen(64))
	g.Expect(got.Status.Init.Transaction).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) { g.Expect(reasonsOf(g, d)).To(ContainElement(ReasonInitSucceeded)) }, timeout, poll).Should(Succeed())

	runs := func() (int, string) {
		conn, err := b.connect(ctx, secretOf(g, ns, "seeded"), "")
		g.Expect(err).NotTo(HaveOccurred())
		defer conn.Close()
		n, err := conn.Int(ctx, "SELECT count(*) FROM runs")
		g.Expect(err).NotTo(HaveOccurred())
		by, err := conn.String(ctx, "SELECT max(by_role) FROM runs")
		g.Expect(err).NotTo(HaveOccurred())
		return n, by
	}
	n, by := runs()
	g.Expect(n).To(Equal(1))
	g.Expect(by).To(Equal(got.Status.Role), "the SQL ran as the database's role")
	// The ReadOnly user reads the table the init SQL made (the role's default privileges).
	ro, err := b.connect(ctx, secretOf(g, ns, "seeded-ro"), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer ro.Close()
	_, err = ro.Int(ctx, "SELECT count(*) FROM runs")
	g.Expect(err).NotTo(HaveOccurred())

	// Later reconciles, a changed ConfigMap, and a reconciler with no memory.
	cm.Data["init.sql"] = "INSERT INTO runs DEFAULT VALUES;"
	g.Expect(k.Update(ctx, cm)).To(Succeed())
	poke(t, d)
	connector := database.Engines{string(datav1alpha1.EnginePostgres): postgres.NewConnector(), string(datav1alpha1.EngineMySQL): mysql.NewConnector()}
	defer connector.Close()
	fresh := &Reconciler{Client: k, APIReader: k, Connector: connector, Clock: clk, Namespace: managerNamespace}
	for range 3 {
		_, err := fresh.Reconcile(ctx, ctrl.Request{NamespacedName: client.ObjectKeyFromObject(d)})
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Consistently(func() int { n, _ := runs(); return n }, 2*time.Second, 200*time.Millisecond).Should(Equal(1))
	g.Expect(getDevDB(g, d).Status.Init.ResourceVersion).To(Equal(got.Status.Init.ResourceVersion))

	// init cannot be changed once set.
	err = k.Patch(ctx, d.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"spec":{"init":{"configMapRef":{"name":"other","key":"init.sql"}}}}`)))
	g.Expect(err).To(MatchError(ContainSubstring("init cannot be changed")))
}

// The init SQL has the database role's rights, never the admin's: creating a
// superuser fails, the whole transaction is rolled back, the failure is reported
// (InitFailed) and the SQL is not run again.
//
// On MySQL, which commits DDL at once, the table the SQL made before the failure
// stays (and the message says so); its rows are rolled back.
func initCannotUseTheAdminsRights(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	evil := uniq("evil")
	evil = strings.ReplaceAll(evil, "-", "_")
	sneaky := "CREATE TABLE planted (id int);\nCREATE ROLE " + evil + " SUPERUSER LOGIN PASSWORD 'x';"
	if b.engine == datav1alpha1.EngineMySQL {
		// An account written straight into the grant table, rather than CREATE USER:
		// MySQL commits implicitly before CREATE USER (as before DDL), which would
		// keep the row before it whatever the privilege check says.
		sneaky = "CREATE TABLE planted (id int);\nINSERT INTO planted VALUES (1);\nINSERT INTO mysql.global_priv (Host, User, Priv) VALUES ('%', '" + evil + "', '{}');"
	}
	newConfigMap(t, ns, "sneaky", sneaky)
	d := newDevDB(t, ns, "sneaky", s.Name, withInit("sneaky"))
	got := waitReason(t, d, ReasonInitFailed)
	g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhaseFailed))
	g.Expect(got.Status.Init.State).To(Equal(datav1alpha1.InitFailedState))
	g.Expect(got.Status.Init.Message).To(MatchRegexp(`must be superuser|permission denied|command denied`))
	c := condition(g, d, datav1alpha1.ConditionInitialized)
	g.Expect(c.Reason).To(Equal(ReasonInitFailed))
	g.Expect(b.roleExists(t, evil)).To(BeFalse())
	conn, err := b.connect(ctx, secretOf(g, ns, "sneaky"), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	n, err := conn.Int(ctx, fmt.Sprintf(b.tableExists, "planted"))
	g.Expect(err).NotTo(HaveOccurred())
	if b.engine == datav1alpha1.EngineMySQL {
		g.Expect(n).To(Equal(1), "MySQL committed the CREATE TABLE at once")
		g.Expect(got.Status.Init.Message).To(ContainSubstring("stays applied"))
		rows, err := conn.Int(ctx, "SELECT count(*) FROM planted")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(rows).To(Equal(0), "the failed run's rows were rolled back")
	} else {
		g.Expect(n).To(Equal(0), "the failed run was rolled back")
	}
	g.Expect(fmt.Sprintf("%+v", got.Status)).NotTo(ContainSubstring(b.username))
	notLeaked(g, d, secretOf(g, ns, "sneaky")[datav1alpha1.SecretKeyPassword], b.password)
	finished := got.Status.Init.FinishedAt
	poke(t, d)
	g.Consistently(func(g Gomega) {
		g.Expect(getDevDB(g, d).Status.Init.FinishedAt).To(Equal(finished))
	}, 2*time.Second, 200*time.Millisecond).Should(Succeed())
}

// A run recorded as Running whose answer was lost (a restart between the SQL and
// the status write) is settled by asking the server about its transaction; the
// SQL itself is not sent again. A ConfigMap that is missing is waited for.
func initInterruptedIsSettledFromTheServer(t *testing.T, b *backend) {
	if b.engine == datav1alpha1.EngineMySQL {
		initInterruptedIsSettledFromTheProcessList(t, b)
		return
	}
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	admin := adminConn(t, pg)
	var committed, aborted string
	g.Expect(admin.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&committed)).To(Succeed())
	tx, err := admin.Begin(ctx)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(tx.QueryRow(ctx, "SELECT pg_current_xact_id()::text").Scan(&aborted)).To(Succeed())
	g.Expect(tx.Rollback(ctx)).To(Succeed())

	for txn, want := range map[string]datav1alpha1.InitState{committed: datav1alpha1.InitSucceededState, aborted: datav1alpha1.InitFailedState} {
		name := uniq("crash")
		d := newDevDB(t, ns, name, s.Name, withInit(name))
		got := waitReason(t, d, ReasonInitSourceNotFound)
		g.Expect(condition(g, d, datav1alpha1.ConditionInitialized).Reason).To(Equal(ReasonInitSourceNotFound))
		// As if a manager had begun the run and stopped before recording its end.
		g.Eventually(func(g Gomega) {
			cur := getDevDB(g, got)
			cur.Status.Init = &datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitRunning, ConfigMap: name, Key: "init.sql", Transaction: txn}
			g.Expect(k.Status().Update(ctx, cur)).To(Succeed())
		}, timeout, poll).Should(Succeed())
		newConfigMap(t, ns, name, "CREATE TABLE ran (id int);")
		poke(t, d)
		g.Eventually(func(g Gomega) {
			in := getDevDB(g, d).Status.Init
			g.Expect(in.State).To(Equal(want))
		}, timeout, poll).Should(Succeed())
		conn, err := b.connect(ctx, secretOf(g, ns, name), "")
		g.Expect(err).NotTo(HaveOccurred())
		n, err := conn.Int(ctx, fmt.Sprintf(b.tableExists, "ran"))
		g.Expect(err).NotTo(HaveOccurred())
		conn.Close()
		g.Expect(n).To(Equal(0), "the SQL was sent again")
		if want == datav1alpha1.InitFailedState {
			g.Expect(getDevDB(g, d).Status.Init.Message).To(ContainSubstring("Interrupted"))
			waitReason(t, d, ReasonInitFailed)
		} else {
			waitReason(t, d, ReasonReady)
		}
	}
}

// On MySQL, which keeps no record of past transactions, a run recorded as Running
// is InitRunning while its session (status.init.transaction, its CONNECTION_ID())
// is in the server's process list, and Failed ("can no longer say") once it is
// not; the SQL is not sent again.
func initInterruptedIsSettledFromTheProcessList(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	name := uniq("crash")
	d := newDevDB(t, ns, name, s.Name, withInit(name))
	got := waitReason(t, d, ReasonInitSourceNotFound)
	// A session of the database's user stands for the run's, still open.
	session, err := b.connect(ctx, secretOf(g, ns, name), "")
	g.Expect(err).NotTo(HaveOccurred())
	id, err := session.String(ctx, "SELECT CAST(CONNECTION_ID() AS CHAR)")
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		cur := getDevDB(g, got)
		cur.Status.Init = &datav1alpha1.DevDatabaseInitStatus{State: datav1alpha1.InitRunning, ConfigMap: name, Key: "init.sql", Transaction: id}
		g.Expect(k.Status().Update(ctx, cur)).To(Succeed())
	}, timeout, poll).Should(Succeed())
	newConfigMap(t, ns, name, "CREATE TABLE ran (id int);")
	poke(t, d)
	waitReason(t, d, ReasonInitRunning)
	g.Expect(getDevDB(g, d).Status.Init.State).To(Equal(datav1alpha1.InitRunning))
	session.Close()
	waitReason(t, d, ReasonInitFailed)
	in := getDevDB(g, d).Status.Init
	g.Expect(in.State).To(Equal(datav1alpha1.InitFailedState))
	g.Expect(in.Message).To(ContainSubstring("Interrupted"))
	g.Expect(in.Message).To(ContainSubstring("can no longer say"))
	conn, err := b.connect(ctx, secretOf(g, ns, name), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer conn.Close()
	n, err := conn.Int(ctx, fmt.Sprintf(b.tableExists, "ran"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(0), "the SQL was sent again")
}

// deletionProtected: the API server refuses the deletion, with a message that says
// how to lift it; lifted, the deletion goes through and the database is dropped.
func deletionProtection(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "precious", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.DeletionProtected = true })
	got := waitReason(t, d, ReasonReady)

	g.Eventually(func(g Gomega) {
		g.Expect(k.Get(ctx, client.ObjectKey{Name: ProtectionPolicyName}, &admissionv1.ValidatingAdmissionPolicy{})).To(Succeed())
		g.Expect(k.Get(ctx, client.ObjectKey{Name: ProtectionPolicyName}, &admissionv1.ValidatingAdmissionPolicyBinding{})).To(Succeed())
		// A dry run goes through admission without deleting.
		err := k.Delete(ctx, got.DeepCopy(), client.DryRunAll)
		g.Expect(err).To(HaveOccurred())
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), err.Error())
	}, timeout, poll).Should(Succeed())
	err := k.Delete(ctx, got.DeepCopy())
	g.Expect(err).To(MatchError(ContainSubstring("DevDatabase " + ns + "/precious is deletion-protected")))
	g.Expect(err).To(MatchError(ContainSubstring(`kubectl patch devdatabase precious -n ` + ns + ` --type merge -p '{"spec":{"deletionProtected":false}}'`)))
	g.Expect(getDevDB(g, d).DeletionTimestamp).To(BeNil())
	g.Expect(b.databaseExists(t, got.Status.Database)).To(BeTrue())

	// An unprotected DevDatabase is not affected.
	plain := newDevDB(t, ns, "plain", s.Name, nil)
	waitReason(t, plain, ReasonReady)
	g.Expect(k.Delete(ctx, plain, client.DryRunAll)).To(Succeed())

	patchSpec(t, d, `{"deletionProtected":false}`)
	g.Eventually(func() error { return k.Delete(ctx, got.DeepCopy()) }, timeout, poll).Should(Succeed())
	waitGone(t, d)
	g.Expect(b.databaseExists(t, got.Status.Database)).To(BeFalse())

	// The manager puts the policy back when it is deleted (on its next pass; here
	// the test applies it as the manager would, the pass being minutes apart).
	g.Expect(applyProtectionPolicy(ctx, k)).To(Succeed())
}

// A protected DevDatabase deleted anyway (here: protected after its deletion began,
// while the server was unreachable) keeps its database until the flag is lifted.
func deletionProtectedKeepsTheDatabaseInTheFinalizer(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "late", s.Name, nil)
	got := waitReason(t, d, ReasonReady)
	// Hold the deletion with a finalizer of the test's, protect, then delete: the
	// policy looks at the object as it was (unprotected) only if the flag is set
	// after the delete; so delete first with the test's finalizer holding it.
	g.Expect(kit.AddFinalizer(ctx, k, k, got, "test.orderly.dev/hold")).To(Succeed())
	// Stop the controller's drop by pointing the server at nothing.
	patchServer := func(port int32) {
		g.Expect(k.Patch(ctx, s.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(fmt.Sprintf(`{"spec":{"port":%d}}`, port))))).To(Succeed())
	}
	patchServer(1)
	g.Expect(k.Delete(ctx, got.DeepCopy())).To(Succeed())
	waitReason(t, d, ReasonServerUnreachable)
	patchSpec(t, d, `{"deletionProtected":true}`)
	// The controller has seen the flag (its status is of that generation) before the
	// server is back.
	g.Eventually(func(g Gomega) {
		cur := getDevDB(g, d)
		c := meta.FindStatusCondition(cur.Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.ObservedGeneration).To(Equal(cur.Generation))
	}, timeout, poll).Should(Succeed())
	patchServer(b.port)
	waitReason(t, d, ReasonDeletionProtected)
	g.Consistently(func() bool { return b.databaseExists(t, got.Status.Database) }, 2*time.Second, 200*time.Millisecond).Should(BeTrue())

	patchSpec(t, d, `{"deletionProtected":false}`)
	g.Eventually(func() bool { return b.databaseExists(t, got.Status.Database) }, timeout, poll).Should(BeFalse())
	g.Expect(kit.RemoveFinalizer(ctx, k, k, getDevDB(g, d), "test.orderly.dev/hold")).To(Succeed())
	waitGone(t, d)
}

// The API server refuses users it cannot serve: bad or duplicate names, unknown
// access, too many, and a Secret name that would not leave room for <name>-<user>.
func TestUsersAreValidatedByTheAPIServer(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, nil)
	long := strings.Repeat("a", 237)
	many := `[` + strings.TrimSuffix(strings.Repeat(`{"name":"u","access":"ReadOnly"},`, 1), ",")
	for i := range 8 {
		many += fmt.Sprintf(`,{"name":"u%d","access":"ReadOnly"}`, i)
	}
	many += `]`
	for spec, msg := range map[string]string{
		`{"serverRef":"s","users":[{"name":"Reader","access":"ReadOnly"}]}`:                              "spec.users[0].name",
		`{"serverRef":"s","users":[{"name":"abcdefghijklmnopq","access":"ReadOnly"}]}`:                   "spec.users[0].name",
		`{"serverRef":"s","users":[{"name":"a","access":"ReadOnly"},{"name":"a","access":"ReadWrite"}]}`: "Duplicate value",
		`{"serverRef":"s","users":[{"name":"a","access":"Admin"}]}`:                                      "Unsupported value",
		`{"serverRef":"s","users":` + many + `}`:                                                         "must have at most 8 items",
		`{"serverRef":"s","secretName":"` + long + `","users":[{"name":"a","access":"ReadOnly"}]}`:       "at most 236 characters",
		`{"serverRef":"s","init":{"configMapRef":{"name":"cm","key":"bad/key"}}}`:                        "spec.init.configMapRef.key",
	} {
		u := fmt.Sprintf(`{"apiVersion":"data.orderly.dev/v1alpha1","kind":"DevDatabase","metadata":{"namespace":%q,"name":"bad"},"spec":%s}`, ns, spec)
		obj := &datav1alpha1.DevDatabase{}
		g.Expect(json.Unmarshal([]byte(u), obj)).To(Succeed(), spec)
		err := k.Create(ctx, obj)
		g.Expect(err).To(MatchError(ContainSubstring(msg)), spec[:min(len(spec), 60)])
	}
}
