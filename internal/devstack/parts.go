package devstack

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/config"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/localpg"
	"orderly.dev/orderly/internal/standin"
	"orderly.dev/orderly/internal/standin/bind"
	"orderly.dev/orderly/internal/standin/certmanager"
	"orderly.dev/orderly/internal/standin/images"
	"orderly.dev/orderly/internal/standin/prom"
	"orderly.dev/orderly/internal/standin/registry"
	"orderly.dev/orderly/internal/standin/versitygw"
)

// devFieldManager applies what the stand-ins need in the cluster (Gateways,
// issuers): not orderly, which is the controllers' own.
const devFieldManager = "orderly-dev"

// What the samples name (config/samples), kept in one place.
const (
	postgresSecret = "postgres-admin" // in the manager's namespace
	ordersDatabase = "orders"

	backupBucket = "acme-db-backups"
	backupPrefix = "nightly/orders/"
	backupSecret = "orders-backups-readonly" // in namespace default, beside the BackupVerification
	backupsKept  = 3

	zone       = "int.example.com"
	tsigSecret = "int-example-tsig" // in the manager's namespace

	memberProfile = "eu-west-1" // ClusterProfile fleet/eu-west-1
	memberSecret  = "kubeconfig-eu-west-1"
	memberAllowed = "shop"

	certManagerNamespace = "cert-manager"
	caIssuer             = "internal-ca"
)

func ensureNamespace(ctx context.Context, c client.Client, name string) error {
	return devcluster.EnsureNamespace(ctx, c, name, devFieldManager)
}

// writeSecret creates or updates a Secret the samples refer to (devcluster.WriteSecret:
// one Orderly did not create is left alone).
func writeSecret(ctx context.Context, c client.Client, key types.NamespacedName, data map[string][]byte, annotations map[string]string) error {
	return devcluster.WriteSecret(ctx, c, key, data, devcluster.SecretWrite{
		FieldManager: devFieldManager, Annotations: annotations, NotOurs: "delete it to have the stand-in's"})
}

func (s *Stack) dir(part Part) string { return filepath.Join(s.Dir, string(part)) }

// upPostgres runs the local PostgreSQL, writes its admin Secret and keeps the
// sample databases: app_seed (the DatabaseServer's template) and orders (what the
// backups are dumps of).
func (s *Stack) upPostgres(ctx context.Context) (Result, error) {
	if _, err := localpg.InstallBinDir(); err != nil {
		if errors.Is(err, localpg.ErrNotInstalled) {
			return Result{}, &standin.MissingError{What: "PostgreSQL (Debian's postgresql)", Install: localpg.InstallCommand, Env: localpg.BinDirEnv}
		}
		return Result{}, err
	}
	d := localpg.Dev{Dir: s.PostgresDir, Port: int32(s.Ports.Postgres)}
	password, version, err := d.Up(ctx)
	if err != nil {
		return Result{}, fmt.Errorf("%w ('orderly dev postgres down' deletes it to start afresh)", err)
	}
	s.PostgresPassword = password
	if err := localpg.WriteAdminSecret(ctx, s.c, types.NamespacedName{Namespace: ManagerNamespace, Name: postgresSecret}, password); err != nil {
		return Result{}, err
	}
	if err := s.seedOrders(ctx); err != nil {
		return Result{}, err
	}
	return Result{Detail: fmt.Sprintf("PostgreSQL %s on 127.0.0.1:%d (files in %s), admin in Secret %s/%s, sample databases %s and %s",
		version, s.Ports.Postgres, s.PostgresDir, ManagerNamespace, postgresSecret, localpg.DevTemplate, ordersDatabase)}, nil
}

func (s *Stack) postgresURL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", localpg.Admin, s.PostgresPassword, s.Ports.Postgres, db)
}

