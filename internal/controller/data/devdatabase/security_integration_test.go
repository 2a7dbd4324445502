//go:build integration

package devdatabase

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testmysql"
	"orderly.dev/orderly/internal/testing/testpg"
)

// settle deletes the DevDatabases in namespace ns when the test ends and waits
// until they are gone: their finalizers need their server, which the test stops
// afterwards (cleanups run last-registered first).
func settle(t *testing.T, ns string) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		_ = k.DeleteAllOf(ctx, &datav1alpha1.DevDatabase{}, client.InNamespace(ns))
		NewWithT(t).Eventually(func(g Gomega) {
			var list datav1alpha1.DevDatabaseList
			g.Expect(k.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			g.Expect(list.Items).To(BeEmpty())
		}, timeout, poll).Should(Succeed())
	})
}

// startServer starts a PostgreSQL for one test.
func startServer(t *testing.T, opts ...testpg.Option) *testpg.Server {
	t.Helper()
	srv, err := testpg.Start(opts...)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	t.Cleanup(srv.Close)
	return srv
}

func isSuperuser(t *testing.T, srv *testpg.Server, role string) bool {
	t.Helper()
	var super bool
	err := adminConn(t, srv).QueryRow(context.Background(), "SELECT rolsuper FROM pg_roles WHERE rolname = $1", role).Scan(&super)
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
	return super
}

func serverNamed(g Gomega, name string) *datav1alpha1.DatabaseServer {
	var s datav1alpha1.DatabaseServer
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &s)).To(Succeed())
	return &s
}

// serverCondition waits until the DatabaseServer's condition typ has status and reason.
func serverCondition(t *testing.T, name, typ string, status metav1.ConditionStatus, reason string) *metav1.Condition {
	t.Helper()
	var c *metav1.Condition
	NewWithT(t).Eventually(func(g Gomega) {
		c = meta.FindStatusCondition(serverNamed(g, name).Status.Conditions, typ)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(status), c.Message)
		g.Expect(c.Reason).To(Equal(reason), c.Message)
	}, timeout, poll).Should(Succeed())
	return c
}

// sloppyScript is the install script of an extension written as many are: it calls
// a function by its bare name, which the session's search_path resolves.
const sloppyScript = `CREATE FUNCTION sloppy_hello() RETURNS text LANGUAGE sql AS $$ SELECT 'hello' $$;
SELECT lower('Sloppy'::varchar);
`

