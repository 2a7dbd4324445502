//go:build bench

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/devdatabase"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/mysql"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/testing/testmysql"
	"orderly.dev/orderly/internal/testing/testpg"
)

// BenchmarkDevDatabases measures both engines in one run, each against its own
// raw-SQL baseline: a throwaway PostgreSQL and a throwaway MariaDB, one local
// cluster and one manager at its default flags serving a DatabaseServer on each.
// For each engine, in turn: the baseline (the SQL Orderly sends for one
// DevDatabase, straight to the server, dbConcurrency at a time), the engine alone
// (Orderly's Ensure through its Connector, as many at once: its SQL without its
// Kubernetes side), then Orderly itself (DevDatabases created at once, create ->
// connection Secret seen through a watch), for empty databases and for clones of a
// template. What differs between the engines is a benchEngine; the rest is shared.

// dbPoolSize is the manager's admin connections per server (both Connectors'
// default).
const dbPoolSize = 8

// dbConcurrency is how many databases both sides create at once: the manager's
// DevDatabase workers at its default flags, within its pool.
var dbConcurrency = min(dbPoolSize, workersOf(devdatabase.Controller))

func fmtP(ds []time.Duration) string {
	p50, p99 := percentiles(ds)
	return fmt.Sprintf("%.3fs/%.3fs", p50.Seconds(), p99.Seconds())
}

// percentiles returns p50 and p99 of ds.
func percentiles(ds []time.Duration) (p50, p99 time.Duration) {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	at := func(q float64) time.Duration { return s[int(q*float64(len(s)-1)+0.5)] }
	return at(0.50), at(0.99)
}

// benchEngine is what the benchmark needs of one engine.
type benchEngine struct {
	// label names the engine in the output; server is its DatabaseServer's name.
	label, server string
	kind          datav1alpha1.Engine
	host          string
	port          int32
	user, pass    string
	// n and clones are how many empty databases and clones; templateSize says how
	// big the template is.
	n, clones    int
	templateSize string
	// baseline creates one database as Orderly would, straight to the server.
	baseline func(ctx context.Context, uid string, clone bool) error
	// reset drops what the baseline and the engine-alone runs made, so that
	// Orderly's run starts as theirs did.
	reset func(ctx context.Context) error
	// close releases the baseline's connections.
	close func()
}

// concurrently runs fn(i) for i in [0,n), dbConcurrency at a time, and returns each
// one's latency from the common start.
func concurrently(b *testing.B, n int, fn func(i int) error) []time.Duration {
	lat := make([]time.Duration, n)
	var once sync.Once
	var first error
	var wg sync.WaitGroup
	sem := make(chan struct{}, dbConcurrency)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := fn(i); err != nil {
				once.Do(func() { first = err })
			}
			lat[i] = time.Since(start)
		})
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return lat
}

// engineAlone runs Orderly's Ensure for n empty databases through a Connector of
// its own, at the baseline's concurrency.
func engineAlone(ctx context.Context, b *testing.B, e benchEngine, connector database.Connector, n int) []time.Duration {
	eng, err := connector.Connect(ctx, string(e.kind), database.Server{Name: "alone-" + e.server, Engine: string(e.kind), Host: e.host, Port: e.port, SSLMode: "disable", Username: e.user, Password: e.pass})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := eng.Info(ctx); err != nil {
		b.Fatal(err)
	}
	return concurrently(b, n, func(i int) error {
		uid := fmt.Sprintf("22222222-0000-4000-8000-%012d", i)
		name, role := database.NamesFor(string(e.kind), uid)
		_, err := eng.Ensure(ctx, database.Database{Name: name, Role: role, OwnerUID: uid, Password: database.Password(), SetPassword: true})
		return err
	})
}

