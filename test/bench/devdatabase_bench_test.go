//go:build bench

package bench

import (
	"context"
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
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/controller/data/devdatabase"
	"orderly.dev/orderly/internal/controller/data/engine"
	"orderly.dev/orderly/internal/controller/data/engine/postgres"
	"orderly.dev/orderly/internal/testpg"
)

// dbPoolSize is the manager's admin connections per server (postgres.Connector's
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

// baselineSQL runs, straight against the server, the statements Orderly runs for one
// DevDatabase (postgres.Postgres.Ensure): look-ups, role and marker in a transaction,
// CREATE DATABASE, marker, REVOKE, and for clones the grants inside the new database.
func baselineSQL(ctx context.Context, pool *pgxpool.Pool, srv *testpg.Server, uid, template string) error {
	db, role := engine.Names(uid)
	var n int
	if err := pool.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE rolname = $1`, role).Scan(&n); err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return err
	}
	if _, err := tx.Exec(ctx, fmt.Sprintf(`CREATE ROLE %q LOGIN PASSWORD '%s'`, role, engine.Password())); err != nil {
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

// runBaseline starts n direct-SQL creations at once over a pool of dbConcurrency and
// returns each one's latency from the common start.
func runBaseline(ctx context.Context, b *testing.B, srv *testpg.Server, n int, prefix, template string) []time.Duration {
	cfg, err := pgxpool.ParseConfig(postgres.ConnString(engine.Server{Host: srv.Host, Port: srv.Port, SSLMode: "disable", Username: srv.Username, Password: srv.Password}, "postgres"))
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = int32(dbConcurrency)
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer pool.Close()
	lat := make([]time.Duration, n)
	var wg sync.WaitGroup
	var once sync.Once
	var first error
	start := time.Now()
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := baselineSQL(ctx, pool, srv, fmt.Sprintf("%s-0000-4000-8000-%012d", prefix, i), template); err != nil {
				once.Do(func() { first = err })
			}
			lat[i] = time.Since(start)
		}()
	}
	wg.Wait()
	if first != nil {
		b.Fatal(first)
	}
	return lat
}

// runOrderly creates n DevDatabases at once and returns, for each, the time from its
// create call to its Secret appearing (seen through a watch).
func runOrderly(ctx context.Context, b *testing.B, c client.WithWatch, ns string, n int, prefix, template string) []time.Duration {
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
		wg.Add(1)
		go func() {
			defer wg.Done()
			name := fmt.Sprintf("%s-%03d", prefix, i)
			d := &datav1alpha1.DevDatabase{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
				Spec: datav1alpha1.DevDatabaseSpec{ServerRef: "bench-pg", Template: template}}
			mu.Lock()
			started[name] = time.Now()
			mu.Unlock()
			if err := c.Create(ctx, d); err != nil {
				b.Error(err)
			}
		}()
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

func BenchmarkDevDatabases(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	n := envInt("BENCH_DEVDATABASES", 100)
	clones := envInt("BENCH_CLONES", 100)
	templateMB := envInt("BENCH_TEMPLATE_MB", 50)

	srv, err := testpg.Start()
	if err != nil {
		b.Fatal(err)
	}
	defer srv.Close()
	admin, err := pgx.Connect(ctx, srv.URL("postgres"))
	if err != nil {
		b.Fatal(err)
	}
	defer admin.Close(ctx)
	// The template: one table of about templateMB megabytes.
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

	// Baseline first, then its databases and roles dropped so both sides start alike.
	baseEmpty := runBaseline(ctx, b, srv, n, "00000000", "")
	baseClone := runBaseline(ctx, b, srv, clones, "11111111", "bench_seed")
	fmt.Printf("baseline measured: empty p50/p99 %v, clone p50/p99 %v\n", fmtP(baseEmpty), fmtP(baseClone))
	for _, q := range []string{
		`SELECT format('DROP DATABASE %I', datname) FROM pg_database WHERE datname ~ '^orderly_[0-9a-f]{32}$'`,
		`SELECT format('DROP ROLE %I', rolname) FROM pg_roles WHERE rolname ~ '^orderly_[0-9a-f]{32}$'`,
	} {
		rows, err := admin.Query(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		stmts, err := pgx.CollectRows(rows, pgx.RowTo[string])
		if err != nil {
			b.Fatal(err)
		}
		for _, st := range stmts {
			if _, err := admin.Exec(ctx, st); err != nil {
				b.Fatal(err)
			}
		}
	}
	_, _ = admin.Exec(ctx, "CHECKPOINT")

	kubeconfig := benchCluster(ctx, b, "orderly-bench-db", 1)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	c, err := newBenchClient(cfg)
	if err != nil {
		b.Fatal(err)
	}
	// The admin credentials live in the manager's namespace, which this creates.
	saKubeconfig := managerKubeconfig(ctx, b, kubeconfig)
	for _, ns := range []string{"bench-db-empty", "bench-db-clone"} {
		if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
	}
	if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: "bench-pg-admin"},
		StringData: map[string]string{"username": srv.Username, "password": srv.Password}}); err != nil {
		b.Fatal(err)
	}
	if err := c.Create(ctx, &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "bench-pg"}, Spec: datav1alpha1.DatabaseServerSpec{
		Host: srv.Host, Port: srv.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: "bench-pg-admin"},
		Templates:                 []datav1alpha1.DatabaseTemplate{{Name: "seed", Database: "bench_seed"}},
	}}); err != nil {
		b.Fatal(err)
	}

	mgr := startManager(b, saKubeconfig)
	// Wait until the manager has reached the server (its pool is warm, as the baseline's is).
	deadline := time.Now().Add(time.Minute)
	for {
		var s datav1alpha1.DatabaseServer
		if err := c.Get(ctx, client.ObjectKey{Name: "bench-pg"}, &s); err == nil && meta.IsStatusConditionTrue(s.Status.Conditions, datav1alpha1.ConditionReady) {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("DatabaseServer not Ready after a minute; manager log: %s", mgr.logPath)
		}
		time.Sleep(100 * time.Millisecond)
	}

	// One namespace per run: a watch starts with the Secrets that already exist.
	orderlyEmpty := runOrderly(ctx, b, c, "bench-db-empty", n, "empty", "")
	orderlyClone := runOrderly(ctx, b, c, "bench-db-clone", clones, "clone", "seed")
	cpu := cpuSeconds(mgr.pid)
	peak := peakRSS(mgr.pid)

	be50, be99 := percentiles(baseEmpty)
	bc50, bc99 := percentiles(baseClone)
	oe50, oe99 := percentiles(orderlyEmpty)
	oc50, oc99 := percentiles(orderlyClone)
	fmt.Printf("\nDevDatabase benchmark: PostgreSQL %s on loopback, all created at once; %d at a time on both sides (the manager's DevDatabase workers at its default flags; admin pool %d); Orderly as its ServiceAccount\n", srv.Host, dbConcurrency, dbPoolSize)
	fmt.Printf("  empty databases (%d):\n", n)
	fmt.Printf("    baseline: same SQL straight to the server   p50 %7.3fs  p99 %7.3fs\n", be50.Seconds(), be99.Seconds())
	fmt.Printf("    orderly:  create -> Secret ready            p50 %7.3fs  p99 %7.3fs  (target p50 < 1s)\n", oe50.Seconds(), oe99.Seconds())
	fmt.Printf("    ratio orderly/baseline                      p50 %7.2fx  p99 %7.2fx  (target <= 1.5x)\n", oe50.Seconds()/be50.Seconds(), oe99.Seconds()/be99.Seconds())
	fmt.Printf("  template clones of a %s template (%d):\n", size, clones)
	fmt.Printf("    baseline: same SQL straight to the server   p50 %7.3fs  p99 %7.3fs\n", bc50.Seconds(), bc99.Seconds())
	fmt.Printf("    orderly:  create -> Secret ready            p50 %7.3fs  p99 %7.3fs\n", oc50.Seconds(), oc99.Seconds())
	fmt.Printf("    ratio orderly/baseline                      p50 %7.2fx  p99 %7.2fx  (target <= 1.5x)\n", oc50.Seconds()/bc50.Seconds(), oc99.Seconds()/bc99.Seconds())
	fmt.Printf("  manager CPU time %.2fs, peak memory %.1f MiB\n", cpu, float64(peak)/(1<<20))
	b.ReportMetric(oe50.Seconds(), "empty-p50-s")
	b.ReportMetric(oe50.Seconds()/be50.Seconds(), "empty-p50-ratio")
	b.ReportMetric(oc50.Seconds()/bc50.Seconds(), "clone-p50-ratio")
}