// The CVE-2018-1058 class. The database's owner plants lower(varchar), which beats
// the built-in lower(text) for a varchar argument, where the admin's session will
// look: the public schema, and a schema named after the admin ("$user" comes first
// on the default search_path). Then it asks for an extension whose install script
// calls lower(varchar). Run as the admin in the owner's database, that would make
// the owner a superuser. The request is refused, and an extension asked for at
// creation is created before the role can log in, in a schema it cannot write.
func theOwnerCannotHaveTheAdminRunItsCode(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := startServer(t, testpg.WithExtension("sloppy", "default_version = '1.0'\nrelocatable = true\n", sloppyScript))
	s := newServer(t, srv, func(sp *datav1alpha1.DatabaseServerSpec) { sp.AllowedExtensions = []string{"sloppy"} })
	ns := newNamespace(t, nil)
	settle(t, ns)
	victim := waitReason(t, newDevDB(t, ns, "victim", s.Name, nil), ReasonReady)

	owner, err := connectAs(ctx, secretOf(g, ns, "victim"), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer owner.Close(ctx)
	escalate := fmt.Sprintf(`RETURNS text LANGUAGE plpgsql AS $$ BEGIN EXECUTE 'ALTER ROLE %s SUPERUSER'; RETURN 'pwned'; END $$`, victim.Status.Role)
	for _, stmt := range []string{
		"CREATE FUNCTION public.lower(varchar) " + escalate,
		"CREATE SCHEMA " + srv.Username,
		"CREATE FUNCTION " + srv.Username + ".lower(varchar) " + escalate,
	} {
		_, err := owner.Exec(ctx, stmt)
		g.Expect(err).NotTo(HaveOccurred(), stmt)
	}
	// Nor can it point the admin's sessions at its schema.
	_, err = owner.Exec(ctx, fmt.Sprintf(`ALTER DATABASE %q SET search_path = public, pg_catalog`, victim.Status.Database))
	g.Expect(err).To(MatchError(ContainSubstring("must be owner")))

	// Now it asks for the extension.
	patch := []byte(`{"spec":{"extensions":["sloppy"]}}`)
	err = k.Patch(ctx, victim.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "extensions changed after creation: %v", err)
	g.Expect(err).To(MatchError(ContainSubstring("extensions cannot be changed")))
	poke(t, victim)
	g.Consistently(func() bool { return isSuperuser(t, srv, victim.Status.Role) }, 3*time.Second, 250*time.Millisecond).Should(BeFalse())

	// Asked for at creation, it is created before anyone has the role's password,
	// in the admin's schema, and the role can use it.
	fresh := waitReason(t, newDevDB(t, ns, "fresh", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.Extensions = []string{"sloppy"} }), ReasonReady)
	c, err := connectAs(ctx, secretOf(g, ns, "fresh"), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer c.Close(ctx)
	var hello, schema string
	g.Expect(c.QueryRow(ctx, "SELECT sloppy_hello()").Scan(&hello)).To(Succeed())
	g.Expect(c.QueryRow(ctx, "SELECT n.nspname FROM pg_extension x JOIN pg_namespace n ON n.oid = x.extnamespace WHERE extname = 'sloppy'").Scan(&schema)).To(Succeed())
	g.Expect(schema).To(Equal(postgres.ExtensionsSchema))
	_, err = c.Exec(ctx, "CREATE FUNCTION extensions.lower(varchar) "+escalate)
	g.Expect(err).To(MatchError(ContainSubstring("permission denied")))
	g.Expect(isSuperuser(t, srv, fresh.Status.Role)).To(BeFalse())
	g.Expect(isSuperuser(t, srv, victim.Status.Role)).To(BeFalse())
}

// Extensions come from the server's allow-list only; none when it is empty.
func extensionsComeFromTheServersAllowList(t *testing.T) {
	s := newServer(t, pg, func(sp *datav1alpha1.DatabaseServerSpec) { sp.AllowedExtensions = []string{"pgcrypto"} })
	none := newServer(t, pg, nil)
	ns := newNamespace(t, nil)
	got := waitReason(t, newDevDB(t, ns, "dblink", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.Extensions = []string{"pgcrypto", "dblink"} }), ReasonExtensionNotAllowed)
	g := NewWithT(t)
	g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhaseFailed))
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady).Message).To(ContainSubstring("dblink"))
	g.Expect(databaseExists(t, pg, got.Status.Database)).To(BeFalse())
	waitReason(t, newDevDB(t, ns, "unlisted", none.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.Extensions = []string{"pgcrypto"} }), ReasonExtensionNotAllowed)
	waitReason(t, newDevDB(t, ns, "listed", s.Name, func(sp *datav1alpha1.DevDatabaseSpec) { sp.Extensions = []string{"pgcrypto"} }), ReasonReady)
}