// seedOrders creates the orders database once (customers, and 1200 orders that
// refer to them), and dates its orders within the last four days at every Up, so
// that a dump made now passes the sample's checks (no orphan, recent orders).
func (s *Stack) seedOrders(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	admin, err := pgx.Connect(ctx, s.postgresURL("postgres"))
	if err != nil {
		return fmt.Errorf("connecting to the local PostgreSQL: %w", err)
	}
	defer func() { _ = admin.Close(context.WithoutCancel(ctx)) }()
	var n int
	if err := admin.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", ordersDatabase).Scan(&n); err != nil {
		return err
	}
	if n == 0 {
		if _, err := admin.Exec(ctx, "CREATE DATABASE "+pgx.Identifier{ordersDatabase}.Sanitize()); err != nil {
			return fmt.Errorf("creating the sample database %s: %w", ordersDatabase, err)
		}
	}
	db, err := pgx.Connect(ctx, s.postgresURL(ordersDatabase))
	if err != nil {
		return err
	}
	defer func() { _ = db.Close(context.WithoutCancel(ctx)) }()
	_, err = db.Exec(ctx, `CREATE TABLE IF NOT EXISTS customers (id int PRIMARY KEY, name text NOT NULL);
CREATE TABLE IF NOT EXISTS orders (id int PRIMARY KEY, customer_id int NOT NULL REFERENCES customers (id),
  total numeric(10,2) NOT NULL, created_at timestamptz NOT NULL);
INSERT INTO customers SELECT g, 'customer ' || g FROM generate_series(1, 50) g ON CONFLICT DO NOTHING;
INSERT INTO orders SELECT g, 1 + g % 50, 5 + (g % 97) * 1.25, now() FROM generate_series(1, 1200) g ON CONFLICT DO NOTHING;
UPDATE orders SET created_at = now() - (id % 96) * interval '1 hour';`)
	if err != nil {
		return fmt.Errorf("seeding the sample database %s: %w", ordersDatabase, err)
	}
	return nil
}

// upS3 runs the S3 store, writes the BackupVerification's credentials Secret, and
// uploads a fresh pg_dump of the orders database (pgReady says whether PostgreSQL
// came up), keeping the newest few.
func (s *Stack) upS3(ctx context.Context, out io.Writer, pgReady func() bool) (Result, error) {
	if _, err := versitygw.Build(ctx, out); err != nil {
		return Result{}, err
	}
	srv, err := versitygw.Run(ctx, versitygw.Options{Dir: s.dir(S3), Port: s.Ports.S3, Detached: s.Detached})
	if err != nil {
		return Result{}, err
	}
	if err := srv.CreateBucket(ctx, backupBucket); err != nil {
		return Result{}, fmt.Errorf("creating bucket %s: %w", backupBucket, err)
	}
	if err := writeSecret(ctx, s.c, types.NamespacedName{Namespace: "default", Name: backupSecret}, map[string][]byte{
		datav1alpha1.S3AccessKeyIDKey: []byte(srv.AccessKey), datav1alpha1.S3SecretAccessKeyKey: []byte(srv.SecretKey),
	}, nil); err != nil {
		return Result{}, err
	}
	if !pgReady() {
		return Result{}, fmt.Errorf("versitygw %s runs at %s, but holds no backup: the local PostgreSQL, whose database it is a dump of, did not come up", versitygw.Version, srv.Endpoint)
	}
	key, size, err := s.uploadDump(ctx, srv)
	if err != nil {
		return Result{}, err
	}
	return Result{Detail: fmt.Sprintf("versitygw %s at %s, bucket %s holding %s (%d bytes, a pg_dump of %s made now), credentials in Secret default/%s",
		versitygw.Version, srv.Endpoint, backupBucket, key, size, ordersDatabase, backupSecret)}, nil
}

