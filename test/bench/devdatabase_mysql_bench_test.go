//go:build bench

package bench

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/engine"
	"orderly.dev/orderly/internal/controller/data/engine/mysql"
	"orderly.dev/orderly/internal/testmysql"
)

// mysqlBaselineSQL runs, straight against the server, the statements the mysql
// engine runs for one new DevDatabase (mysql.MySQL.Ensure): the identity and
// record look-ups, the user's record and CREATE USER, the database's record,
// CREATE DATABASE, for clones each table's CREATE TABLE ... LIKE and its rows in one
// transaction, the grant and the ready state.
func mysqlBaselineSQL(ctx context.Context, db *sql.DB, uid, template string, tables []string) error {
	name, user := engine.NamesFor(mysql.Kind, uid)
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
		"CREATE USER " + u + " IDENTIFIED BY PASSWORD " + mysql.Literal(mysql.NativeHash(engine.Password())),
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

func runMySQLBaseline(ctx context.Context, b *testing.B, srv *testmysql.Server, n int, prefix, template string, tables []string) []time.Duration {
	db, err := srv.Admin("")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = db.Close() }()
	db.SetMaxOpenConns(dbConcurrency)
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	sem := make(chan struct{}, dbConcurrency)
	start := time.Now()
	for i := range n {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			if err := mysqlBaselineSQL(ctx, db, fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, i), template, tables); err != nil {
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

// runOrderlyOn creates n DevDatabases on server at once and returns, for each, the
// time from its create call to its Secret appearing (seen through a watch).
func runOrderlyOn(ctx context.Context, b *testing.B, c client.WithWatch, ns, server string, n int, prefix, template string) []time.Duration {
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

// BenchmarkDevDatabasesMySQL is BenchmarkDevDatabases on MariaDB (engine mysql):
// Orderly's create -> Secret latency against the same SQL sent straight to the
// server, for empty databases and for clones of a template schema.
func BenchmarkDevDatabasesMySQL(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	n := envInt("BENCH_MYSQL_DEVDATABASES", 100)
	clones := envInt("BENCH_MYSQL_CLONES", 20)
	templateMB := envInt("BENCH_MYSQL_TEMPLATE_MB", 5)

	srv, err := testmysql.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	admin, err := srv.Admin("")
	if err != nil {
		b.Fatal(err)
	}
	defer func() { _ = admin.Close() }()
	// Orderly's schema, made as the engine makes it, and the template: one table of
	// about templateMB megabytes.
	prepConnector := mysql.NewConnector()
	defer prepConnector.Close()
	prep, err := prepConnector.Connect(ctx, mysql.Kind, engine.Server{Host: srv.Host, Port: srv.Port, SSLMode: "disable", Username: srv.Username, Password: srv.Password})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := prep.Info(ctx); err != nil {
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

	// The engine alone (Ensure through Orderly's connector, as many at once): what
	// Orderly's SQL costs, apart from its Kubernetes side.
	engineEmpty := make([]time.Duration, n)
	{
		var wg sync.WaitGroup
		sem := make(chan struct{}, dbConcurrency)
		var once sync.Once
		var first error
		start := time.Now()
		for i := range n {
			wg.Go(func() {
				sem <- struct{}{}
				defer func() { <-sem }()
				uid := fmt.Sprintf("22222222-0000-4000-8000-%012d", i)
				name, user := engine.NamesFor(mysql.Kind, uid)
				if _, err := prep.Ensure(ctx, engine.Database{Name: name, Role: user, OwnerUID: uid, Password: engine.Password(), SetPassword: true}); err != nil {
					once.Do(func() { first = err })
				}
				engineEmpty[i] = time.Since(start)
			})
		}
		wg.Wait()
		if first != nil {
			b.Fatal(first)
		}
	}
	baseEmpty := runMySQLBaseline(ctx, b, srv, n, "00000000", "", nil)
	baseClone := runMySQLBaseline(ctx, b, srv, clones, "11111111", "bench_seed", []string{"events"})
	fmt.Printf("baseline measured: empty p50/p99 %v, clone p50/p99 %v\n", fmtP(baseEmpty), fmtP(baseClone))
	// Both sides start alike: the baseline's databases, users and records go.
	names := func(q string) []string {
		r, err := admin.QueryContext(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		defer func() { _ = r.Close() }()
		var out []string
		for r.Next() {
			var s string
			_ = r.Scan(&s)
			out = append(out, s)
		}
		return out
	}
	for _, d := range names("SELECT SCHEMA_NAME FROM information_schema.SCHEMATA WHERE SCHEMA_NAME LIKE 'orderly\\_%'") {
		if _, err := admin.ExecContext(ctx, "DROP DATABASE "+mysql.Ident(d)); err != nil {
			b.Fatal(err)
		}
	}
	for _, u := range names("SELECT User FROM mysql.user WHERE User LIKE 'orderly\\_%' AND User <> " + mysql.Literal(srv.Username)) {
		if _, err := admin.ExecContext(ctx, "DROP USER "+mysql.Literal(u)+"@'%'"); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := admin.ExecContext(ctx, "DELETE FROM orderly.owners"); err != nil {
		b.Fatal(err)
	}

	kubeconfig := benchCluster(ctx, b, "orderly-bench-mysql", 1)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	c, err := newBenchClient(cfg)
	if err != nil {
		b.Fatal(err)
	}
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	for _, ns := range []string{"bench-mysql-empty", "bench-mysql-clone"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "bench-mysql-admin"},
		StringData: map[string]string{"username": srv.Username, "password": srv.Password}}); err != nil {
		b.Fatal(err)
	}
	if err := c.Create(ctx, &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "bench-mysql"}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: datav1alpha1.EngineMySQL, Host: srv.Host, Port: srv.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Name: "bench-mysql-admin"},
		Templates:                 []datav1alpha1.DatabaseTemplate{{Name: "seed", Database: "bench_seed"}},
	}}); err != nil {
		b.Fatal(err)
	}
	mgr := startManager(b, saKubeconfig)
	deadline := time.Now().Add(time.Minute)
	for {
		var s datav1alpha1.DatabaseServer
		if err := c.Get(ctx, client.ObjectKey{Name: "bench-mysql"}, &s); err == nil && meta.IsStatusConditionTrue(s.Status.Conditions, datav1alpha1.ConditionReady) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("DatabaseServer not Ready after a minute; manager log: %s", mgr.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}

	orderlyEmpty := runOrderlyOn(ctx, b, c, "bench-mysql-empty", "bench-mysql", n, "empty", "")
	orderlyClone := runOrderlyOn(ctx, b, c, "bench-mysql-clone", "bench-mysql", clones, "clone", "seed")
	cpu := cpuSeconds(mgr.pid)
	peak := peakRSS(mgr.pid)

	be50, be99 := percentiles(baseEmpty)
	ee50, ee99 := percentiles(engineEmpty)
	bc50, bc99 := percentiles(baseClone)
	oe50, oe99 := percentiles(orderlyEmpty)
	oc50, oc99 := percentiles(orderlyClone)
	fmt.Printf("\nDevDatabase benchmark, engine mysql: MariaDB on loopback, all created at once; %d at a time on both sides; Orderly as its ServiceAccount\n", dbConcurrency)
	fmt.Printf("  empty databases (%d):\n", n)
	fmt.Printf("    baseline: same SQL straight to the server   p50 %7.3fs  p99 %7.3fs\n", be50.Seconds(), be99.Seconds())
	fmt.Printf("    engine:   Orderly's SQL alone (Ensure)       p50 %7.3fs  p99 %7.3fs  ratio %5.2fx / %5.2fx\n", ee50.Seconds(), ee99.Seconds(), ee50.Seconds()/be50.Seconds(), ee99.Seconds()/be99.Seconds())
	fmt.Printf("    orderly:  create -> Secret ready            p50 %7.3fs  p99 %7.3fs\n", oe50.Seconds(), oe99.Seconds())
	fmt.Printf("    ratio orderly/baseline                      p50 %7.2fx  p99 %7.2fx\n", oe50.Seconds()/be50.Seconds(), oe99.Seconds()/be99.Seconds())
	fmt.Printf("  template clones of a %d MB table (%d):\n", templateMB, clones)
	fmt.Printf("    baseline: same SQL straight to the server   p50 %7.3fs  p99 %7.3fs\n", bc50.Seconds(), bc99.Seconds())
	fmt.Printf("    orderly:  create -> Secret ready            p50 %7.3fs  p99 %7.3fs\n", oc50.Seconds(), oc99.Seconds())
	fmt.Printf("    ratio orderly/baseline                      p50 %7.2fx  p99 %7.2fx\n", oc50.Seconds()/bc50.Seconds(), oc99.Seconds()/bc99.Seconds())
	fmt.Printf("  manager CPU time %.2fs, peak memory %.1f MiB\n", cpu, float64(peak)/(1<<20))
	b.ReportMetric(oe50.Seconds(), "empty-p50-s")
	b.ReportMetric(oe50.Seconds()/be50.Seconds(), "empty-p50-ratio")
	b.ReportMetric(oc50.Seconds()/bc50.Seconds(), "clone-p50-ratio")
}