// The database's owner cannot rewrite Orderly's marker (to keep its database past
// the expiry, or to have it left behind), and its password stops at the expiry.
func theOwnerCannotKeepItsDatabasePastItsExpiry(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	s := newServer(t, pg, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "mine", s.Name, nil)
	got := waitReason(t, d, ReasonReady)
	owner, err := connectAs(ctx, secretOf(g, ns, "mine"), "")
	g.Expect(err).NotTo(HaveOccurred())
	defer owner.Close(ctx)
	for _, comment := range []string{"orderly.dev/retained-from=" + string(got.UID), "orderly.dev/owner-uid=someone-else", "mine"} {
		_, err := owner.Exec(ctx, fmt.Sprintf(`COMMENT ON DATABASE %q IS '%s'`, got.Status.Database, comment))
		g.Expect(err).To(MatchError(ContainSubstring("must be owner")), comment)
	}
	var validUntil time.Time
	g.Expect(adminConn(t, pg).QueryRow(ctx, "SELECT rolvaliduntil FROM pg_roles WHERE rolname = $1", got.Status.Role).Scan(&validUntil)).To(Succeed())
	g.Expect(validUntil).To(BeTemporally("==", got.Status.ExpiresAt.Time))

	clk.Set(t, got.Status.ExpiresAt.Time)
	poke(t, d)
	waitReason(t, d, ReasonExpired)
	g.Expect(databaseExists(t, pg, got.Status.Database)).To(BeFalse())
	g.Expect(roleExists(t, pg, got.Status.Role)).To(BeFalse())
}

// maxTTL is the controller's rule, not only the CLI's: a ttl raised by hand past it
// does not keep the database, and the status says when it goes and why.
func maxTTLHoldsWhenTheTTLIsRaisedByHand(t *testing.T, b *backend) {
	g := NewWithT(t)
	s := b.newServer(t, func(sp *datav1alpha1.DatabaseServerSpec) { sp.MaxTTL = metav1.Duration{Duration: 48 * time.Hour} })
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "forever", s.Name, nil)
	got := waitReason(t, d, ReasonReady)
	created := got.CreationTimestamp.Time

	setTTL(t, d, 96*time.Hour) // kubectl patch, past the server's maxTTL
	g.Eventually(func(g Gomega) {
		cur := getDevDB(g, d)
		g.Expect(cur.Status.ExpiresAt.Time).To(Equal(created.Add(48 * time.Hour)))
		c := meta.FindStatusCondition(cur.Status.Conditions, datav1alpha1.ConditionTTLCapped)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Message).To(ContainSubstring("maxTTL 48h0m0s"))
		g.Expect(cur.Status.Phase).To(Equal(datav1alpha1.PhaseReady))
		g.Expect(reasonsOf(g, cur)).To(ContainElement(ReasonMaxTTL))
	}, timeout, poll).Should(Succeed())

	clk.Set(t, created.Add(48*time.Hour))
	poke(t, d)
	got = waitReason(t, d, ReasonExpired)
	g.Expect(meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionReady).Message).To(ContainSubstring("maxTTL"))
	g.Expect(b.databaseExists(t, got.Status.Database)).To(BeFalse())
}