func (s *Stack) uploadDump(ctx context.Context, srv *versitygw.Server) (string, int, error) {
	bin, err := localpg.FindBinDir()
	if err != nil {
		return "", 0, err
	}
	var dump, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "pg_dump"), "-Fc", "--no-owner", "--no-privileges", "--dbname="+s.postgresURL(ordersDatabase))
	zw := gzip.NewWriter(&dump)
	cmd.Stdout, cmd.Stderr = zw, &stderr
	if err := cmd.Run(); err != nil {
		return "", 0, fmt.Errorf("pg_dump %s: %w: %s", ordersDatabase, err, strings.TrimSpace(stderr.String()))
	}
	if err := zw.Close(); err != nil {
		return "", 0, err
	}
	name := "orders-" + time.Now().UTC().Format("20060102T150405Z") + ".dump.gz"
	key := backupPrefix + name
	sum := sha256.Sum256(dump.Bytes())
	if err := srv.Put(ctx, backupBucket, key, dump.Bytes()); err != nil {
		return "", 0, fmt.Errorf("uploading %s: %w", key, err)
	}
	if err := srv.Put(ctx, backupBucket, key+".sha256", []byte(hex.EncodeToString(sum[:])+"  "+name+"\n")); err != nil {
		return "", 0, err
	}
	keys, err := srv.Keys(ctx, backupBucket)
	if err != nil {
		return "", 0, err
	}
	var dumps []string
	for _, k := range keys {
		if strings.HasPrefix(k, backupPrefix) && strings.HasSuffix(k, ".dump.gz") {
			dumps = append(dumps, k)
		}
	}
	slices.Sort(dumps) // the timestamp in the name orders them
	for len(dumps) > backupsKept {
		_ = srv.Delete(ctx, backupBucket, dumps[0])
		_ = srv.Delete(ctx, backupBucket, dumps[0]+".sha256")
		dumps = dumps[1:]
	}
	return key, dump.Len(), nil
}

// upDNS runs BIND serving the sample zone and writes its TSIG key into the Secret
// the DomainZone names.
func (s *Stack) upDNS(ctx context.Context) (Result, error) {
	srv, err := bind.Run(bind.Options{Zones: []string{zone}, Dir: s.dir(DNS), Port: s.Ports.DNS, Detached: s.Detached})
	if err != nil {
		return Result{}, err
	}
	if err := writeSecret(ctx, s.c, types.NamespacedName{Namespace: ManagerNamespace, Name: tsigSecret}, map[string][]byte{
		"name": []byte(bind.KeyName), "algorithm": []byte(bind.KeyAlgorithm), "secret": []byte(srv.KeySecret),
	}, nil); err != nil {
		return Result{}, err
	}
	return Result{Detail: fmt.Sprintf("BIND (named) on %s serving %s, its TSIG key in Secret %s/%s", srv.Addr, zone, ManagerNamespace, tsigSecret)}, nil
}

// gatewayAddress is what the stand-in writes as every Gateway's address: the
// records ServiceDomains publish point at loopback.
const gatewayAddress = "127.0.0.1"

// upGatewayAPI installs the Gateway API CRDs and the samples' Gateways, and writes
// their address into their status, as a Gateway controller would.
func (s *Stack) upGatewayAPI(ctx context.Context) (Result, error) {
	crds, err := devcluster.GatewayAPIManifests(ctx)
	if err != nil {
		return Result{}, err
	}
	gateways, err := config.DevFile("gateway-api.yaml")
	if err != nil {
		return Result{}, err
	}
	if err := devcluster.Apply(ctx, s.Kubeconfig, devFieldManager, append(crds, gateways), io.Discard); err != nil {
		return Result{}, err
	}
	names, err := objectsOf(gateways, "Gateway")
	if err != nil {
		return Result{}, err
	}
	for _, key := range names {
		gw := &unstructured.Unstructured{}
		gw.SetAPIVersion("gateway.networking.k8s.io/v1")
		gw.SetKind("Gateway")
		gw.SetNamespace(key.Namespace)
		gw.SetName(key.Name)
		patch := fmt.Appendf(nil, `{"status":{"addresses":[{"type":"IPAddress","value":%q}]}}`, gatewayAddress)
		if err := s.c.Status().Patch(ctx, gw, client.RawPatch(types.MergePatchType, patch), client.FieldOwner(devFieldManager)); err != nil {
			return Result{}, fmt.Errorf("writing the address of Gateway %s: %w", key, err)
		}
	}
	return Result{Detail: fmt.Sprintf("Gateway API %s CRDs, Gateways %s (address %s)", devcluster.GatewayAPIVersion, keyList(names), gatewayAddress)}, nil
}