// pgBaselineSQL runs, straight against the server, the statements Orderly runs for one
// DevDatabase (postgres.Postgres.Ensure): look-ups, role and marker in a transaction,
// CREATE DATABASE, marker, REVOKE, and for clones the grants inside the new database.
func pgBaselineSQL(ctx context.Context, pool *pgxpool.Pool, srv *testpg.Server, uid, template string) error {
	db, role := database.Names(uid)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, role).Scan(&n); err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE ROLE %q LOGIN PASSWORD '%s'`, role, database.Password())); err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`COMMENT ON ROLE %q IS '%s'`, role, postgres.Marker(uid))); err != nil {
		return err
	}
	if err := tx.Commit(ctx); err != nil {
		return err
	}
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_database WHERE datname = $1`, db).Scan(&n); err != nil {
		return err
	}
	stmt := fmt.Sprintf(`CREATE DATABASE %q OWNER %q`, db, role)
	if template != "" {
		stmt += fmt.Sprintf(` TEMPLATE %q`, template)
	}
	for _, s := range []string{stmt, fmt.Sprintf(`REVOKE ALL ON DATABASE %q FROM PUBLIC`, db), fmt.Sprintf(`COMMENT ON DATABASE %q IS '%s'`, db, postgres.Marker(uid))} {
		if _, err := pool.Exec(ctx, s); err != nil {
			return err
		}
	}
	if template == "" {
		return nil
	}
	conn, err := pgx.Connect(ctx, srv.URL(db))
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, s := range []string{"USAGE, CREATE ON SCHEMA public", "ALL ON ALL TABLES IN SCHEMA public", "ALL ON ALL SEQUENCES IN SCHEMA public", "ALL ON ALL FUNCTIONS IN SCHEMA public"} {
		if _, err := conn.Exec(ctx, fmt.Sprintf(`GRANT %s TO %q`, s, role)); err != nil {
			return err
		}
	}
	return nil
}