// A server that stops answering after the login (or never answers) costs each
// reconcile its deadline: the DevDatabases on it say so, and a DevDatabase on a
// healthy server is served meanwhile, though there are more of the former than
// workers (4 in this suite).
func hungServersHoldNoWorker(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	stalling, err := testpg.Stalling()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(stalling.Close)
	silent, err := testpg.Silent()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(silent.Close)
	stuck := newServer(t, &testpg.Server{Host: stalling.Host, Port: stalling.Port, Username: "orderly_admin", Password: "pw"}, nil)
	mute := newServer(t, &testpg.Server{Host: silent.Host, Port: silent.Port, Username: "orderly_admin", Password: "pw"}, nil)
	healthy := newServer(t, pg, nil)
	ns := newNamespace(t, nil)

	var hung []*datav1alpha1.DevDatabase
	for i := range 6 {
		hung = append(hung, newDevDB(t, ns, fmt.Sprintf("hung-%d", i), stuck.Name, nil))
	}
	hung = append(hung, newDevDB(t, ns, "mute", mute.Name, nil))
	start := time.Now()
	ok := newDevDB(t, ns, "ok", healthy.Name, nil)
	NewWithT(t).Eventually(func(g Gomega) {
		c := meta.FindStatusCondition(getDevDB(g, ok).Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Reason).To(Equal(ReasonReady))
	}, 40*time.Second, poll).Should(Succeed())
	t.Logf("the healthy DevDatabase was ready in %s", time.Since(start).Round(time.Millisecond))

	for _, d := range hung {
		got := waitReason(t, d, ReasonServerUnreachable)
		c := meta.FindStatusCondition(got.Status.Conditions, datav1alpha1.ConditionServerReachable)
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
		g.Expect(c.Message).To(ContainSubstring("did not answer in time"))
	}
	// Being deleted, it stays (its database may be there) and says why, rather than
	// holding a worker until the server answers.
	g.Expect(k.Delete(ctx, hung[0])).To(Succeed())
	g.Eventually(func(g Gomega) {
		cur := getDevDB(g, hung[0])
		g.Expect(cur.Status.Phase).To(Equal(datav1alpha1.PhaseDeleting))
		c := meta.FindStatusCondition(cur.Status.Conditions, datav1alpha1.ConditionReady)
		g.Expect(c.Reason).To(Equal(ReasonServerUnreachable))
	}, timeout, poll).Should(Succeed())
	serverCondition(t, stuck.Name, datav1alpha1.ConditionReachable, metav1.ConditionFalse, "Unreachable")
	// Let the test's DevDatabases go (their server never answers).
	for _, d := range hung {
		patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, datav1alpha1.AbandonAnnotation))
		_ = k.Patch(ctx, d.DeepCopy(), client.RawPatch(types.MergePatchType, patch))
	}
}

// Whoever may create a DatabaseServer cannot have Orderly read a Secret in another
// namespace and send its password to a host of their choosing.
func credentialsAreReadFromTheManagersNamespaceOnly(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	catcher, err := testpg.PasswordCatcher()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(catcher.Close)
	team := newNamespace(t, nil)
	victim := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: team, Name: "prod-db"},
		StringData: map[string]string{"username": "app", "password": "team-secret-password"}}
	g.Expect(k.Create(ctx, victim)).To(Succeed())
	// The catcher speaks PostgreSQL's protocol; Orderly must not connect at all,
	// whatever the engine.
	s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("exfil")}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: b.engine, Host: catcher.Host, Port: catcher.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: team, Name: "prod-db"},
	}}
	g.Expect(k.Create(ctx, s)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), s) })
	d := newDevDB(t, newNamespace(t, nil), "app", s.Name, nil)

	g.Consistently(func(g Gomega) {
		g.Expect(catcher.Passwords()).To(BeEmpty(), "Orderly sent the Secret's password to the DatabaseServer's host")
		g.Expect(catcher.Accepted()).To(BeZero(), "Orderly connected to the DatabaseServer's host")
	}, 2*time.Second, poll).Should(Succeed())
	c := serverCondition(t, s.Name, datav1alpha1.ConditionReady, metav1.ConditionFalse, "CredentialsNotAllowed")
	g.Expect(c.Message).To(ContainSubstring(managerNamespace))
	got := waitReason(t, d, ReasonCredentialsNotAllowed)
	// The DevDatabase's users are not told about the platform team's Secrets.
	g.Expect(fmt.Sprintf("%+v", got.Status)).NotTo(ContainSubstring("prod-db"))
}

