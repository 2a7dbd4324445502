//go:build integration

package backupverification

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database/postgres"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/localpg"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testpg"
	"orderly.dev/orderly/internal/testing/tests3"
)

var (
	// k is a client straight to the API server: it acts as a person, observes the world.
	k   client.Client
	env *testenv.Env
	pg  *testpg.Server
	s3s *tests3.Server
	// dumps are made once, with real pg_dump, from the database "shop" the suite fills.
	dumps struct{ custom, plain []byte }
	seq   atomic.Int64
)

const (
	timeout          = 60 * time.Second
	poll             = 100 * time.Millisecond
	managerNamespace = "orderly-system"
	// suiteNamespace is the one namespace the suite's manager watches; tests that
	// run a manager of their own use others.
	suiteNamespace = "bv"
	bucket         = "backups"
	// shopRows is how many orders the shop database has.
	shopRows = 1500
)

func uniq(prefix string) string { return fmt.Sprintf("%s-%d", prefix, seq.Add(1)) }

func TestMain(m *testing.M) {
	var err error
	if pg, err = testpg.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "starting PostgreSQL for the tests:", err)
		os.Exit(1)
	}
	ctx := context.Background()
	if s3s, err = tests3.Start(ctx); err != nil {
		pg.Close()
		fmt.Fprintln(os.Stderr, "starting versitygw for the tests:", err)
		os.Exit(1)
	}
	if err := makeDumps(ctx); err != nil {
		pg.Close()
		s3s.Close()
		fmt.Fprintln(os.Stderr, "making the dumps:", err)
		os.Exit(1)
	}
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k, env = e.Client, e
		for _, ns := range []string{managerNamespace, suiteNamespace} {
			if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return nil, err
			}
		}
		if err := s3s.CreateBucket(ctx, bucket); err != nil {
			return nil, err
		}
		connector := postgres.NewConnector()
		stop, err := e.StartManager(kit.Deps{Databases: connector, Namespace: managerNamespace}, []kit.Controller{Controller}, watchOnly(suiteNamespace))
		return func() {
			if stop != nil {
				stop()
			}
			connector.Close()
			s3s.Close()
			pg.Close()
		}, err
	})
}

// watchOnly makes a manager see the BackupVerifications of ns alone.
func watchOnly(ns string) func(*ctrl.Options) {
	return func(o *ctrl.Options) { o.Cache.DefaultNamespaces = map[string]cache.Config{ns: {}} }
}

// makeDumps fills the database shop and dumps it in both formats with pg_dump.
func makeDumps(ctx context.Context) error {
	admin, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		return err
	}
	defer admin.Close(ctx)
	if _, err := admin.Exec(ctx, `CREATE DATABASE shop`); err != nil {
		return err
	}
	shop, err := pgx.Connect(ctx, pg.URL("shop"))
	if err != nil {
		return err
	}
	defer shop.Close(ctx)
	if _, err := shop.Exec(ctx, fmt.Sprintf(`
CREATE SCHEMA sales;
CREATE TABLE sales.customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE sales.orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES sales.customers, total numeric(10,2) NOT NULL);
INSERT INTO sales.customers SELECT g, 'customer ' || g FROM generate_series(1, 100) g;
INSERT INTO sales.orders SELECT g, 1 + g %% 100, g * 1.5 FROM generate_series(1, %d) g;`, shopRows)); err != nil {
		return err
	}
	bin, err := localpg.FindBinDir()
	if err != nil {
		return err
	}
	dump := func(format string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "--format="+format, "--no-owner", "--no-privileges", "--dbname="+pg.URL("shop"))
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return nil, fmt.Errorf("pg_dump: %w: %s", err, stderr.String())
		}
		return out, nil
	}
	if dumps.custom, err = dump("custom"); err != nil {
		return err
	}
	dumps.plain, err = dump("plain")
	return err
}

func gzipped(b []byte) []byte {
	var buf bytes.Buffer
	w := gzip.NewWriter(&buf)
	_, _ = w.Write(b)
	_ = w.Close()
	return buf.Bytes()
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// upload puts body under a fresh prefix (with its .sha256 when withSum) and
// returns the prefix.
func upload(t *testing.T, name string, body []byte, withSum bool) string {
	t.Helper()
	ctx := context.Background()
	prefix := uniq("p") + "/"
	if err := s3s.Put(ctx, bucket, prefix+name, body); err != nil {
		t.Fatal(err)
	}
	if withSum {
		if err := s3s.Put(ctx, bucket, prefix+name+".sha256", []byte(sha(body)+"  "+name+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	return prefix
}

// newServer registers the suite's PostgreSQL as a DatabaseServer.
func newServer(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: uniq("admin")},
		StringData: map[string]string{"username": pg.Username, "password": pg.Password}}
	if err := k.Create(ctx, sec); err != nil {
		t.Fatal(err)
	}
	s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: uniq("pg")}, Spec: datav1alpha1.DatabaseServerSpec{
		Engine: datav1alpha1.EnginePostgres, Host: pg.Host, Port: pg.Port, SSLMode: "disable",
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: managerNamespace, Name: sec.Name},
	}}
	if err := k.Create(ctx, s); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), s)
		_ = k.Delete(context.Background(), sec)
	})
	return s.Name
}