// postgresBench starts PostgreSQL with a template of about templateMB megabytes.
func postgresBench(ctx context.Context, b *testing.B) (benchEngine, func()) {
	n := envInt("BENCH_DEVDATABASES", 100)
	clones := envInt("BENCH_CLONES", 100)
	templateMB := envInt("BENCH_TEMPLATE_MB", 50)
	srv, err := testpg.Start()
	if err != nil {
		b.Fatal(err)
	}
	admin, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		srv.Close()
		b.Fatal(err)
	}
	stop := func() { _ = admin.Close(ctx); srv.Close() }
	if _, err := admin.Exec(ctx, "CREATE DATABASE bench_seed"); err != nil {
		b.Fatal(err)
	}
	seed, err := pgx.Connect(ctx, srv.URL("bench_seed"))
	if err != nil {
		b.Fatal(err)
	}
	rows := templateMB * 1024 * 1024 / 250
	if _, err := seed.Exec(ctx, fmt.Sprintf("CREATE TABLE events AS SELECT g AS id, repeat(md5(g::text), 6) AS payload FROM generate_series(1, %d) g", rows)); err != nil {
		b.Fatal(err)
	}
	if _, err := seed.Exec(ctx, "VACUUM ANALYZE events"); err != nil {
		b.Fatal(err)
	}
	_ = seed.Close(ctx)
	var size string
	if err := admin.QueryRow(ctx, "SELECT pg_size_pretty(pg_database_size('bench_seed'))").Scan(&size); err != nil {
		b.Fatal(err)
	}
	cfg, err := pgxpool.ParseConfig(postgres.ConnString(database.Server{Host: srv.Host, Port: srv.Port, SSLMode: "disable", Username: srv.Username, Password: srv.Password}, "postgres"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(dbConcurrency)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	e := benchEngine{label: "PostgreSQL " + serverVersion(ctx, b, admin), server: "bench-pg", kind: datav1alpha1.EnginePostgres,
		host: srv.Host, port: srv.Port, user: srv.Username, pass: srv.Password, n: n, clones: clones, templateSize: size + " database",
		close: pool.Close}
	e.baseline = func(ctx context.Context, uid string, clone bool) error {
		template := ""
		if clone {
			template = "bench_seed"
		}
		return pgBaselineSQL(ctx, pool, srv, uid, template)
	}
	e.reset = func(ctx context.Context) error {
		for _, q := range []string{
			`SELECT format('DROP DATABASE %I', datname) FROM pg_database WHERE datname ~ '^orderly_[0-9a-f]{32}$'`,
			`SELECT format('DROP ROLE %I', rolname) FROM pg_roles WHERE rolname ~ '^orderly_[0-9a-f]{32}$'`,
		} {
			rows, err := admin.Query(ctx, q)
			if err != nil {
				return err
			}
			stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
			if err != nil {
				return err
			}
			for _, st := range stmts {
				if _, err := admin.Exec(ctx, st); err != nil {
					return err
				}
			}
		}
		_, err := admin.Exec(ctx, "CHECKPOINT")
		return err
	}
	return e, stop
}

func serverVersion(ctx context.Context, b *testing.B, admin *pgx.Conn) string {
	var v string
	if err := admin.QueryRow(ctx, "SHOW server_version").Scan(&v); err != nil {
		b.Fatal(err)
	}
	return v
}

// mysqlBaselineSQL runs, straight against the server, the statements the mysql
// engine runs for one new DevDatabase (mysql.MySQL.Ensure): the identity and
// record look-ups, the user's record and CREATE USER, the database's record,
// CREATE DATABASE, for clones each table's CREATE TABLE ... LIKE and its rows in one
// transaction, the grant and the ready state.
func mysqlBaselineSQL(ctx context.Context, db *sql.DB, uid, template string, tables []string) error {
	name, user := database.NamesFor(mysql.Kind, uid)
	var s string
	var n int
	for _, q := range []struct {
		q    string
		args []any
	}{
		{"SELECT uuid FROM orderly.server WHERE id = 1", nil},
		{"SELECT COUNT(*) FROM orderly.owners WHERE kind = 'user' AND name = ?", []any{user}},
		{"SELECT COUNT(*) FROM orderly.owners WHERE kind = 'database' AND name = ?", []any{name}},
		{"SELECT COUNT(*) FROM mysql.user WHERE User = ? AND Host = '%'", []any{user}},
		{"SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", []any{name}},
		{"SELECT VERSION()", nil},
	} {
		dest := any(&n)
		if q.args == nil {
			dest = &s
		}
		if err := db.QueryRowContext(ctx, q.q, q.args...).Scan(dest); err != nil {
			return err
		}
	}
	u := mysql.Literal(user) + "@'%'"
	stmts := []string{
		"INSERT INTO orderly.owners (kind, name, owner_uid, state) VALUES ('user', " + mysql.Literal(user) + ", " + mysql.Literal(uid) + ", 'ready')",
		"CREATE USER " + u + " IDENTIFIED BY PASSWORD " + mysql.Literal(mysql.NativeHash(database.Password())),
		"INSERT INTO orderly.owners (kind, name, owner_uid, state) VALUES ('database', " + mysql.Literal(name) + ", " + mysql.Literal(uid) + ", 'creating')",
		"CREATE DATABASE " + mysql.Ident(name) + " CHARACTER SET utf8mb4",
	}
	for _, t := range tables {
		stmts = append(stmts, "CREATE TABLE "+mysql.Ident(name)+"."+mysql.Ident(t)+" LIKE "+mysql.Ident(template)+"."+mysql.Ident(t))
	}
	for _, st := range stmts {
		if _, err := db.ExecContext(ctx, st); err != nil {
			return err
		}
	}
	if len(tables) > 0 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			return err
		}
		for _, t := range tables {
			if _, err := tx.ExecContext(ctx, "INSERT INTO "+mysql.Ident(name)+"."+mysql.Ident(t)+" SELECT * FROM "+mysql.Ident(template)+"."+mysql.Ident(t)); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		if err := tx.Commit(); err != nil {
			return err
		}
	}
	for _, st := range []string{
		"GRANT ALL PRIVILEGES ON " + mysql.GrantTarget(name) + ".* TO " + u,
		"UPDATE orderly.owners SET state = 'ready' WHERE kind = 'database' AND name = " + mysql.Literal(name),
	} {
		if _, err := db.ExecContext(ctx, st); err != nil {
			return err
		}
	}
	return nil
}

