//go:build integration

package kit_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/testing/testenv"
)

// The test kinds: a ConfigMap labelled wantsLabel=<Kind>.<group> needs the objects of
// that kind of its own name and namespace (its reconcile reads their label "size").
const wantsLabel = "kit.orderly.dev/wants"

func widgetCRD(group, kind, plural string) string {
	return fmt.Sprintf(`apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: %[3]s.%[1]s
spec:
  group: %[1]s
  names: {kind: %[2]s, listKind: %[2]sList, plural: %[3]s, singular: %[4]s}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`, group, kind, plural, strings.ToLower(kind))
}

func installCRD(t *testing.T, content string) {
	t.Helper()
	dir := t.TempDir()
	NewWithT(t).Expect(os.WriteFile(filepath.Join(dir, "crd.yaml"), []byte(content), 0o600)).To(Succeed())
	_, err := envtest.InstallCRDs(env.Config, envtest.CRDInstallOptions{Paths: []string{dir}})
	NewWithT(t).Expect(err).NotTo(HaveOccurred())
}

// requestCounter counts the requests a manager sends to the API server, by method
// and path, the long-running watches included (counted when they start).
type requestCounter struct {
	mu       sync.Mutex
	requests map[string]int
}

func (c *requestCounter) RoundTrip(next http.RoundTripper, r *http.Request) (*http.Response, error) {
	c.mu.Lock()
	if c.requests == nil {
		c.requests = map[string]int{}
	}
	c.requests[r.Method+" "+r.URL.Path]++
	c.mu.Unlock()
	return next.RoundTrip(r)
}

// count is how many requests matched match (all of them for nil).
func (c *requestCounter) count(match func(method, path string) bool) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	n := 0
	for k, v := range c.requests {
		method, path, _ := strings.Cut(k, " ")
		if match == nil || match(method, path) {
			n += v
		}
	}
	return n
}

type roundTripperFunc func(*http.Request) (*http.Response, error)

func (f roundTripperFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// countingEnv is env with a config whose requests c counts: a manager started on it
// is observed.
func countingEnv(c *requestCounter) *testenv.Env {
	e := *env
	e.Config = rest.CopyConfig(env.Config)
	e.Config.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripperFunc(func(r *http.Request) (*http.Response, error) { return c.RoundTrip(next, r) })
	})
	return &e
}

// needer is a controller of ConfigMaps that need a kind found at run time, through
// kit.KindWatches, as Orderly's controllers do.
type needer struct {
	client.Client
	kinds   *kit.KindDetector
	watches *kit.KindWatches

	reconciles atomic.Int32
	mu         sync.Mutex
	seen       map[string]string // ConfigMap: what its last reconcile saw
}

func (n *needer) saw(key string) string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.seen[key]
}

func (n *needer) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	n.reconciles.Add(1)
	var cm corev1.ConfigMap
	if err := n.Get(ctx, req.NamespacedName, &cm); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	gk := schema.ParseGroupKind(cm.Labels[wantsLabel])
	seen := func() string {
		version, err := n.kinds.Version(gk)
		if err != nil {
			return "error: " + err.Error()
		}
		if version == "" {
			if !n.watches.WaitForKind(ctx, gk, req) {
				return "missing, not watched"
			}
			return "missing"
		}
		st := n.watches.Watch(ctx, "all", gk.WithVersion(version), handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
			return []reconcile.Request{{NamespacedName: client.ObjectKeyFromObject(o)}}
		}))
		switch {
		case st.Problem != "":
			return "problem: " + st.Problem
		case !st.Synced:
			return "syncing"
		}
		o := &metav1.PartialObjectMetadata{}
		o.SetGroupVersionKind(gk.WithVersion(version))
		if err := n.watches.Reader("all").Get(ctx, req.NamespacedName, o); err != nil {
			return "read: " + err.Error()
		}
		return "size " + o.Labels["size"]
	}()
	n.mu.Lock()
	n.seen[req.String()] = seen
	n.mu.Unlock()
	if seen == "syncing" {
		// The cache lists within moments; the kind's events come after.
		return reconcile.Result{RequeueAfter: 100 * time.Millisecond}, nil
	}
	return reconcile.Result{}, nil
}

// neederController runs a needer named name; the needer is set once the manager
// sets the controller up.
func neederController(name string, into **needer) kit.Controller {
	return kit.Controller{Name: name, Setup: func(_ context.Context, mgr ctrl.Manager, deps kit.Deps) error {
		kinds := kit.NewKindDetector(mgr.GetRESTMapper(), deps.ClockOrReal(), nil)
		kw, err := kit.NewKindWatches(mgr, kit.KindWatchOptions{Kinds: kinds, Views: []kit.View{{Name: "all"}}})
		if err != nil {
			return err
		}
		n := &needer{Client: mgr.GetClient(), kinds: kinds, watches: kw, seen: map[string]string{}}
		c, err := ctrl.NewControllerManagedBy(mgr).Named(name).WithOptions(deps.Options).
			For(&corev1.ConfigMap{}, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
				return o.GetLabels()[wantsLabel] != ""
			}))).Build(n)
		if err != nil {
			return err
		}
		*into = n
		return kw.Bind(c)
	}}
}

func needing(t *testing.T, ns, name, kind string) string {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{wantsLabel: kind}}}
	NewWithT(t).Expect(k.Create(context.Background(), cm)).To(Succeed())
	return ns + "/" + name
}