// credentials creates the S3 credentials Secret in ns.
func credentials(t *testing.T, ns, access, secret string) string {
	t.Helper()
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uniq("s3")},
		StringData: map[string]string{datav1alpha1.S3AccessKeyIDKey: access, datav1alpha1.S3SecretAccessKeyKey: secret}}
	if err := k.Create(context.Background(), sec); err != nil {
		t.Fatal(err)
	}
	return sec.Name
}

// newBV builds a BackupVerification of prefix in the suite's bucket.
func newBV(t *testing.T, ns, server, prefix string, mutate func(*datav1alpha1.BackupVerificationSpec)) *datav1alpha1.BackupVerification {
	t.Helper()
	bv := &datav1alpha1.BackupVerification{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: uniq("bv")}, Spec: datav1alpha1.BackupVerificationSpec{
		Source: datav1alpha1.BackupSource{S3: &datav1alpha1.S3BackupSource{Endpoint: s3s.Endpoint, Insecure: true, Bucket: bucket, Prefix: prefix,
			CredentialsSecretRef: datav1alpha1.LocalSecretKeyReference{Name: credentials(t, ns, s3s.AccessKey, s3s.SecretKey)}}},
		Target:             datav1alpha1.BackupTarget{ServerRef: server},
		MaxRestoreDuration: metav1.Duration{Duration: time.Minute},
		Checks: datav1alpha1.BackupChecks{
			RequiredSchemas: []string{"sales"},
			Tables:          []datav1alpha1.TableCheck{{Name: "sales.orders", MinRows: shopRows}, {Name: "sales.customers", MinRows: 1}},
			SQL: []datav1alpha1.SQLCheck{
				{Name: "no-orphans", Query: "SELECT count(*) FROM sales.orders o LEFT JOIN sales.customers c ON c.id = o.customer_id WHERE c.id IS NULL", Expect: ptrTo("0")},
				{Name: "revenue", Query: "SELECT sum(total) FROM sales.orders", Min: ptrTo("1000")},
			},
		},
	}}
	if mutate != nil {
		mutate(&bv.Spec)
	}
	if err := k.Create(context.Background(), bv); err != nil {
		t.Fatal(err)
	}
	return bv
}

func ptrTo[T any](v T) *T { return &v }

// waitRun waits until bv has finished run n and returns it.
func waitRun(t *testing.T, bv *datav1alpha1.BackupVerification, n int64) *datav1alpha1.BackupVerification {
	t.Helper()
	deadline := time.Now().Add(timeout)
	var got datav1alpha1.BackupVerification
	for {
		if err := k.Get(context.Background(), client.ObjectKeyFromObject(bv), &got); err != nil {
			t.Fatal(err)
		}
		if r := got.Status.LastRun; r != nil && r.Number >= n && got.Status.CurrentRun == nil {
			return &got
		}
		if time.Now().After(deadline) {
			t.Fatalf("run %d of %s did not finish within %s; status: %+v", n, bv.Name, timeout, got.Status)
		}
		time.Sleep(poll)
	}
}

// throwawayDatabases lists the databases on the server made for bv's runs.
func throwawayDatabases(t *testing.T, bv *datav1alpha1.BackupVerification) []string {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	prefix := strings.TrimSuffix(throwaway(bv, 1).Name, "1")
	rows, err := conn.Query(ctx, `SELECT datname FROM pg_database WHERE starts_with(datname, $1)`, prefix)
	if err != nil {
		t.Fatal(err)
	}
	names, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		t.Fatal(err)
	}
	return names
}

// expectNoThrowaway fails when a database of bv's runs, or its role, is left.
func expectNoThrowaway(t *testing.T, bv *datav1alpha1.BackupVerification) {
	t.Helper()
	if dbs := throwawayDatabases(t, bv); len(dbs) > 0 {
		t.Fatalf("throwaway databases left behind: %v", dbs)
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, pg.URL("postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close(ctx)
	var n int
	prefix := strings.TrimSuffix(throwaway(bv, 1).Role, "1")
	if err := conn.QueryRow(ctx, `SELECT count(*) FROM pg_roles WHERE starts_with(rolname, $1)`, prefix).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n > 0 {
		t.Fatalf("%d throwaway roles left behind", n)
	}
}