// With the server's CA, Orderly verifies the server (verify-full) and hands the CA
// to the workloads; with the wrong CA it does not connect; without one, the
// condition TLSVerified warns that the admin password could be intercepted.
func theServerIsVerifiedWithItsCA(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	srv := startServer(t, testpg.WithTLS())
	caSecret := func(pem []byte) string {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: uniq("ca")}, Data: map[string][]byte{"ca.crt": pem}}
		g.Expect(k.Create(ctx, sec)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), sec) })
		return sec.Name
	}
	verified := newServer(t, srv, func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.SSLMode = ""
		sp.CASecretRef = &datav1alpha1.SecretReference{Name: caSecret(srv.CACert)}
	})
	serverCondition(t, verified.Name, datav1alpha1.ConditionReachable, metav1.ConditionTrue, "Reachable")
	serverCondition(t, verified.Name, datav1alpha1.ConditionTLSVerified, metav1.ConditionTrue, "Verified")

	ns := newNamespace(t, nil)
	settle(t, ns)
	waitReason(t, newDevDB(t, ns, "tls", verified.Name, nil), ReasonReady)
	data := secretOf(g, ns, "tls")
	g.Expect(data[datav1alpha1.SecretKeyCACert]).To(Equal(string(srv.CACert)))
	u, err := url.Parse(data[datav1alpha1.SecretKeyURI])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(u.Query().Get("sslmode")).To(Equal("verify-full"))
	// A workload mounts the Secret and points sslrootcert at ca.crt.
	caFile := filepath.Join(t.TempDir(), "ca.crt")
	g.Expect(os.WriteFile(caFile, srv.CACert, 0o600)).To(Succeed())
	q := u.Query()
	q.Set("sslrootcert", caFile)
	u.RawQuery = q.Encode()
	conn, err := pgx.Connect(ctx, u.String())
	g.Expect(err).NotTo(HaveOccurred())
	_ = conn.Close(ctx)

	other, err := testpg.OtherCA()
	g.Expect(err).NotTo(HaveOccurred())
	impostor := newServer(t, srv, func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.SSLMode = ""
		sp.CASecretRef = &datav1alpha1.SecretReference{Namespace: managerNamespace, Name: caSecret(other)}
	})
	c := serverCondition(t, impostor.Name, datav1alpha1.ConditionReachable, metav1.ConditionFalse, "Unreachable")
	g.Expect(c.Message).To(ContainSubstring("certificate"))

	unverified := newServer(t, srv, func(sp *datav1alpha1.DatabaseServerSpec) { sp.SSLMode = "prefer" })
	serverCondition(t, unverified.Name, datav1alpha1.ConditionReachable, metav1.ConditionTrue, "Reachable")
	c = serverCondition(t, unverified.Name, datav1alpha1.ConditionTLSVerified, metav1.ConditionFalse, "Unverified")
	g.Expect(c.Message).To(ContainSubstring("plaintext"))

	// A CA with a mode that would not use it is refused by the API server.
	bad := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("bad")}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: srv.Host, SSLMode: "disable", AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "x"},
		CASecretRef: &datav1alpha1.SecretReference{Name: "y"}}}
	err = k.Create(ctx, bad)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
	g.Expect(err).To(MatchError(ContainSubstring("sslMode must be verify-full")))
}

// Anyone who may create Secrets in a namespace can give them the labels of a
// connection Secret. The shared cache holds their metadata only, trimmed: not
// their data, not their annotations.
func TestTheCacheHoldsNothingOfForgedSecretsButTheirNames(t *testing.T) {
	g := NewWithT(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ns := newNamespace(t, nil)
	big := strings.Repeat("A", 512*1024)
	forged := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "forged",
		Labels:      map[string]string{labels.ManagedBy: labels.ManagedByValue, datav1alpha1.DevDatabaseLabel: "x"},
		Annotations: map[string]string{"note": big[:200*1024]}},
		Data: map[string][]byte{"blob": []byte(big)}}
	g.Expect(k.Create(ctx, forged)).To(Succeed())

	// The cache as the manager builds it from the controller's rules.
	byObject, err := kit.MergeCache(env.Scheme, []kit.Controller{Controller})
	g.Expect(err).NotTo(HaveOccurred())
	c, err := cache.New(env.Config, cache.Options{Scheme: env.Scheme, ByObject: byObject})
	g.Expect(err).NotTo(HaveOccurred())
	go func() { _ = c.Start(ctx) }()
	g.Expect(c.WaitForCacheSync(ctx)).To(BeTrue())

	list := metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	g.Eventually(func(g Gomega) {
		g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
		g.Expect(list.Items).To(HaveLen(1))
	}, timeout, poll).Should(Succeed())
	g.Expect(list.Items[0].Annotations).To(BeEmpty())
	// Even a read of the whole Secret through the cache finds no data.
	var whole corev1.Secret
	g.Eventually(func() error { return c.Get(ctx, client.ObjectKeyFromObject(forged), &whole) }, timeout, poll).Should(Succeed())
	g.Expect(whole.Data).To(BeEmpty())
	g.Expect(whole.Annotations).To(BeEmpty())
}

