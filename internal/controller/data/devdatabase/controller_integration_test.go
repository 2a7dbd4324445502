//go:build integration

package devdatabase

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/testing/testpg"
)

var seq atomic.Int64

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

// newNamespace creates a namespace with labels for one test.
func newNamespace(t *testing.T, lbls map[string]string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniq("devdb"), Labels: lbls}}
	NewWithT(t).Expect(k.Create(context.Background(), ns)).To(Succeed())
	return ns.Name
}

// newServer registers srv as a DatabaseServer, with its admin Secret in the
// manager's namespace.
func newServer(t *testing.T, srv *testpg.Server, mutate func(*datav1alpha1.DatabaseServerSpec)) *datav1alpha1.DatabaseServer {
	t.Helper()
	return registerServer(t, datav1alpha1.EnginePostgres, srv.Host, srv.Port, srv.Username, srv.Password, mutate)
}

func newDevDB(t *testing.T, ns, name, server string, mutate func(*datav1alpha1.DevDatabaseSpec)) *datav1alpha1.DevDatabase {
	t.Helper()
	d := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Spec: datav1alpha1.DevDatabaseSpec{ServerRef: server}}
	if mutate != nil {
		mutate(&d.Spec)
	}
	NewWithT(t).Expect(k.Create(context.Background(), d)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), d) })
	return d
}

func getDevDB(g Gomega, d *datav1alpha1.DevDatabase) *datav1alpha1.DevDatabase {
	var got datav1alpha1.DevDatabase
	g.Expect(k.Get(context.Background(), client.ObjectKeyFromObject(d), &got)).To(Succeed())
	return &got
}

// waitReason waits until the DevDatabase's Ready condition has reason.
func waitReason(t *testing.T, d *datav1alpha1.DevDatabase, reason string) *datav1alpha1.DevDatabase {
	t.Helper()
	var got *datav1alpha1.DevDatabase
	NewWithT(t).Eventually(func(g Gomega) {
		got = getDevDB(g, d)
		c := meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	}, timeout, poll).Should(Succeed())
	return got
}

func secretOf(g Gomega, ns, name string) map[string]string {
	var sec corev1.Secret
	g.Expect(k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &sec)).To(Succeed())
	out := map[string]string{}
	for k, v := range sec.Data {
		out[k] = string(v)
	}
	return out
}

// connectAs connects with the uri in a connection Secret, optionally to another database.
func connectAs(ctx context.Context, data map[string]string, database string) (*pgx.Conn, error) {
	cfg, err := pgx.ParseConfig(data[datav1alpha1.SecretKeyURI])
	if err != nil {
		return nil, err
	}
	if database != "" {
		cfg.Database = database
	}
	return pgx.ConnectConfig(ctx, cfg)
}

func adminConn(t *testing.T, srv *testpg.Server) *pgx.Conn {
	t.Helper()
	c, err := pgx.Connect(context.Background(), srv.URL("postgres"))
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

func exists(t *testing.T, srv *testpg.Server, catalog, column, name string) bool {
	t.Helper()
	var n int
	err := adminConn(t, srv).QueryRow(context.Background(), "SELECT count(*) FROM "+catalog+" WHERE "+column+" = $1", name).Scan(&n)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return n > 0
}

func databaseExists(t *testing.T, srv *testpg.Server, name string) bool {
	return exists(t, srv, "pg_database", "datname", name)
}

func roleExists(t *testing.T, srv *testpg.Server, name string) bool {
	return exists(t, srv, "pg_roles", "rolname", name)
}

func eventsFor(g Gomega, d *datav1alpha1.DevDatabase) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(k.List(context.Background(), &list, client.InNamespace(d.Namespace))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if e.Regarding.UID == d.UID {
			out = append(out, e)
		}
	}
	return out
}