func namespace(t *testing.T, name string) {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})).To(Succeed())
}

// A kind whose CRD is installed after the controller started is picked up through
// the CRD watch, without polling: while it is missing, nothing is reconciled and
// nothing is asked of the API server about it; once installed, its objects are
// watched (their events bring the controller back) and read from the watch's cache.
func TestKindWatchesPickUpACRDInstalledLater(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	requests := &requestCounter{}
	var n *needer
	countingEnv(requests).StartManagerForTest(t, kit.Deps{}, []kit.Controller{neederController("kit-later", &n)})
	namespace(t, "kit-later")
	key := needing(t, "kit-later", "w", "Widget.later.kit.test")
	g.Eventually(func() string { return n.saw(key) }).WithTimeout(30 * time.Second).Should(Equal("missing"))

	widgetRequests := func(method, path string) bool { return strings.Contains(path, "later.kit.test") }
	before, asked := n.reconciles.Load(), requests.count(widgetRequests)
	g.Consistently(func() int32 { return n.reconciles.Load() - before }).WithTimeout(5*time.Second).Should(BeZero(),
		"a ConfigMap waiting for a kind was reconciled again")
	g.Expect(requests.count(widgetRequests)-asked).To(BeZero(), "the API server was asked about the missing kind")

	installCRD(t, widgetCRD("later.kit.test", "Widget", "widgets"))
	g.Eventually(func() string { return n.saw(key) }).WithTimeout(30*time.Second).Should(HavePrefix("read: "),
		"the CRD's appearance brings the ConfigMap back: the kind is watched, and no Widget w exists yet")

	w := &unstructured.Unstructured{}
	w.SetGroupVersionKind(schema.GroupVersionKind{Group: "later.kit.test", Version: "v1", Kind: "Widget"})
	w.SetNamespace("kit-later")
	w.SetName("w")
	w.SetLabels(map[string]string{"size": "3"})
	g.Expect(k.Create(ctx, w)).To(Succeed())
	g.Eventually(func() string { return n.saw(key) }).WithTimeout(30*time.Second).Should(Equal("size 3"),
		"the Widget's creation, seen by the watch, brings the ConfigMap back")
	w.SetLabels(map[string]string{"size": "4"})
	g.Expect(k.Update(ctx, w)).To(Succeed())
	g.Eventually(func() string { return n.saw(key) }).WithTimeout(30 * time.Second).Should(Equal("size 4"))
	g.Expect(requests.count(func(method, path string) bool {
		return method == "GET" && strings.HasSuffix(path, "/widgets/w")
	})).To(BeZero(), "the Widget is read from the watch's cache")
}

// A kind the manager may not list is reported, and is neither reviewed nor listed
// again in a loop: however often the object that needs it is reconciled, the access
// review is made once (until RetryRefused) and no list is sent.
func TestKindWatchesReportAKindTheManagerMayNotList(t *testing.T) {
	g, ctx := NewWithT(t), context.Background()
	installCRD(t, widgetCRD("refused.kit.test", "Widget", "widgets"))
	// The manager runs as a user that may read ConfigMaps and CRDs, not Widgets.
	const user = "kit-restricted"
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: user}, Rules: []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"apiextensions.k8s.io"}, Resources: []string{"customresourcedefinitions"}, Verbs: []string{"get", "list", "watch"}},
	}}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: user},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}}}
	for _, o := range []client.Object{role, binding} {
		g.Expect(k.Create(ctx, o)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), o) })
	}
	requests := &requestCounter{}
	restricted := countingEnv(requests)
	restricted.Config.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: []string{"system:authenticated"}}
	var n *needer
	restricted.StartManagerForTest(t, kit.Deps{}, []kit.Controller{neederController("kit-refused", &n)})
	namespace(t, "kit-refused")
	key := needing(t, "kit-refused", "w", "Widget.refused.kit.test")
	g.Eventually(func() string { return n.saw(key) }).WithTimeout(30 * time.Second).Should(
		Equal("problem: the manager may not list widgets.refused.kit.test in every namespace"))

	reviews := func(method, path string) bool { return strings.HasSuffix(path, "/selfsubjectaccessreviews") }
	widgetLists := func(method, path string) bool { return method == "GET" && strings.HasSuffix(path, "/widgets") }
	reviewed := requests.count(reviews)
	// The ConfigMap is changed again and again: each change is a reconcile.
	start := n.reconciles.Load()
	for i := range 20 {
		var cm corev1.ConfigMap
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "kit-refused", Name: "w"}, &cm)).To(Succeed())
		cm.Data = map[string]string{"i": fmt.Sprint(i)}
		g.Expect(k.Update(ctx, &cm)).To(Succeed())
	}
	g.Eventually(func() int32 { return n.reconciles.Load() - start }).WithTimeout(30 * time.Second).Should(BeNumerically(">=", 5))
	g.Consistently(func() int { return requests.count(reviews) - reviewed }).WithTimeout(3*time.Second).Should(BeZero(),
		"the refusal was asked about again")
	g.Expect(requests.count(widgetLists)).To(BeZero(), "Widgets were listed although the manager may not")
	t.Logf("%d reconciles of the ConfigMap; %d access reviews in all, %d after the first reconcile; %d lists of Widgets",
		n.reconciles.Load(), requests.count(reviews), requests.count(reviews)-reviewed, requests.count(widgetLists))
	g.Expect(n.saw(key)).To(HavePrefix("problem: "))
}