// mariadbBench starts MariaDB with Orderly's schema (made as the engine makes it)
// and a template schema of one table of about templateMB megabytes.
func mariadbBench(ctx context.Context, b *testing.B) (benchEngine, func()) {
	n := envInt("BENCH_MYSQL_DEVDATABASES", 100)
	clones := envInt("BENCH_MYSQL_CLONES", 20)
	templateMB := envInt("BENCH_MYSQL_TEMPLATE_MB", 5)
	srv, err := testmysql.Start()
	if err != nil {
		b.Fatal(err)
	}
	admin, err := srv.Admin("")
	if err != nil {
		srv.Close()
		b.Fatal(err)
	}
	stop := func() { _ = admin.Close(); srv.Close() }
	prepConnector := mysql.NewConnector()
	defer prepConnector.Close()
	prep, err := prepConnector.Connect(ctx, mysql.Kind, database.Server{Host: srv.Host, Port: srv.Port, SSLMode: "disable", Username: srv.Username, Password: srv.Password})
	if err != nil {
		b.Fatal(err)
	}
	info, err := prep.Info(ctx)
	if err != nil {
		b.Fatal(err)
	}
	rows := templateMB * 1024 * 1024 / 250
	for _, st := range []string{
		"CREATE DATABASE bench_seed",
		"CREATE TABLE bench_seed.events (id INT PRIMARY KEY, payload VARCHAR(255))",
		fmt.Sprintf("INSERT INTO bench_seed.events SELECT seq, REPEAT(MD5(seq), 6) FROM bench_seed.seq_1_to_%d", rows),
	} {
		if _, err := admin.ExecContext(ctx, st); err != nil {
			b.Fatal(err)
		}
	}
	pool, err := srv.Admin("")
	if err != nil {
		b.Fatal(err)
	}
	pool.SetMaxOpenConns(dbConcurrency)
	e := benchEngine{label: "MariaDB " + info.Version, server: "bench-mysql", kind: datav1alpha1.EngineMySQL,
		host: srv.Host, port: srv.Port, user: srv.Username, pass: srv.Password, n: n, clones: clones,
		templateSize: fmt.Sprintf("%d MB table", templateMB), close: func() { _ = pool.Close() }}
	e.baseline = func(ctx context.Context, uid string, clone bool) error {
		if clone {
			return mysqlBaselineSQL(ctx, pool, uid, "bench_seed", []string{"events"})
		}
		return mysqlBaselineSQL(ctx, pool, uid, "", nil)
	}
	e.reset = func(ctx context.Context) error {
		names := func(q string) ([]string, error) {
			r, err := admin.QueryContext(ctx, q)
			if err != nil {
				return nil, err
			}
			defer func() { _ = r.Close() }()
			var out []string
			for r.Next() {
				var s string
				if err := r.Scan(&s); err != nil {
					return nil, err
				}
				out = append(out, s)
			}
			return out, r.Err()
		}
		dbs, err := names("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'orderly\\_%'")
		if err != nil {
			return err
		}
		for _, d := range dbs {
			if _, err := admin.ExecContext(ctx, "DROP DATABASE "+mysql.Ident(d)); err != nil {
				return err
			}
		}
		users, err := names("SELECT User FROM mysql.user WHERE User LIKE 'orderly\\_%' AND User <> " + mysql.Literal(srv.Username))
		if err != nil {
			return err
		}
		for _, u := range users {
			if _, err := admin.ExecContext(ctx, "DROP USER "+mysql.Literal(u)+"@'%'"); err != nil {
				return err
			}
		}
		_, err = admin.ExecContext(ctx, "DELETE FROM orderly.owners")
		return err
	}
	return e, stop
}