func isolatedDatabasesWithConnectionSecrets(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	a := newDevDB(t, ns, "alpha", s.Name, nil)
	beta := newDevDB(t, ns, "beta", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.SecretName = "beta-conn" })

	ga := waitReason(t, a, ReasonReady)
	gb := waitReason(t, beta, ReasonReady)
	g.Expect(ga.Status.Phase).To(Equal(datav1alpha1.PhaseReady))
	g.Expect(ga.Status.Database).To(Equal("orderly_" + strings.ReplaceAll(string(ga.UID), "-", "")))
	g.Expect(ga.Status.ExpiresAt.Time).To(BeTemporally("~", ga.CreationTimestamp.Add(24*time.Hour), time.Second))
	g.Expect(gb.Status.SecretName).To(Equal("beta-conn"))

	sa := secretOf(g, ns, "alpha")
	sb := secretOf(g, ns, "beta-conn")
	g.Expect(sa).To(HaveKey(datav1alpha1.SecretKeyHost))
	g.Expect(sa[datav1alpha1.SecretKeyPort]).To(Equal(fmt.Sprint(b.port)))
	g.Expect(sa[datav1alpha1.SecretKeyDatabase]).To(Equal(ga.Status.Database))
	g.Expect(sa[datav1alpha1.SecretKeyUsername]).To(Equal(ga.Status.Role))
	g.Expect(sa[datav1alpha1.SecretKeyJDBCURL]).To(HavePrefix(b.jdbcScheme))
	g.Expect(sa[datav1alpha1.SecretKeyPassword]).NotTo(BeEmpty())

	// Each role works in its own database.
	ca, err := b.connect(ctx, sa, "")
	g.Expect(err).NotTo(HaveOccurred())
	defer ca.Close()
	g.Expect(ca.Exec(ctx, "CREATE TABLE t (id int); INSERT INTO t VALUES (1)")).To(Succeed())

	// ...and cannot connect to another's.
	_, err = b.connect(ctx, sa, gb.Status.Database)
	g.Expect(err).To(MatchError(ContainSubstring(b.deniedDatabase)))
	_, err = b.connect(ctx, sb, ga.Status.Database)
	g.Expect(err).To(MatchError(ContainSubstring(b.deniedDatabase)))

	// Marked as Orderly's with the owner's UID (PostgreSQL: the database's comment
	// orderly.dev/owner-uid=<uid>; MySQL: Orderly's record in orderly.owners).
	g.Expect(b.ownerOf(t, ga.Status.Database)).To(Equal(string(ga.UID)))

	// The server reports itself.
	g.Eventually(func(g Gomega) {
		var got datav1alpha1.DatabaseServer
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(s), &got)).To(Succeed())
		g.Expect(got.Status.Reachable).To(BeTrue())
		g.Expect(got.Status.ServerVersion).NotTo(BeEmpty())
		g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, datav1alpha1.ConditionReady)).To(BeTrue())
	}, timeout, poll).Should(Succeed())

	// Passwords are in the Secret only: not in status or Events.
	g.Eventually(func(g Gomega) { g.Expect(eventsFor(g, ga)).NotTo(BeEmpty()) }, timeout, poll).Should(Succeed())
	for _, e := range eventsFor(g, ga) {
		g.Expect(e.Note).NotTo(ContainSubstring(sa[datav1alpha1.SecretKeyPassword]))
	}
	g.Expect(fmt.Sprintf("%+v", getDevDB(g, a).Status)).NotTo(ContainSubstring(sa[datav1alpha1.SecretKeyPassword]))
}

func secretDeletedIsRecreatedWithNewPassword(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "app", s.Name, nil)
	waitReason(t, d, ReasonReady)
	old := secretOf(g, ns, "app")
	g.Expect(k.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}})).To(Succeed())
	var fresh map[string]string
	g.Eventually(func(g Gomega) {
		fresh = secretOf(g, ns, "app")
		g.Expect(fresh[datav1alpha1.SecretKeyPassword]).NotTo(Equal(old[datav1alpha1.SecretKeyPassword]))
	}, timeout, poll).Should(Succeed())
	c, err := b.connect(ctx, fresh, "")
	g.Expect(err).NotTo(HaveOccurred())
	c.Close()
	_, err = b.connect(ctx, old, "")
	g.Expect(err).To(HaveOccurred())
}