// upCertManager runs cert-manager's controller with its CRDs, and creates the
// samples' issuers and the Certificate payments-tls (config/dev/cert-manager.yaml);
// it waits until the CA issuer is ready.
func (s *Stack) upCertManager(ctx context.Context, out io.Writer) (Result, error) {
	if _, err := certmanager.Build(ctx, out); err != nil {
		return Result{}, err
	}
	crds, err := certmanager.CRDs(ctx)
	if err != nil {
		return Result{}, err
	}
	if err := devcluster.Apply(ctx, s.Kubeconfig, devFieldManager, crds, io.Discard); err != nil {
		return Result{}, err
	}
	if err := ensureNamespace(ctx, s.c, certManagerNamespace); err != nil {
		return Result{}, err
	}
	ctrl, err := certmanager.Run(ctx, certmanager.Options{Kubeconfig: s.Kubeconfig, Namespace: certManagerNamespace,
		Dir: s.dir(CertManager), MetricsPort: s.Ports.CertManagerMetrics, Detached: s.Detached})
	if err != nil {
		return Result{}, err
	}
	issuers, err := config.DevFile("cert-manager.yaml")
	if err != nil {
		return Result{}, err
	}
	if err := devcluster.Apply(ctx, s.Kubeconfig, devFieldManager, [][]byte{issuers}, io.Discard); err != nil {
		return Result{}, err
	}
	if err := s.waitReadyCondition(ctx, "cert-manager.io/v1", "ClusterIssuer", types.NamespacedName{Name: caIssuer}, 2*time.Minute); err != nil {
		return Result{}, fmt.Errorf("%w (cert-manager's log: %s)", err, ctrl.LogFile())
	}
	return Result{Detail: fmt.Sprintf("cert-manager %s controller (pid %d, log %s), ClusterIssuer %s (a CA it issued itself), Certificate default/payments-tls",
		certmanager.Version, ctrl.Pid(), ctrl.LogFile(), caIssuer)}, nil
}