// runOrderly creates n DevDatabases on server at once and returns, for each, the
// time from its create call to its Secret appearing (seen through a watch).
func runOrderly(ctx context.Context, b *testing.B, c client.WithWatch, ns, server string, n int, prefix, template string) []time.Duration {
	w, err := c.Watch(ctx, &corev1.SecretList{}, client.InNamespace(ns))
	if err != nil {
		b.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	started := map[string]time.Time{}
	seen := map[string]time.Time{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			if sec, ok := ev.Object.(*corev1.Secret); ok {
				mu.Lock()
				if _, dup := seen[sec.Name]; !dup {
					seen[sec.Name] = time.Now()
				}
				complete := len(seen) >= n
				mu.Unlock()
				if complete {
					return
				}
			}
		}
	}()
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			name := fmt.Sprintf("%s-%03d", prefix, i)
			d := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: datav1alpha1.DevDatabaseSpec{ServerRef: server, Template: template}}
			mu.Lock()
			started[name] = time.Now()
			mu.Unlock()
			if err := c.Create(ctx, d); err != nil {
				b.Error(err)
			}
		})
	}
	wg.Wait()
	select {
	case <-done:
	case <-time.After(10 * time.Minute):
		b.Fatalf("only %d of %d Secrets after 10 minutes", len(seen), n)
	}
	lat := make([]time.Duration, 0, n)
	for name, t := range seen {
		lat = append(lat, t.Sub(started[name]))
	}
	return lat
}

// settleReady waits until the n DevDatabases in namespaces are all Ready.
func settleReady(ctx context.Context, b *testing.B, c client.Client, n int, namespaces ...string) {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		ready := 0
		for _, ns := range namespaces {
			var list datav1alpha1.DevDatabaseList
			if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
				b.Fatal(err)
			}
			for _, d := range list.Items {
				if d.Status.Phase == datav1alpha1.PhaseReady {
					ready++
				}
			}
		}
		if ready >= n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("only %d of %d DevDatabases Ready after 5 minutes", ready, n)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// engineFigures are one engine's measurements.
type engineFigures struct {
	baseEmpty, alone, baseClone, orderlyEmpty, orderlyClone []time.Duration
}