// A template is cloned with its rows, and the clone is the DevDatabase's own. On
// PostgreSQL the clone waits while someone is connected to the template
// (TemplateInUse: CREATE DATABASE ... TEMPLATE refuses); MySQL copies tables and
// rows, which needs nobody to leave, so there the clone is made at once.
func templateCloneAndTemplateInUse(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	tmpl := strings.ReplaceAll(uniq("seed"), "-", "_")
	b.admin(t, "CREATE DATABASE "+tmpl)
	seed := b.adminSession(t, tmpl)
	g.Expect(seed.Exec(ctx, "CREATE TABLE customers (id int primary key, name text); INSERT INTO customers VALUES (1, 'Ada'), (2, 'Grace')")).To(Succeed())
	t.Cleanup(func() { _ = b.adminSession(t, "").Exec(context.Background(), "DROP DATABASE IF EXISTS "+tmpl) })

	s := b.newServer(t, func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.Templates = []datav1alpha1.DatabaseTemplate{{Name: "seed", Database: tmpl}}
	})
	ns := newNamespace(t, nil)

	d := newDevDB(t, ns, "clone", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.Template = "seed" })
	if b.templateInUse {
		// While someone is connected to the template, the clone waits and says why.
		got := waitReason(t, d, ReasonTemplateInUse)
		g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhasePending))
	}
	seed.Close()

	waitReason(t, d, ReasonReady)
	c, err := b.connect(ctx, secretOf(g, ns, "clone"), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()
	n, err := c.Int(ctx, "SELECT count(*) FROM customers")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(n).To(Equal(2))
	g.Expect(c.Exec(ctx, "INSERT INTO customers VALUES (3, 'Barbara')")).To(Succeed())

	// Unknown template names are reported.
	bad := newDevDB(t, ns, "bad-template", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.Template = "nope" })
	got := waitReason(t, bad, ReasonTemplateNotFound)
	g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhaseFailed))
}

