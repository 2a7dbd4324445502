//go:build integration

package devdatabase

import (
	"context"
	"database/sql"
	"errors"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
	"github.com/jackc/pgx/v5"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/testing/testmysql"
	"orderly.dev/orderly/internal/testing/testpg"
)

// One test table, two engines: each case of engineCases runs against PostgreSQL
// (internal/testing/testpg) and MariaDB (internal/testing/testmysql), as sub-tests named
// <case>/<engine>. A case reaches a server only through its backend, which says
// how each engine does what the case checks (connect with a Secret, look a
// database up, ...). Where a step of a case does not apply to an engine, the
// case says why at that step; a case that does not apply at all says why in
// notOn, and its sub-test is skipped with that reason.

// conn is a session as a connection Secret's user.
type conn interface {
	// Exec runs statements (several, separated by ';', on both engines).
	Exec(ctx context.Context, stmts string) error
	// Int runs a query of one integer.
	Int(ctx context.Context, q string) (int, error)
	// String runs a query of one string.
	String(ctx context.Context, q string) (string, error)
	Ping(ctx context.Context) error
	Close()
}

// backend is one engine of the table.
type backend struct {
	// name names the sub-tests: postgres, mariadb.
	name   string
	engine datav1alpha1.Engine
	host   string
	port   int32
	// admin's credentials.
	username, password string
	// jdbcScheme starts the Secret's jdbcUrl.
	jdbcScheme string
	// deniedDatabase is what the server says to a login into another's database.
	deniedDatabase string
	// connect logs in with a connection Secret's credentials, to its database or to
	// database when set.
	connect func(ctx context.Context, data map[string]string, database string) (conn, error)
	// connectURL logs in with a URL of the engine's own form (a secretTemplate's).
	connectURL func(ctx context.Context, url string) (conn, error)
	// admin runs statements as the admin.
	admin func(t *testing.T, stmts ...string)
	// adminInt runs a query of one integer as the admin.
	adminInt func(t *testing.T, q string, args ...any) int
	// adminSession opens a session as the admin in database.
	adminSession func(t *testing.T, database string) conn
	// ownerOf is the DevDatabase UID Orderly recorded for database ("" when none).
	ownerOf func(t *testing.T, database string) string
	// createRole creates a login role (user) Orderly did not make.
	createRole func(t *testing.T, name string)
	// userRole is the login role of a DevDatabase's extra user.
	userRole func(d *datav1alpha1.DevDatabase, name string) string
	// serialType is an auto-incremented key column's type.
	serialType string
	// tableExists is a query of one integer: 1 when table (a %s) exists in the
	// session's database.
	tableExists string
	// currentUser is the SQL of the session's user, as status.role names it.
	currentUser string
	// urlTemplate is a secretTemplate of a URL the engine's driver takes, and
	// urlFormat what it renders to (user, password, host, port, database).
	urlTemplate, urlFormat string
	// deniedWrite and deniedDrop are what the server says to a write a ReadOnly
	// user may not make, and to a DROP TABLE by a ReadWrite user.
	deniedWrite, deniedDrop string
	// templateInUse: the server's copy refuses a template with open sessions.
	templateInUse bool
	// throwaway starts a server of the engine of the test's own, to stop and start.
	throwaway func(t *testing.T) *downServer
}

// downServer is a server of a test's own, with the backend that reaches it.
type downServer struct {
	*backend
	Stop, StartAgain func() error
}

var (
	pgBackend, mariaBackend *backend
	// backends are the engines of the table, in order.
	backends []*backend
)

func (b *backend) databaseExists(t *testing.T, name string) bool {
	if b.engine == datav1alpha1.EngineMySQL {
		return b.adminInt(t, "SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", name) > 0
	}
	return b.adminInt(t, "SELECT count(*) FROM pg_database WHERE datname = $1", name) > 0
}

func (b *backend) roleExists(t *testing.T, name string) bool {
	if b.engine == datav1alpha1.EngineMySQL {
		return b.adminInt(t, "SELECT COUNT(*) FROM mysql.user WHERE User = ?", name) > 0
	}
	return b.adminInt(t, "SELECT count(*) FROM pg_roles WHERE rolname = $1", name) > 0
}

// newServer registers the backend's server as a DatabaseServer, with its admin
// Secret in the manager's namespace.
func (b *backend) newServer(t *testing.T, mutate func(*datav1alpha1.DatabaseServerSpec)) *datav1alpha1.DatabaseServer {
	t.Helper()
	return registerServer(t, b.engine, b.host, b.port, b.username, b.password, mutate)
}

// engineCase is one row of the table.
type engineCase struct {
	name string
	run  func(t *testing.T, b *backend)
	// notOn gives, per backend name, why the case does not apply there.
	notOn map[string]string
}