// A password read back from the connection Secret is used only when it has the
// form Orderly generates; anything else written there is replaced by a new one.
func aPasswordWrittenIntoTheSecretIsReplaced(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	ns := newNamespace(t, nil)
	waitReason(t, newDevDB(t, ns, "app", s.Name, nil), ReasonReady)
	patch := []byte(`{"stringData":{"password":"hunter2'; ALTER ROLE x SUPERUSER; --"}}`)
	g.Expect(k.Patch(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "app"}}, client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	var data map[string]string
	g.Eventually(func(g Gomega) {
		data = secretOf(g, ns, "app")
		g.Expect(data[datav1alpha1.SecretKeyPassword]).To(MatchRegexp(`^[A-Z2-7]{26}$`))
	}, timeout, poll).Should(Succeed())
	c, err := b.connect(ctx, data, "")
	g.Expect(err).NotTo(HaveOccurred(), "the new password is the role's")
	c.Close()
}

// After the DatabaseServer's host changes, Orderly neither creates a new database
// on the new server (orphaning the one on the old) nor "drops" it there and lets
// the DevDatabase go; it says so until someone decides.
func aChangeOfServerIsRefused(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	other := startServer(t)
	s := newServer(t, pg, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "moved", s.Name, nil)
	got := waitReason(t, d, ReasonReady)
	g.Expect(got.Status.ServerIdentity).NotTo(BeEmpty())
	g.Eventually(func(g Gomega) {
		g.Expect(serverNamed(g, s.Name).Status.SystemIdentifier).To(Equal(got.Status.ServerIdentity))
	}, timeout, poll).Should(Succeed())

	// The platform team points the server elsewhere (same credentials there).
	_, err := adminConn(t, other).Exec(ctx, fmt.Sprintf("ALTER ROLE %s PASSWORD '%s'", other.Username, pg.Password))
	g.Expect(err).NotTo(HaveOccurred())
	patch := []byte(fmt.Sprintf(`{"spec":{"port":%d}}`, other.Port))
	g.Expect(k.Patch(ctx, s.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	poke(t, d)
	waitReason(t, d, ReasonServerChanged)
	g.Expect(databaseExists(t, other, got.Status.Database)).To(BeFalse())

	g.Expect(k.Delete(ctx, d)).To(Succeed())
	deleting := func(g Gomega) {
		cur := getDevDB(g, d)
		g.Expect(cur.Status.Phase).To(Equal(datav1alpha1.PhaseDeleting))
		g.Expect(meta.FindStatusCondition(cur.Status.Conditions, datav1alpha1.ConditionReady).Reason).To(Equal(ReasonServerChanged))
	}
	g.Eventually(deleting, timeout, poll).Should(Succeed())
	g.Consistently(deleting, 2*time.Second, poll).Should(Succeed())
	g.Expect(databaseExists(t, pg, got.Status.Database)).To(BeTrue(), "the database on the first server is still there")

	// Pointed back, the deletion completes where the database is.
	patch = []byte(fmt.Sprintf(`{"spec":{"port":%d}}`, pg.Port))
	g.Expect(k.Patch(ctx, s.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	waitGone(t, d)
	g.Expect(databaseExists(t, pg, got.Status.Database)).To(BeFalse())
}

// What the DevDatabase's users read (status, Events) does not name the server's
// admin user or its Secrets, whatever went wrong.
func statusAndEventsDoNotNameTheAdmin(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	wrong := registerServer(t, b.engine, b.host, b.port, b.username, "not-the-password", nil)
	missing := b.newServer(t, func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.AdminCredentialsSecretRef = datav1alpha1.SecretReference{Namespace: managerNamespace, Name: "no-such-admin-secret"}
	})
	ns := newNamespace(t, nil)
	for _, tc := range []struct {
		server *datav1alpha1.DatabaseServer
		reason string
	}{{wrong, ReasonServerUnreachable}, {missing, ReasonCredentialsMissing}} {
		d := newDevDB(t, ns, uniq("app"), tc.server.Name, nil)
		got := waitReason(t, d, tc.reason)
		g.Eventually(func(g Gomega) { g.Expect(reasonsOf(g, got)).To(ContainElement(tc.reason)) }, timeout, poll).Should(Succeed())
		seen := fmt.Sprintf("%+v", got.Status)
		for _, e := range eventsFor(g, got) {
			seen += "\n" + e.Note
		}
		for _, secret := range []string{b.username, tc.server.Spec.AdminCredentialsSecretRef.Name, "not-the-password"} {
			g.Expect(seen).NotTo(ContainSubstring(secret))
		}
		_ = ctx
	}
}

// A DevDatabase whose server is gone for good is let go with the annotation
// data.orderly.dev/abandon, and a Warning Event says what was left behind.
func abandonLetsGoWhenTheServerIsGoneForGood(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	doomed := b.throwaway(t)
	s := doomed.newServer(t, nil)
	ns := newNamespace(t, nil)
	d := newDevDB(t, ns, "orphan", s.Name, nil)
	got := waitReason(t, d, ReasonReady)
	g.Expect(doomed.Stop()).To(Succeed())

	g.Expect(k.Delete(ctx, d)).To(Succeed())
	waitReason(t, d, ReasonServerUnreachable)
	patch := []byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:"true"}}}`, datav1alpha1.AbandonAnnotation))
	g.Expect(k.Patch(ctx, d.DeepCopy(), client.RawPatch(types.MergePatchType, patch))).To(Succeed())
	waitGone(t, d)
	g.Eventually(func(g Gomega) {
		var note string
		for _, e := range eventsFor(g, got) {
			if e.Reason == ReasonAbandoned {
				note = e.Note
			}
		}
		g.Expect(note).To(ContainSubstring(got.Status.Database))
		g.Expect(note).To(ContainSubstring("by hand"))
	}, timeout, poll).Should(Succeed())
	err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orphan"}, &corev1.Secret{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue())
}

// theMariaDBServerIsVerifiedWithItsCA is theServerIsVerifiedWithItsCA on a MariaDB
// that requires TLS (require_secure_transport): with the server's CA Orderly
// verifies it (verify-full) and hands the CA to the workloads, whose DSN and URI
// say so; with the wrong CA it does not connect; with prefer it connects over TLS
// without checking, and TLSVerified says so.
func theMariaDBServerIsVerifiedWithItsCA(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	srv, err := testmysql.Start(testmysql.WithTLS())
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(srv.Close)
	caSecret := func(pem []byte) string {
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: uniq("ca")}, Data: map[string][]byte{"ca.crt": pem}}
		g.Expect(k.Create(ctx, sec)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), sec) })
		return sec.Name
	}
	register := func(mutate func(*datav1alpha1.DatabaseServerSpec)) *datav1alpha1.DatabaseServer {
		return registerServer(t, b.engine, srv.Host, srv.Port, srv.Username, srv.Password, mutate)
	}
	verified := register(func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.SSLMode = ""
		sp.CASecretRef = &datav1alpha1.SecretReference{Name: caSecret(srv.CACert)}
	})
	serverCondition(t, verified.Name, datav1alpha1.ConditionReachable, metav1.ConditionTrue, "Reachable")
	serverCondition(t, verified.Name, datav1alpha1.ConditionTLSVerified, metav1.ConditionTrue, "Verified")

	ns := newNamespace(t, nil)
	settle(t, ns)
	waitReason(t, newDevDB(t, ns, "tls", verified.Name, nil), ReasonReady)
	data := secretOf(g, ns, "tls")
	g.Expect(data[datav1alpha1.SecretKeyCACert]).To(Equal(string(srv.CACert)))
	g.Expect(data[datav1alpha1.SecretKeyURI]).To(ContainSubstring("ssl-mode=VERIFY_IDENTITY"))
	// A workload registers a TLS config with ca.crt under a name of its own and
	// puts it in the DSN's tls=.
	cfg, err := gomysql.ParseDSN(data[datav1alpha1.SecretKeyDSN])
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(cfg.TLSConfig).To(Equal("true"))
	roots := x509.NewCertPool()
	g.Expect(roots.AppendCertsFromPEM([]byte(data[datav1alpha1.SecretKeyCACert]))).To(BeTrue())
	g.Expect(gomysql.RegisterTLSConfig("devdb-test", &tls.Config{RootCAs: roots, ServerName: srv.Host, MinVersion: tls.VersionTLS12})).To(Succeed())
	cfg.TLSConfig = "devdb-test"
	conn, err := openMySQL(ctx, cfg.FormatDSN(), "")
	g.Expect(err).NotTo(HaveOccurred())
	conn.Close()

	other, err := testpg.OtherCA()
	g.Expect(err).NotTo(HaveOccurred())
	impostor := register(func(sp *datav1alpha1.DatabaseServerSpec) {
		sp.SSLMode = ""
		sp.CASecretRef = &datav1alpha1.SecretReference{Namespace: managerNamespace, Name: caSecret(other)}
	})
	c := serverCondition(t, impostor.Name, datav1alpha1.ConditionReachable, metav1.ConditionFalse, "Unreachable")
	g.Expect(c.Message).To(ContainSubstring("certificate"))

	unverified := register(func(sp *datav1alpha1.DatabaseServerSpec) { sp.SSLMode = "prefer" })
	serverCondition(t, unverified.Name, datav1alpha1.ConditionReachable, metav1.ConditionTrue, "Reachable")
	serverCondition(t, unverified.Name, datav1alpha1.ConditionTLSVerified, metav1.ConditionFalse, "Unverified")

	plain := register(func(sp *datav1alpha1.DatabaseServerSpec) { sp.SSLMode = "disable" })
	serverCondition(t, plain.Name, datav1alpha1.ConditionReachable, metav1.ConditionFalse, "Unreachable")
}

// A DevDatabase in a kube-* namespace or in the manager's namespace (where the
// servers' admin Secrets are) gets no database and no Secret, even on a server that
// allows every namespace; the same DevDatabase elsewhere is served (the control).
func protectedNamespacesAreRefused(t *testing.T, b *backend) {
	g := NewWithT(t)
	ctx := context.Background()
	s := b.newServer(t, nil)
	kube := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: uniq("kube-devdb")}}
	g.Expect(k.Create(ctx, kube)).To(Succeed())
	control := newDevDB(t, newNamespace(t, nil), "control", s.Name, nil)
	var refused []*datav1alpha1.DevDatabase
	for _, ns := range []string{kube.Name, managerNamespace} {
		refused = append(refused, newDevDB(t, ns, uniq("protected"), s.Name, nil))
	}
	waitReason(t, control, ReasonReady)
	for _, d := range refused {
		got := waitReason(t, d, ReasonNamespaceNotAllowed)
		g.Expect(got.Status.Phase).To(Equal(datav1alpha1.PhaseFailed))
		g.Expect(condition(g, d, datav1alpha1.ConditionReady).Message).To(ContainSubstring("namespace " + d.Namespace + " is protected"))
		name, _ := database.NamesFor(string(b.engine), string(got.UID))
		g.Expect(b.databaseExists(t, name)).To(BeFalse())
		g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: d.Name}, &corev1.Secret{}))).To(BeTrue())
	}
}