// waitReadyCondition waits until the object's Ready condition is True.
func (s *Stack) waitReadyCondition(ctx context.Context, apiVersion, kind string, key types.NamespacedName, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	var last string
	for {
		u := &unstructured.Unstructured{}
		u.SetAPIVersion(apiVersion)
		u.SetKind(kind)
		err := s.c.Get(ctx, key, u)
		if err == nil {
			ok, msg := readyOf(u)
			if ok {
				return nil
			}
			last = msg
		} else {
			last = err.Error()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s %s not Ready after %s: %s", kind, key.Name, timeout, last)
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// readyOf reads an object's Ready condition: whether it is True, and otherwise its
// reason and message.
func readyOf(u *unstructured.Unstructured) (bool, string) {
	conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
	var list []metav1.Condition
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok {
			continue
		}
		cond := metav1.Condition{}
		cond.Type, _ = m["type"].(string)
		st, _ := m["status"].(string)
		cond.Status = metav1.ConditionStatus(st)
		cond.Reason, _ = m["reason"].(string)
		cond.Message, _ = m["message"].(string)
		list = append(list, cond)
	}
	c := meta.FindStatusCondition(list, "Ready")
	switch {
	case c == nil:
		return false, "no Ready condition yet"
	case c.Status == metav1.ConditionTrue:
		return true, ""
	}
	return false, fmt.Sprintf("%s: %s", c.Reason, c.Message)
}

// The Canary samples' stand-in pods: a healthy storefront, and a checkout whose
// canary answers 20% of its requests with an error (docs: a rollback).
var canaryBehaviours = []string{
	"storefront/storefront/primary=50,0.01,60ms",
	"storefront/storefront/canary=50,0.01,60ms",
	"storefront/checkout/primary=50,0.01,60ms",
	"storefront/checkout/canary=50,0.2,60ms",
}

// canaryRelabel makes canaryapp's series read as the Canary samples' queries
// expect a real application's: http_requests_total and
// http_request_duration_seconds_bucket, by namespace and pod (TARGET-VARIANT-0).
var canaryRelabel = []prom.Relabel{
	{SourceLabels: []string{"target", "variant"}, Separator: "-", Regex: "(.+)", TargetLabel: "pod", Replacement: "${1}-0"},
	{SourceLabels: []string{"__name__"}, Regex: "canaryapp_(.*)", TargetLabel: "__name__", Replacement: "http_${1}"},
}

// upPrometheus runs the Canary samples' stand-in pods (canaryapp, in `orderly dev
// serve-canary-metrics`) and Prometheus scraping them, and the manager when its
// metrics address is known.
func (s *Stack) upPrometheus() (Result, error) {
	// Missing Prometheus is said before anything starts.
	if _, err := prom.Binary(); err != nil {
		return Result{}, err
	}
	app := fmt.Sprintf("127.0.0.1:%d", s.Ports.CanaryApp)
	args := append([]string{"dev", "serve-canary-metrics", "--listen", app}, behaviourFlags()...)
	if err := s.runOrderly("canaryapp", s.dir(Prometheus), args, "http://"+app+"/metrics"); err != nil {
		return Result{}, err
	}
	jobs := []prom.Job{{Name: "canary-samples", Targets: []string{app}, Relabel: canaryRelabel}}
	if s.ManagerMetrics != "" {
		jobs = append(jobs, prom.Job{Name: "orderly", Targets: []string{s.ManagerMetrics}})
	}
	srv, err := prom.Run(prom.Options{Dir: s.dir(Prometheus), Port: s.Ports.Prometheus, Jobs: jobs,
		ScrapeInterval: 5 * time.Second, Retention: 24 * time.Hour, Detached: s.Detached})
	if err != nil {
		return Result{}, err
	}
	s.PrometheusURL = srv.URL
	return Result{Detail: fmt.Sprintf("Prometheus at %s scraping the Canary samples' stand-in pods on %s", srv.URL, app)}, nil
}

func behaviourFlags() []string {
	var out []string
	for _, b := range canaryBehaviours {
		out = append(out, "--behaviour", b)
	}
	return out
}

// runOrderly runs the orderly binary with args as the stand-in name in dir, unless
// it already runs with the same arguments, and waits until url answers.
func (s *Stack) runOrderly(name, dir string, args []string, url string) error {
	p := &standin.Process{Name: name, Dir: dir, Detached: s.Detached}
	argsFile := filepath.Join(dir, name+".args")
	want := strings.Join(append([]string{s.OrderlyBin}, args...), "\n")
	answers := func() error {
		resp, err := http.Get(url) //nolint:noctx // bounded by WaitReady
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		return nil
	}
	if p.Running() {
		if b, _ := os.ReadFile(argsFile); string(b) == want && p.WaitReady(5*time.Second, answers) == nil {
			return nil
		}
		if err := p.Stop(10 * time.Second); err != nil {
			return err
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(argsFile, []byte(want), 0o644); err != nil {
		return err
	}
	if err := p.Start(exec.Command(s.OrderlyBin, args...)); err != nil {
		return err
	}
	if err := p.WaitReady(30*time.Second, answers); err != nil {
		_ = p.Stop(5 * time.Second)
		return err
	}
	return nil
}

// The images of the samples: a clean and a vulnerable build of shop/web, and the
// Canaries' versions (clean), all small dpkg-based images.
var (
	cleanPackages = []images.Pkg{{Name: "zlib1g", Version: "1:1.2.13.dfsg-1"}, {Name: "openssl", Version: "3.0.15-1~deb12u1"}}
	sampleImages  = map[string][]images.Pkg{
		"shop/web:1.4.2":   cleanPackages,
		"shop/web:1.4.1":   {{Name: "zlib1g", Version: "1:1.2.13.dfsg-1"}, {Name: "openssl", Version: "3.0.1-1"}},
		"storefront:1.0.0": cleanPackages,
		"storefront:1.1.0": cleanPackages,
		"checkout:2.0.0":   cleanPackages,
		"checkout:2.1.0":   cleanPackages,
	}
	// demoVulnerability is the offline database's one record: made up for the
	// samples (not a real advisory), Critical, in the openssl of shop/web:1.4.1.
	demoVulnerability = images.Vuln{ID: "ORDERLY-DEMO-0001", Ecosystem: "Debian:12", Package: "openssl",
		Fixed: "3.0.2-1", Severity: "CRITICAL"}
)

// upImages runs the registry, pushes the samples' images and writes the offline
// vulnerability database the manager's scanner reads (--imagescan-db-dir).
func (s *Stack) upImages(ctx context.Context) (Result, error) {
	reg, err := registry.Run(registry.Options{Dir: s.dir(Images), Port: s.Ports.Registry, Detached: s.Detached})
	if err != nil {
		return Result{}, err
	}
	names := make([]string, 0, len(sampleImages))
	for name := range sampleImages {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		if _, err := images.Push(ctx, reg.Host, name, images.Contents{Dpkg: sampleImages[name]}); err != nil {
			return Result{}, err
		}
	}
	osv := filepath.Join(s.dir(Images), "osv")
	if err := images.WriteOSV(osv, demoVulnerability); err != nil {
		return Result{}, err
	}
	s.RegistryHost, s.OSVDir = reg.Host, osv
	return Result{Detail: fmt.Sprintf("registry at %s with %s; offline vulnerability database %s (%s: Critical, in shop/web:1.4.1's openssl)",
		reg.Host, strings.Join(names, ", "), osv, demoVulnerability.ID)}, nil
}

// upMember starts a second local cluster and registers it as the member the
// sample ClusterProfile fleet/eu-west-1 names: its kubeconfig, with the credentials
// inline, in a Secret in the manager's namespace.
func (s *Stack) upMember(ctx context.Context) (Result, error) {
	path, err := devcluster.Up(ctx, devcluster.Options{Name: s.MemberCluster, Nodes: 1}, io.Discard)
	if err != nil {
		return Result{}, fmt.Errorf("starting the member cluster %s: %w", s.MemberCluster, err)
	}
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		return Result{}, err
	}
	// Orderly takes only inline credentials: put the files' contents in.
	if err := clientcmdapi.FlattenConfig(kc); err != nil {
		return Result{}, err
	}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return Result{}, err
	}
	if err := writeSecret(ctx, s.c, types.NamespacedName{Namespace: ManagerNamespace, Name: memberSecret},
		map[string][]byte{fleetv1alpha1.KubeconfigKey: raw}, map[string]string{
			fleetv1alpha1.ClusterProfileAnnotation:    "fleet/" + memberProfile,
			fleetv1alpha1.AllowedNamespacesAnnotation: memberAllowed,
		}); err != nil {
		return Result{}, err
	}
	return Result{Detail: fmt.Sprintf("local cluster %s (1 node) as member %s, kubeconfig in Secret %s/%s", s.MemberCluster, memberProfile, ManagerNamespace, memberSecret)}, nil
}

func keyList(keys []types.NamespacedName) string {
	s := make([]string, len(keys))
	for i, k := range keys {
		s[i] = k.String()
	}
	return strings.Join(s, ", ")
}