// runTable runs every case on every backend.
func runTable(t *testing.T, cases []engineCase) {
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			for _, b := range backends {
				t.Run(b.name, func(t *testing.T) {
					if why, ok := c.notOn[b.name]; ok {
						t.Skip(why)
					}
					c.run(t, b)
				})
			}
		})
	}
}

// pgConn is a pgx session.
type pgConn struct{ c *pgx.Conn }

func (p pgConn) Exec(ctx context.Context, s string) error { _, err := p.c.Exec(ctx, s); return err }
func (p pgConn) Int(ctx context.Context, q string) (int, error) {
	var n int
	err := p.c.QueryRow(ctx, q).Scan(&n)
	return n, err
}

func (p pgConn) String(ctx context.Context, q string) (string, error) {
	var s string
	err := p.c.QueryRow(ctx, q).Scan(&s)
	return s, err
}
func (p pgConn) Ping(ctx context.Context) error { return p.c.Ping(ctx) }
func (p pgConn) Close()                         { _ = p.c.Close(context.Background()) }

// myConn is a one-connection go-sql-driver pool, so that session state carries over.
type myConn struct{ db *sql.DB }

func (m myConn) Exec(ctx context.Context, s string) error {
	_, err := m.db.ExecContext(ctx, s)
	return err
}
func (m myConn) Int(ctx context.Context, q string) (int, error) {
	var n int
	err := m.db.QueryRowContext(ctx, q).Scan(&n)
	return n, err
}

func (m myConn) String(ctx context.Context, q string) (string, error) {
	var s string
	err := m.db.QueryRowContext(ctx, q).Scan(&s)
	return s, err
}
func (m myConn) Ping(ctx context.Context) error { return m.db.PingContext(ctx) }
func (m myConn) Close()                         { _ = m.db.Close() }

// openMySQL opens a session from a go-sql-driver DSN, with several statements
// allowed per Exec; it connects at once, so that a refused login is its error.
func openMySQL(ctx context.Context, dsn, database string) (conn, error) {
	cfg, err := gomysql.ParseDSN(dsn)
	if err != nil {
		return nil, err
	}
	if database != "" {
		cfg.DBName = database
	}
	cfg.MultiStatements = true
	cfg.Logger = &gomysql.NopLogger{}
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	db := sql.OpenDB(c)
	db.SetMaxOpenConns(1)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, err
	}
	return myConn{db}, nil
}

func newPGBackend(srv *testpg.Server) *backend {
	b := &backend{name: "postgres", engine: datav1alpha1.EnginePostgres, host: srv.Host, port: srv.Port,
		username: srv.Username, password: srv.Password, jdbcScheme: "jdbc:postgresql://", deniedDatabase: "permission denied for database",
		serialType: "serial", tableExists: "SELECT count(*) FROM pg_tables WHERE tablename = '%s'", currentUser: "current_user", templateInUse: true,
		urlTemplate: "postgres://{{urlquery .Username}}:{{urlquery .Password}}@{{.Host}}:{{.Port}}/{{.Database}}?sslmode=disable",
		urlFormat:   "postgres://%s:%s@%s:%d/%s?sslmode=disable", deniedWrite: "permission denied", deniedDrop: "must be owner"}
	b.connect = func(ctx context.Context, data map[string]string, database string) (conn, error) {
		c, err := connectAs(ctx, data, database)
		if err != nil {
			return nil, err
		}
		return pgConn{c}, nil
	}
	b.connectURL = func(ctx context.Context, url string) (conn, error) {
		return b.connect(ctx, map[string]string{datav1alpha1.SecretKeyURI: url}, "")
	}
	b.adminSession = func(t *testing.T, database string) conn {
		t.Helper()
		if database == "" {
			database = "postgres"
		}
		c, err := pgx.Connect(context.Background(), srv.URL(database))
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = c.Close(context.Background()) })
		return pgConn{c}
	}
	b.admin = func(t *testing.T, stmts ...string) {
		t.Helper()
		c := adminConn(t, srv)
		for _, s := range stmts {
			_, err := c.Exec(context.Background(), s)
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), s)
		}
	}
	b.adminInt = func(t *testing.T, q string, args ...any) int {
		t.Helper()
		var n int
		NewWithT(t).Expect(adminConn(t, srv).QueryRow(context.Background(), q, args...).Scan(&n)).To(Succeed(), q)
		return n
	}
	b.ownerOf = func(t *testing.T, database string) string {
		t.Helper()
		var comment *string
		err := adminConn(t, srv).QueryRow(context.Background(), "SELECT shobj_description(oid, 'pg_database') FROM pg_database WHERE datname = $1", database).Scan(&comment)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		if comment == nil {
			return ""
		}
		uid, ok := strings.CutPrefix(*comment, "orderly.dev/owner-uid=")
		if !ok {
			return "unmarked: " + *comment
		}
		return uid
	}
	b.createRole = func(t *testing.T, name string) { b.admin(t, "CREATE ROLE "+name+" LOGIN") }
	b.throwaway = func(t *testing.T) *downServer {
		t.Helper()
		srv, err := testpg.Start()
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(srv.Close)
		return &downServer{backend: newPGBackend(srv), Stop: srv.Stop, StartAgain: srv.StartAgain}
	}
	b.userRole = func(d *datav1alpha1.DevDatabase, name string) string {
		return database.UserRoleFor(string(datav1alpha1.EnginePostgres), string(d.UID), name)
	}
	return b
}

