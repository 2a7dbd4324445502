//go:build integration

package placement

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/internal/testing/testenv"
)

const (
	timeout          = 40 * time.Second
	poll             = 100 * time.Millisecond
	managerNamespace = "orderly-system"
	fleetNamespace   = "fleet"
)

var (
	hub *testenv.Env
	// k acts on the hub as a person would.
	k         client.Client
	fakeClock = clocktesting.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	// members by ClusterProfile name: eu1 (region eu) and us1 (region us), reached
	// as an administrator; rb1 (env rbac), reached as a user that may not watch
	// Secrets and admitting only namespace rbac.
	members = map[string]*testMember{}
)

// testMember is a member cluster: a real kube-apiserver and etcd, reached by the
// manager through a TCP proxy that a test can cut (the API server "stops" for
// Orderly while its data stays) and restore on the same address.
type testMember struct {
	env    *envtest.Environment
	client client.Client
	proxy  *proxy
}

// withTestTimings is the controller with short probes, timeouts and requeues.
func withTestTimings() kit.Controller {
	t := defaultTimings()
	t.ProbeInterval, t.ProbeTimeout, t.RequestTimeout, t.SyncTimeout, t.MaxRequeue = 300*time.Millisecond, time.Second, 2*time.Second, 5*time.Second, time.Second
	// Far beyond the tests' timeout: what a member changes reaches Orderly through
	// the watches, or, where they are refused (rb1), through the short resync.
	t.Resync, t.FallbackResync = 10*time.Minute, 2*time.Second
	c := Controller
	c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		return setup(ctx, mgr, deps, t)
	}
	return c
}

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		hub, k = e, e.Client
		var stops []func()
		teardown := func() {
			for i := len(stops) - 1; i >= 0; i-- {
				stops[i]()
			}
		}
		if _, err := envtest.InstallCRDs(e.Config, envtest.CRDInstallOptions{Paths: []string{filepath.Join(testenv.RepoRoot(), "config", "crd", "external")}}); err != nil {
			return teardown, fmt.Errorf("installing the cluster inventory CRDs: %w", err)
		}
		ctx := context.Background()
		for _, ns := range []string{managerNamespace, fleetNamespace} {
			if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				return teardown, err
			}
		}
		// addMember starts a member and queues its stop. Each stop holds its own
		// member: a closure over one reused variable once stopped the last member
		// twice and left an earlier one's API server and etcd running.
		addMember := func(name string) (*testMember, error) {
			tm, err := startMember()
			if err != nil {
				return nil, err
			}
			stops = append(stops, tm.stop)
			members[name] = tm
			return tm, nil
		}
		for name, region := range map[string]string{"eu1": "eu", "us1": "us"} {
			tm, err := addMember(name)
			if err != nil {
				return teardown, err
			}
			if err := register(ctx, name, map[string]string{"region": region, "env": "test"}, "dup, div,none,cap,hub,twin", tm, tm.env.Config); err != nil {
				return teardown, err
			}
		}
		tm, err := addMember("rb1")
		if err != nil {
			return teardown, err
		}
		cfg, err := restrictedUser(ctx, tm, "rbac")
		if err != nil {
			return teardown, err
		}
		if err := register(ctx, "rb1", map[string]string{"env": "rbac"}, "rbac", tm, cfg); err != nil {
			return teardown, err
		}
		// fm1's health is written by its fleet manager (the test plays it).
		tm, err = addMember("fm1")
		if err != nil {
			return teardown, err
		}
		if err := register(ctx, "fm1", map[string]string{"env": "fleetmanager"}, "fm", tm, tm.env.Config,
			fleetv1alpha1.HealthSourceAnnotation, fleetv1alpha1.HealthSourceFleetManager); err != nil {
			return teardown, err
		}
		stop, err := e.StartManager(kit.Deps{Clock: fakeClock, Namespace: managerNamespace}, []kit.Controller{withTestTimings()})
		if err != nil {
			return teardown, err
		}
		stops = append(stops, stop)
		return teardown, nil
	})
}

func startMember() (*testMember, error) {
	env := &envtest.Environment{}
	cfg, err := env.Start()
	if err != nil {
		return nil, err
	}
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	p, err := newProxy(u.Host)
	if err != nil {
		_ = env.Stop()
		return nil, err
	}
	return &testMember{env: env, client: c, proxy: p}, nil
}

// stop cuts the member's proxy and stops its API server and etcd.
func (tm *testMember) stop() {
	tm.proxy.stop()
	if err := tm.env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "stopping a member API server:", err)
	}
}

// restrictedUser makes a user on the member with what placing in namespace ns
// needs, except watching Secrets, and returns its credentials.
func restrictedUser(ctx context.Context, tm *testMember, ns string) (*rest.Config, error) {
	const user = "orderly-restricted"
	u, err := tm.env.AddUser(envtest.User{Name: user}, tm.env.Config)
	if err != nil {
		return nil, err
	}
	write := []string{"get", "list", "create", "patch", "delete"}
	subjects := []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "create"}}}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns}, Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"apps"}, Resources: []string{"deployments", "statefulsets"}, Verbs: append(write, "watch")},
			{APIGroups: []string{""}, Resources: []string{"configmaps", "services", "serviceaccounts"}, Verbs: append(write, "watch")},
			{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: write},
		}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns}, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: user}},
	} {
		if err := tm.client.Create(ctx, o); err != nil {
			return nil, err
		}
	}
	return u.Config(), nil
}