func BenchmarkDevDatabases(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))

	pgE, stopPG := postgresBench(ctx, b)
	defer stopPG()
	myE, stopMy := mariadbBench(ctx, b)
	defer stopMy()
	engines := []benchEngine{pgE, myE}

	// Per engine: the baseline and the engine alone, then all of it dropped so that
	// Orderly starts as they did.
	figures := make([]engineFigures, len(engines))
	for i, e := range engines {
		f := &figures[i]
		f.baseEmpty = concurrently(b, e.n, func(j int) error { return e.baseline(ctx, fmt.Sprintf("00000000-0000-4000-8000-%012d", j), false) })
		f.baseClone = concurrently(b, e.clones, func(j int) error { return e.baseline(ctx, fmt.Sprintf("11111111-0000-4000-8000-%012d", j), true) })
		connector := database.Engines{string(datav1alpha1.EnginePostgres): postgres.NewConnector(), string(datav1alpha1.EngineMySQL): mysql.NewConnector()}
		f.alone = engineAlone(ctx, b, e, connector, e.n)
		connector.Close()
		e.close()
		fmt.Printf("%s: baseline empty p50/p99 %v, clone %v; engine alone empty %v\n", e.label, fmtP(f.baseEmpty), fmtP(f.baseClone), fmtP(f.alone))
		if err := e.reset(ctx); err != nil {
			b.Fatal(err)
		}
	}

	kubeconfig := benchCluster(ctx, b, "orderly-bench-db", 1)
	_, c := adminClient(b, kubeconfig)
	// The admin credentials live in the manager's namespace, which this creates.
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	for _, e := range engines {
		for _, ns := range []string{e.server + "-empty", e.server + "-clone"} {
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				b.Fatal(err)
			}
		}
		if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: e.server + "-admin"},
			StringData: map[string]string{"username": e.user, "password": e.pass}}); err != nil {
			b.Fatal(err)
		}
		if err := c.Create(ctx, &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: e.server}, Spec: datav1alpha1.DatabaseServerSpec{
			Engine: e.kind, Host: e.host, Port: e.port, SSLMode: "disable",
			AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: e.server + "-admin"},
			Templates:                 []datav1alpha1.DatabaseTemplate{{Name: "seed", Database: "bench_seed"}},
		}}); err != nil {
			b.Fatal(err)
		}
	}

	// The manager at its default flags.
	mgr := startManager(b, saKubeconfig)
	// Wait until the manager has reached both servers (its pools are warm, as the
	// baselines' are).
	deadline := time.Now().Add(time.Minute)
	for _, e := range engines {
		for {
			var s datav1alpha1.DatabaseServer
			if err := c.Get(ctx, client.ObjectKey{Name: e.server}, &s); err == nil && meta.IsStatusConditionTrue(s.Status.Conditions, datav1alpha1.ConditionReady) {
				break
			}
			if time.Now().After(deadline) {
				b.Fatalf("DatabaseServer %s not Ready after a minute; manager log: %s", e.server, mgr.logPath)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// One namespace per run: a watch starts with the Secrets that already exist.
	// The engines one after the other, so that neither slows the other's figures.
	for i, e := range engines {
		figures[i].orderlyEmpty = runOrderly(ctx, b, c, e.server+"-empty", e.server, e.n, "empty", "")
		figures[i].orderlyClone = runOrderly(ctx, b, c, e.server+"-clone", e.server, e.clones, "clone", "seed")
		// The next engine starts once this one's DevDatabases are all Ready: the
		// status writes that follow their Secrets are not its work to queue behind.
		settleReady(ctx, b, c, e.n+e.clones, e.server+"-empty", e.server+"-clone")
	}
	cpu := cpuSeconds(mgr.pid)
	peak := peakRSS(mgr.pid)

	fmt.Printf("\nDevDatabase benchmark, both engines in one run: servers on loopback, all created at once; %d at a time on the baseline's side "+
		"(the manager's DevDatabase workers at its default flags; admin pool %d); one manager at its default flags, as its ServiceAccount\n", dbConcurrency, dbPoolSize)
	for i, e := range engines {
		f := figures[i]
		be50, be99 := percentiles(f.baseEmpty)
		ee50, ee99 := percentiles(f.alone)
		oe50, oe99 := percentiles(f.orderlyEmpty)
		bc50, bc99 := percentiles(f.baseClone)
		oc50, oc99 := percentiles(f.orderlyClone)
		fmt.Printf("  %s (engine %s)\n", e.label, e.kind)
		fmt.Printf("    empty databases (%d):\n", e.n)
		fmt.Printf("      baseline: same SQL straight to the server   p50 %7.3fs  p99 %7.3fs\n", be50.Seconds(), be99.Seconds())
		fmt.Printf("      engine:   Orderly's SQL alone (Ensure)       p50 %7.3fs  p99 %7.3fs  ratio %5.2fx / %5.2fx\n", ee50.Seconds(), ee99.Seconds(), ee50.Seconds()/be50.Seconds(), ee99.Seconds()/be99.Seconds())
		fmt.Printf("      orderly:  create -> Secret ready            p50 %7.3fs  p99 %7.3fs\n", oe50.Seconds(), oe99.Seconds())
		fmt.Printf("      ratio orderly/baseline                      p50 %7.2fx  p99 %7.2fx\n", oe50.Seconds()/be50.Seconds(), oe99.Seconds()/be99.Seconds())
		fmt.Printf("    template clones of a %s (%d):\n", e.templateSize, e.clones)
		fmt.Printf("      baseline: same SQL straight to the server   p50 %7.3fs  p99 %7.3fs\n", bc50.Seconds(), bc99.Seconds())
		fmt.Printf("      orderly:  create -> Secret ready            p50 %7.3fs  p99 %7.3fs\n", oc50.Seconds(), oc99.Seconds())
		fmt.Printf("      ratio orderly/baseline                      p50 %7.2fx  p99 %7.2fx\n", oc50.Seconds()/bc50.Seconds(), oc99.Seconds()/bc99.Seconds())
		b.ReportMetric(oe50.Seconds()/be50.Seconds(), string(e.kind)+"-empty-p50-ratio")
		b.ReportMetric(oc50.Seconds()/bc50.Seconds(), string(e.kind)+"-clone-p50-ratio")
	}
	fmt.Printf("  manager CPU time %.2fs, peak memory %.1f MiB (both engines)\n", cpu, float64(peak)/(1<<20))
}