func newMariaBackend(srv *testmysql.Server) *backend {
	b := &backend{name: "mariadb", engine: datav1alpha1.EngineMySQL, host: srv.Host, port: srv.Port,
		username: srv.Username, password: srv.Password, jdbcScheme: "jdbc:mysql://", deniedDatabase: "Access denied for user",
		serialType: "INT AUTO_INCREMENT", tableExists: "SELECT COUNT(*) FROM information_schema.TABLES WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = '%s'",
		currentUser: "SUBSTRING_INDEX(CURRENT_USER(), '@', 1)",
		urlTemplate: "{{.Username}}:{{.Password}}@tcp({{.Host}}:{{.Port}})/{{.Database}}",
		urlFormat:   "%s:%s@tcp(%s:%d)/%s", deniedWrite: "INSERT command denied", deniedDrop: "DROP command denied"}
	b.connect = func(ctx context.Context, data map[string]string, database string) (conn, error) {
		return openMySQL(ctx, data[datav1alpha1.SecretKeyDSN], database)
	}
	b.connectURL = func(ctx context.Context, url string) (conn, error) { return openMySQL(ctx, url, "") }
	admin := func(t *testing.T, database string) *sql.DB {
		t.Helper()
		db, err := srv.Admin(database)
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(func() { _ = db.Close() })
		return db
	}
	b.adminSession = func(t *testing.T, database string) conn {
		t.Helper()
		c, err := openMySQL(context.Background(), srv.DSN(database), "")
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(c.Close)
		return c
	}
	b.admin = func(t *testing.T, stmts ...string) {
		t.Helper()
		db := admin(t, "")
		for _, s := range stmts {
			_, err := db.Exec(s)
			NewWithT(t).Expect(err).NotTo(HaveOccurred(), s)
		}
	}
	b.adminInt = func(t *testing.T, q string, args ...any) int {
		t.Helper()
		var n int
		NewWithT(t).Expect(admin(t, "").QueryRow(q, args...).Scan(&n)).To(Succeed(), q)
		return n
	}
	b.ownerOf = func(t *testing.T, database string) string {
		t.Helper()
		var uid string
		err := admin(t, "").QueryRow("SELECT owner_uid FROM orderly.owners WHERE kind = 'database' AND name = ?", database).Scan(&uid)
		if errors.Is(err, sql.ErrNoRows) {
			return ""
		}
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		return uid
	}
	b.createRole = func(t *testing.T, name string) { b.admin(t, "CREATE USER '"+name+"'@'%' IDENTIFIED BY 'theirs'") }
	b.throwaway = func(t *testing.T) *downServer {
		t.Helper()
		srv, err := testmysql.Start()
		NewWithT(t).Expect(err).NotTo(HaveOccurred())
		t.Cleanup(srv.Close)
		return &downServer{backend: newMariaBackend(srv), Stop: srv.Stop, StartAgain: srv.StartAgain}
	}
	b.userRole = func(d *datav1alpha1.DevDatabase, name string) string {
		return database.UserRoleFor(string(datav1alpha1.EngineMySQL), string(d.UID), name)
	}
	return b
}

// registerServer creates a DatabaseServer for a server, with its admin Secret in
// the manager's namespace.
func registerServer(t *testing.T, kind datav1alpha1.Engine, host string, port int32, user, password string, mutate func(*datav1alpha1.DatabaseServerSpec)) *datav1alpha1.DatabaseServer {
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: uniq("admin")},
		StringData: map[string]string{"username": user, "password": password}}
	g.Expect(k.Create(ctx, sec)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), sec) })
	prefix := "pg"
	if kind == datav1alpha1.EngineMySQL {
		prefix = "maria"
	}
	s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq(prefix)}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: kind, Host: host, Port: port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: sec.Name},
	}}
	if mutate != nil {
		mutate(&s.Spec)
	}
	g.Expect(k.Create(ctx, s)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), s) })
	return s
}

// pgOnly is a case written for PostgreSQL alone (its notOn says why).
func pgOnly(f func(t *testing.T)) func(t *testing.T, b *backend) {
	return func(t *testing.T, _ *backend) { f(t) }
}