// poke makes the controller reconcile now, as `kubectl annotate` would; the time
// tests move the clock and then poke.
func poke(t *testing.T, d *datav1alpha1.DevDatabase) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{"test.orderly.dev/poke":%q}}}`, time.Now().Format(time.RFC3339Nano)))
	NewWithT(t).Expect(k.Patch(context.Background(), d.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

// setTTL changes a DevDatabase's ttl as a person (or `orderly db extend`) would.
func setTTL(t *testing.T, d *datav1alpha1.DevDatabase, ttl time.Duration) {
	t.Helper()
	patch := []byte(fmt.Sprintf(`{"spec":{"ttl":%q}}`, ttl))
	NewWithT(t).Expect(k.Patch(context.Background(), d.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
}

func reasonsOf(g Gomega, d *datav1alpha1.DevDatabase) []string {
	reasons := []string{}
	for _, e := range eventsFor(g, d) {
		reasons = append(reasons, e.Reason)
	}
	return reasons
}

func expiryWarnsThenDropsAndExtensionRecreates(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "short", s.Name, nil)
	got := waitReason(t, d, ReasonReady)
	db, created := got.Status.Database, got.CreationTimestamp.Time
	g.Expect(got.Status.ExpiresAt.Time).To(Equal(created.Add(24 * time.Hour)))
	g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, datav1alpha1.ConditionExpiringSoon)).To(BeTrue())
	c, err := b.connect(ctx, secretOf(g, ns, "short"), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close()

	// 61 minutes before expiry: nothing yet.
	clk.Set(t, created.Add(23*time.Hour-time.Minute))
	poke(t, d)
	g.Consistently(func(g Gomega) {
		g.Expect(meta.IsStatusConditionFalse(getDevDB(g, d).Status.Conditions, datav1alpha1.ConditionExpiringSoon)).To(BeTrue())
		g.Expect(reasonsOf(g, got)).NotTo(ContainElement(ReasonExpiringSoon))
	}, time.Second, poll).Should(Succeed())

	// Within the last hour: a Warning Event and the condition, the database untouched.
	clk.Set(t, created.Add(23*time.Hour+30*time.Minute))
	poke(t, d)
	g.Eventually(func(g Gomega) {
		g.Expect(reasonsOf(g, got)).To(ContainElement(ReasonExpiringSoon))
		g.Expect(meta.IsStatusConditionTrue(getDevDB(g, d).Status.Conditions, datav1alpha1.ConditionExpiringSoon)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	g.Expect(b.databaseExists(t, db)).To(BeTrue())

	// Extending (raising the ttl) clears the warning and moves the expiry.
	setTTL(t, d, 48*time.Hour)
	g.Eventually(func(g Gomega) {
		cur := getDevDB(g, d)
		g.Expect(cur.Status.ExpiresAt.Time).To(Equal(created.Add(48 * time.Hour)))
		g.Expect(meta.IsStatusConditionFalse(cur.Status.Conditions, datav1alpha1.ConditionExpiringSoon)).To(BeTrue())
		g.Expect(cur.Status.Phase).To(Equal(datav1alpha1.PhaseReady))
	}, timeout, poll).Should(Succeed())

	// At the new expiry: connections terminated, database and role dropped, Secret removed.
	clk.Set(t, created.Add(48*time.Hour))
	poke(t, d)
	waitReason(t, d, ReasonExpired)
	g.Expect(getDevDB(g, d).Status.Phase).To(Equal(datav1alpha1.PhaseExpired))
	g.Expect(b.databaseExists(t, db)).To(BeFalse())
	g.Expect(b.roleExists(t, got.Status.Role)).To(BeFalse())
	err = k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "short"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
	g.Expect(c.Ping(ctx)).NotTo(Succeed(), "the open connection was terminated")
	g.Eventually(func(g Gomega) { g.Expect(reasonsOf(g, got)).To(ContainElement(ReasonExpired)) }, timeout, poll).Should(Succeed())

	// Raising the ttl afterwards brings a new, empty database.
	setTTL(t, d, 72*time.Hour)
	waitReason(t, d, ReasonReady)
	g.Expect(b.databaseExists(t, db)).To(BeTrue())
	fresh, err := b.connect(ctx, secretOf(g, ns, "short"), "")
	g.Expect(err).NotTo(HaveOccurred())
	fresh.Close()
}

func deletionDropsAndRetainKeeps(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	del := newDevDB(t, ns, "del", s.Name, nil)
	keep := newDevDB(t, ns, "keep", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) {
		sp.DeletionPolicy = datav1alpha1.DatabaseDeletionPolicyRetain
	})
	gd := waitReason(t, del, ReasonReady)
	gk := waitReason(t, keep, ReasonReady)

	// Secret first, then the DevDatabase: any order works.
	g.Expect(k.Delete(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "del"}})).To(Succeed())
	g.Expect(k.Delete(ctx, del)).To(Succeed())
	g.Expect(k.Delete(ctx, keep)).To(Succeed())
	for _, d := range []*datav1alpha1.DevDatabase{del, keep} {
		g.Eventually(func() bool {
			return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(d), &datav1alpha1.DevDatabase{}))
		}, timeout, poll).Should(BeTrue())
	}
	g.Expect(b.databaseExists(t, gd.Status.Database)).To(BeFalse())
	g.Expect(b.roleExists(t, gd.Status.Role)).To(BeFalse())
	g.Expect(b.databaseExists(t, gk.Status.Database)).To(BeTrue(), "Retain keeps the database")
	g.Expect(b.roleExists(t, gk.Status.Role)).To(BeFalse(), "Retain removes the login role")
	t.Cleanup(func() {
		_ = b.adminSession(t, "").Exec(context.Background(), "DROP DATABASE IF EXISTS "+gk.Status.Database)
	})
}

func neverTouchesWhatIsNotItsOwn(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	ns := newNamespace(t, nil)
	server := uniq("later")
	d := newDevDB(t, ns, "squatted", server, nil)
	got := waitReason(t, d, ReasonServerNotFound)
	// Someone else already has a role with the name Orderly would use.
	// The role's name is in status before the server exists: it is derived from
	// the UID (and the engine, which is not known yet: MySQL's name is another).
	role := got.Status.Role
	if b.engine == datav1alpha1.EngineMySQL {
		_, role = database.NamesFor(string(b.engine), string(got.UID))
	}
	b.createRole(t, role)
	s := b.newServer(t, nil)
	cur := getDevDB(g, d)
	// serverRef cannot change, so create the server under the name the DevDatabase uses.
	_ = cur
	s2 := s.DeepCopy()
	s2.ObjectMeta = metav1.ObjectMeta{Name: server}
	g.Expect(k.Create(ctx, s2)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), s2) })

	waitReason(t, d, ReasonNotOwned)
	g.Expect(k.Delete(ctx, d)).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(d), &datav1alpha1.DevDatabase{}))
	}, timeout, poll).Should(BeTrue())
	g.Expect(b.roleExists(t, role)).To(BeTrue(), "a role Orderly did not create is never dropped")
}

func limitsPerServerAndPerNamespace(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.Limits.MaxDatabases = ptr.To(int32(2))
		sp.Limits.MaxDatabasesPerNamespace = ptr.To(int32(1))
	})
	ns1, ns2, ns3 := newNamespace(t, nil), newNamespace(t, nil), newNamespace(t, nil)
	a := newDevDB(t, ns1, "a", s.Name, nil)
	waitReason(t, a, ReasonReady)
	a2 := newDevDB(t, ns1, "a2", s.Name, nil)
	got := waitReason(t, a2, ReasonLimitExceeded)
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady).Message).To(ContainSubstring("Namespace " + ns1))
	db2 := newDevDB(t, ns2, "b", s.Name, nil)
	waitReason(t, db2, ReasonReady)
	c := newDevDB(t, ns3, "c", s.Name, nil)
	got = waitReason(t, c, ReasonLimitExceeded)
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady).Message).To(ContainSubstring("limit of 2"))

	// A freed slot goes to the oldest waiting DevDatabase.
	g.Expect(k.Delete(ctx, db2)).To(Succeed())
	waitReason(t, a2, ReasonLimitExceeded)
	waitReason(t, c, ReasonReady)
}

func badInputIsRefusedOrReported(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.MaxTTL = metav1.Duration{Duration: 48 * time.Hour}
		sp.AllowedNamespaces = &metav1.LabelSelector{MatchLabels: map[string]string{"databases": "allowed"}}
		// MySQL has no extensions: the API server refuses allowedExtensions on a
		// mysql server.
		if b.engine == datav1alpha1.EnginePostgres {
			sp.AllowedExtensions = []string{"plpgsql", "no_such_extension"}
		}
	})
	ok := newNamespace(t, map[string]string{"databases": "allowed"})
	other := newNamespace(t, nil)

	// Refused by the API server.
	for name, spec := range map[string]datav1alpha1.DevDatabaseSpec{
		"zero-ttl":      {ServerRef: s.Name, TTL: metav1.Duration{}},
		"bad-extension": {ServerRef: s.Name, Extensions: []string{"pg_trgm; DROP DATABASE x"}},
		"bad-policy":    {ServerRef: s.Name, DeletionPolicy: "Forget"},
	} {
		d := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ok, Name: name}, Spec: spec}
		if name == "zero-ttl" {
			d.Spec.TTL = metav1.Duration{Duration: -time.Second}
		}
		err := k.Create(ctx, d)
		g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%s: %v", name, err)
	}

	// Reported in status.
	long := newDevDB(t, ok, "long", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.TTL = metav1.Duration{Duration: 72 * time.Hour} })
	got := waitReason(t, long, ReasonTTLTooLong)
	g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhaseFailed))
	unknown := newDevDB(t, ok, "unknown", "no-such-server", nil)
	waitReason(t, unknown, ReasonServerNotFound)
	denied := newDevDB(t, other, "denied", s.Name, nil)
	waitReason(t, denied, ReasonNamespaceNotAllowed)
	ext := newDevDB(t, ok, "ext", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.Extensions = []string{"no_such_extension"} })
	good := newDevDB(t, ok, "good", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) {
		if b.engine == datav1alpha1.EnginePostgres {
			sp.Extensions = []string{"plpgsql"}
		}
	})
	if b.engine == datav1alpha1.EnginePostgres {
		waitReason(t, ext, ReasonExtensionFailed)
	} else {
		// No allow-list on a mysql server: every extension is refused before the server.
		waitReason(t, ext, ReasonExtensionNotAllowed)
	}
	waitReason(t, good, ReasonReady)

	// serverRef is immutable.
	cur := getDevDB(g, good)
	cur.Spec.ServerRef = "elsewhere"
	g.Expect(apierrors.IsInvalid(k.Update(ctx, cur))).To(BeTrue())
}

func unreachableServerIsReportedAndRetried(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	down := b.throwaway(t)
	g.Expect(down.Stop()).To(Succeed())

	s := down.newServer(t, nil)
	g.Eventually(func(g Gomega) {
		var got datav1alpha1.DatabaseServer
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(s), &got)).To(Succeed())
		g.Expect(got.Status.Reachable).To(BeFalse())
		c := meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReachable)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	}, timeout, poll).Should(Succeed())

	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "patient", s.Name, nil)
	got := waitReason(t, d, ReasonServerUnreachable)
	g.Expect(meta.IsStatusConditionFalse(got.Status.Conditions, datav1alpha1.ConditionServerReachable)).To(BeTrue())

	g.Expect(down.StartAgain()).To(Succeed())
	got = waitReason(t, d, ReasonReady)
	g.Expect(meta.IsStatusConditionTrue(got.Status.Conditions, datav1alpha1.ConditionServerReachable)).To(BeTrue())

	// Deleted while the server is down: kept and reported, then finished once it is back.
	g.Expect(down.Stop()).To(Succeed())
	g.Expect(k.Delete(ctx, d)).To(Succeed())
	// Waited for: a reconcile that saw the server stop before the deletion says
	// ServerUnreachable too, with phase Pending.
	g.Eventually(func(g Gomega) {
		got = getDevDB(g, d)
		g.Expect(meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady).Reason).To(Equal(ReasonServerUnreachable))
		g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhaseDeleting))
	}, timeout, poll).Should(Succeed())
	g.Expect(down.StartAgain()).To(Succeed())
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKeyFromObject(d), &datav1alpha1.DevDatabase{}))
	}, 60*time.Second, poll).Should(BeTrue())
	g.Expect(down.databaseExists(t, got.Status.Database)).To(BeFalse())
}

// TestDevDatabase runs the table: every case on PostgreSQL and on MariaDB.
func TestDevDatabase(t *testing.T) {
	runTable(t, []engineCase{
		{name: "IsolatedDatabasesWithConnectionSecrets", run: isolatedDatabasesWithConnectionSecrets},
		{name: "SecretDeletedIsRecreatedWithNewPassword", run: secretDeletedIsRecreatedWithNewPassword},
		{name: "TemplateCloneAndTemplateInUse", run: templateCloneAndTemplateInUse},
		{name: "ExpiryWarnsThenDropsAndExtensionRecreates", run: expiryWarnsThenDropsAndExtensionRecreates},
		{name: "DeletionDropsAndRetainKeeps", run: deletionDropsAndRetainKeeps},
		{name: "NeverTouchesWhatIsNotItsOwn", run: neverTouchesWhatIsNotItsOwn},
		{name: "LimitsPerServerAndPerNamespace", run: limitsPerServerAndPerNamespace},
		{name: "BadInputIsRefusedOrReported", run: badInputIsRefusedOrReported},
		{name: "ProtectedNamespacesAreRefused", run: protectedNamespacesAreRefused},
		{name: "UnreachableServerIsReportedAndRetried", run: unreachableServerIsReportedAndRetried},
		{name: "UsersAndSecretTemplates", run: usersAndSecretTemplates},
		{name: "BadSecretTemplatesAreReportedWithoutLeaking", run: badSecretTemplatesAreReportedWithoutLeaking},
		{name: "InitRunsOnceAsTheDatabaseRole", run: initRunsOnceAsTheDatabaseRole},
		{name: "InitCannotUseTheAdminsRights", run: initCannotUseTheAdminsRights},
		{name: "InitInterruptedIsSettledFromTheServer", run: initInterruptedIsSettledFromTheServer},
		{name: "DeletionProtection", run: deletionProtection},
		{name: "DeletionProtectedKeepsTheDatabaseInTheFinalizer", run: deletionProtectedKeepsTheDatabaseInTheFinalizer},
		{name: "MaxTTLHoldsWhenTheTTLIsRaisedByHand", run: maxTTLHoldsWhenTheTTLIsRaisedByHand},
		{name: "CredentialsAreReadFromTheManagersNamespaceOnly", run: credentialsAreReadFromTheManagersNamespaceOnly},
		{name: "APasswordWrittenIntoTheSecretIsReplaced", run: aPasswordWrittenIntoTheSecretIsReplaced},
		{name: "StatusAndEventsDoNotNameTheAdmin", run: statusAndEventsDoNotNameTheAdmin},
		{name: "AbandonLetsGoWhenTheServerIsGoneForGood", run: abandonLetsGoWhenTheServerIsGoneForGood},
		{name: "ServerBeingDeletedWaitsForItsDevDatabases", run: serverBeingDeletedWaitsForItsDevDatabases},
		{name: "MetricSeriesGoWithTheirObjects", run: metricSeriesGoWithTheirObjects},
		// Cases of one engine only, and why.
		{name: "TheOwnerCannotHaveTheAdminRunItsCode", run: pgOnly(theOwnerCannotHaveTheAdminRunItsCode), notOn: map[string]string{
			"mariadb": "PostgreSQL's extensions and search_path are what this attack uses; MySQL has neither, and nothing runs as the admin in a user's database (database/mysql TestTheUserReachesOnlyItsOwnDatabase)"}},
		{name: "ExtensionsComeFromTheServersAllowList", run: pgOnly(extensionsComeFromTheServersAllowList), notOn: map[string]string{
			"mariadb": "MySQL has no extensions: the API server refuses allowedExtensions on a mysql server (BadInputIsRefusedOrReported shows ExtensionNotAllowed there)"}},
		{name: "TheOwnerCannotKeepItsDatabasePastItsExpiry", run: pgOnly(theOwnerCannotKeepItsDatabasePastItsExpiry), notOn: map[string]string{
			"mariadb": "MySQL has no VALID UNTIL: the expiry is Orderly's drop alone, which ExpiryWarnsThenDropsAndExtensionRecreates shows"}},
		{name: "HungServersHoldNoWorker", run: pgOnly(hungServersHoldNoWorker), notOn: map[string]string{
			"mariadb": "the stalling and silent servers speak PostgreSQL's protocol (testpg); a hung MariaDB is database/mysql TestAHungServerEndsEachCallAtItsDeadline"}},
		{name: "TheServerIsVerifiedWithItsCA", run: func(t *testing.T, b *backend) {
			// The same checks, each engine with its own TLS server and clients.
			if b.engine == datav1alpha1.EngineMySQL {
				theMariaDBServerIsVerifiedWithItsCA(t, b)
				return
			}
			theServerIsVerifiedWithItsCA(t)
		}},
		{name: "AChangeOfServerIsRefused", run: pgOnly(aChangeOfServerIsRefused), notOn: map[string]string{
			"mariadb": "not done yet at the controller's level; the engine's refusal is database/mysql TestNothingIsDoneOnAnotherServer"}},
	})
}