// register stores the member's kubeconfig for cfg's credentials (through its proxy)
// in the manager's namespace, admitting the allowed namespaces, and creates its
// ClusterProfile.
func register(ctx context.Context, name string, profileLabels map[string]string, allowed string, tm *testMember, cfg *rest.Config, profileAnnotations ...string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters[name] = &clientcmdapi.Cluster{Server: "https://" + tm.proxy.addr, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: name, AuthInfo: name}
	kc.CurrentContext = name
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig-" + name, Namespace: managerNamespace,
			Annotations: map[string]string{
				fleetv1alpha1.ClusterProfileAnnotation:    fleetNamespace + "/" + name,
				fleetv1alpha1.AllowedNamespacesAnnotation: allowed,
			}},
		Data: map[string][]byte{fleetv1alpha1.KubeconfigKey: raw},
	}
	if err := k.Create(ctx, secret); err != nil {
		return err
	}
	annotations := map[string]string{fleetv1alpha1.KubeconfigSecretAnnotation: secret.Name}
	for i := 0; i+1 < len(profileAnnotations); i += 2 {
		annotations[profileAnnotations[i]] = profileAnnotations[i+1]
	}
	return k.Create(ctx, &clusterinventoryv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: fleetNamespace,
			Labels:      profileLabels,
			Annotations: annotations},
		Spec: clusterinventoryv1alpha1.ClusterProfileSpec{ClusterManager: clusterinventoryv1alpha1.ClusterManager{Name: "test"}},
	})
}

// proxy forwards TCP to an API server until stopped; start listens again on the
// same address.
type proxy struct {
	target, addr string
	mu           sync.Mutex
	ln           net.Listener
	conns        map[net.Conn]bool
}

func newProxy(target string) (*proxy, error) {
	p := &proxy{target: target, conns: map[net.Conn]bool{}}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p.addr = ln.Addr().String()
	p.serve(ln)
	return p, nil
}

func (p *proxy) serve(ln net.Listener) {
	p.mu.Lock()
	p.ln = ln
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.forward(c)
		}
	}()
}

func (p *proxy) forward(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	p.conns[c], p.conns[up] = true, true
	p.mu.Unlock()
	go func() { _, _ = io.Copy(up, c); _ = up.Close() }()
	_, _ = io.Copy(c, up)
	_ = c.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

func (p *proxy) stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for c := range p.conns {
		_ = c.Close()
	}
}

func (p *proxy) start(t *testing.T) {
	t.Helper()
	ln, err := net.Listen("tcp", p.addr)
	if err != nil {
		t.Fatalf("listening again on %s: %v", p.addr, err)
	}
	p.serve(ln)
}

// eventually polls cond until it returns nil or the timeout ends.
func eventually(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			dump(t)
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(poll)
	}
}

// dump logs the policies' and ClusterProfiles' status, to diagnose a failure.
func dump(t *testing.T) {
	var pps fleetv1alpha1.PlacementPolicyList
	_ = k.List(context.Background(), &pps)
	for _, pp := range pps.Items {
		t.Logf("PlacementPolicy %s/%s: %+v", pp.Namespace, pp.Name, pp.Status)
	}
	var cps clusterinventoryv1alpha1.ClusterProfileList
	_ = k.List(context.Background(), &cps)
	for _, cp := range cps.Items {
		t.Logf("ClusterProfile %s/%s: %+v", cp.Namespace, cp.Name, cp.Status.Conditions)
	}
}

// consistently fails when cond fails at any poll within d.
func consistently(t *testing.T, d time.Duration, what string, cond func() error) {
	t.Helper()
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(poll) {
		if err := cond(); err != nil {
			dump(t)
			t.Fatalf("%s: %v", what, err)
		}
	}
}

func makeNamespace(t *testing.T, name string) {
	t.Helper()
	if err := k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}); err != nil {
		t.Fatal(err)
	}
}

func deployment(ns, name, image string, replicas int32) *appsv1.Deployment {
	l := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{"app": name, "placed": "yes"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: image}}},
			},
		},
	}
}

func memberDeployment(member, ns, name string) (*appsv1.Deployment, error) {
	var d appsv1.Deployment
	err := members[member].client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &d)
	return &d, err
}

func wantReplicas(member, ns, name string, want int32) func() error {
	return func() error {
		d, err := memberDeployment(member, ns, name)
		if err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 1); got != want {
			return fmt.Errorf("%s: %s/%s has %d replicas, want %d", member, ns, name, got, want)
		}
		return nil
	}
}

func getPolicy(t *testing.T, ns, name string) *fleetv1alpha1.PlacementPolicy {
	t.Helper()
	var pp fleetv1alpha1.PlacementPolicy
	if err := k.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, &pp); err != nil {
		t.Fatal(err)
	}
	return &pp
}

func clusterPhase(pp *fleetv1alpha1.PlacementPolicy, name string) fleetv1alpha1.ClusterPhase {
	for _, c := range pp.Status.Clusters {
		if c.Name == name {
			return c.Phase
		}
	}
	return ""
}

func condition(pp *fleetv1alpha1.PlacementPolicy, typ string) *metav1.Condition {
	return meta.FindStatusCondition(pp.Status.Conditions, typ)
}
