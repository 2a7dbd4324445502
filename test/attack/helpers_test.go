//go:build e2e

package attack

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/testing/testenv"
)

const (
	// timeout bounds every wait for the manager to act or report.
	timeout = 90 * time.Second
	poll    = 250 * time.Millisecond
)

// refused asserts that the API server refused a request: Forbidden (RBAC, or an
// admission policy) or Invalid (validation), with a message that contains every one
// of want, so that the user is told why.
func refused(g Gomega, err error, want ...string) {
	g.ExpectWithOffset(1, err).To(HaveOccurred(), "the request was admitted")
	g.ExpectWithOffset(1, apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "not a refusal: %v", err)
	for _, w := range want {
		g.ExpectWithOffset(1, err.Error()).To(ContainSubstring(w))
	}
}

// forbiddenByRBAC asserts an RBAC refusal (the user may not do that at all), which
// names the user.
func forbiddenByRBAC(g Gomega, err error) {
	g.ExpectWithOffset(1, err).To(HaveOccurred(), "the request was admitted")
	g.ExpectWithOffset(1, apierrors.IsForbidden(err)).To(BeTrue(), "not Forbidden: %v", err)
	g.ExpectWithOffset(1, err.Error()).To(ContainSubstring(`User "`))
}

// create creates obj with c and deletes it (as the administrator) when the test ends.
func create(t *testing.T, c client.Client, obj client.Object) {
	t.Helper()
	if err := c.Create(context.Background(), obj); err != nil {
		t.Fatalf("creating %T %s: %v", obj, client.ObjectKeyFromObject(obj), err)
	}
	cleanup(t, obj)
}

// cleanup deletes obj (as the administrator) when the test ends.
func cleanup(t *testing.T, obj client.Object) {
	t.Helper()
	t.Cleanup(func() { _ = admin.Delete(context.Background(), obj) })
}

// drainOnCleanup registers a cleanup that deletes every object of the lists' kinds in
// team-a and team-b (every one, for a cluster-scoped kind) and waits until they are
// gone. Register it after setting up what their finalizers need (an external service,
// the platform's Secrets and objects pointing at it) and before creating them:
// cleanups run last-registered first, so the objects are deleted first, this waits for
// their finalizers, and only then does what those need go. None is left stuck on a
// cluster kept for another run.
func drainOnCleanup(t *testing.T, lists ...client.ObjectList) {
	t.Helper()
	t.Cleanup(func() {
		ctx := context.Background()
		ours := func(list client.ObjectList) []client.Object {
			if err := admin.List(ctx, list); err != nil {
				t.Errorf("listing %T: %v", list, err)
				return nil
			}
			items, _ := meta.ExtractList(list)
			var out []client.Object
			for _, it := range items {
				o := it.(client.Object)
				if ns := o.GetNamespace(); ns == "" || ns == teamA || ns == teamB {
					out = append(out, o)
				}
			}
			return out
		}
		for _, list := range lists {
			for _, o := range ours(list) {
				_ = admin.Delete(ctx, o)
			}
			if err := wait.PollUntilContextTimeout(ctx, poll, timeout, true, func(context.Context) (bool, error) {
				return len(ours(list)) == 0, nil
			}); err != nil {
				t.Errorf("%T: objects left after %s: %v", list, timeout, err)
			}
		}
	})
}

// namespace creates a namespace with labels for one test, deleted when it ends.
func namespace(t *testing.T, name string, labels map[string]string) {
	t.Helper()
	create(t, admin, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}})
}

// get reads obj again by its key, as the administrator.
func get(g Gomega, obj client.Object) {
	g.ExpectWithOffset(1, admin.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)).To(Succeed())
}

// conditionOf returns the condition typ of conds, or a zero one with status "absent".
func conditionOf(conds []metav1.Condition, typ string) metav1.Condition {
	if c := meta.FindStatusCondition(conds, typ); c != nil {
		return *c
	}
	return metav1.Condition{Type: typ, Status: "absent"}
}

// waitCondition waits until obj's condition typ (conditions returns them from a fresh
// read) has reason, and returns it: the manager saw the object and said why.
func waitCondition(g Gomega, obj client.Object, conditions func() []metav1.Condition, typ, reason string) metav1.Condition {
	var c metav1.Condition
	g.EventuallyWithOffset(1, func(g Gomega) {
		get(g, obj)
		c = conditionOf(conditions(), typ)
		g.Expect(c.Reason).To(Equal(reason), "%s=%s: %s", typ, c.Status, c.Message)
		g.Expect(c.ObservedGeneration).To(Equal(obj.GetGeneration()))
	}, timeout, poll).Should(Succeed())
	return c
}

// snapshot is what a victim's object looked like: its resourceVersion and content.
type snapshot struct {
	key             client.ObjectKey
	resourceVersion string
	generation      int64
}

// snap records obj as it is now.
func snap(g Gomega, obj client.Object) snapshot {
	get(g, obj)
	return snapshot{key: client.ObjectKeyFromObject(obj), resourceVersion: obj.GetResourceVersion(), generation: obj.GetGeneration()}
}

// unchanged asserts that obj has not been written since s (same resourceVersion).
func unchanged(g Gomega, obj client.Object, s snapshot) {
	get(g, obj)
	g.ExpectWithOffset(1, obj.GetResourceVersion()).To(Equal(s.resourceVersion), "%T %s was written", obj, s.key)
}

// untouched asserts that Orderly has not written obj since s: its spec is as it was
// (same generation) and no field of it is Orderly's. For objects whose status others
// keep writing (a Deployment's, by its controller), where unchanged cannot serve.
func untouched(g Gomega, obj client.Object, s snapshot) {
	get(g, obj)
	g.ExpectWithOffset(1, obj.GetGeneration()).To(Equal(s.generation), "%T %s: its spec was changed", obj, s.key)
	for _, f := range obj.GetManagedFields() {
		g.ExpectWithOffset(1, f.Manager).NotTo(HavePrefix("orderly"), "%T %s: Orderly wrote %s", obj, s.key, f.Operation)
	}
}

// eventText joins the notes and reasons of the Events in ns, for checks that a
// secret never appears in them.
func eventText(g Gomega, ns string) string {
	var list eventsv1.EventList
	g.ExpectWithOffset(1, admin.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	var b strings.Builder
	for _, e := range list.Items {
		b.WriteString(e.Reason + " " + e.Note + "\n")
	}
	return b.String()
}

// managerLogContains reports whether the manager's log (every start of the run)
// holds s.
func managerLogContains(g Gomega, s string) bool {
	logs, err := os.ReadFile(env.ManagerLog)
	g.ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return bytes.Contains(logs, []byte(s))
}

// deployment is a Deployment of one replica that runs on the kwok nodes.
func deployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					Containers:  []corev1.Container{{Name: "app", Image: "registry.invalid/app:1"}},
					Tolerations: kwokTolerations,
				},
			},
		},
	}
}

// kwokTolerations let a pod onto the kwok nodes, which carry this taint.
var kwokTolerations = []corev1.Toleration{{Key: "kwok.x-k8s.io/node", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}

// sample reads the objects of kind from config/samples (unstructured), so that the
// suite's controls use what the docs show.
func sample(t *testing.T, kind string) *unstructured.Unstructured {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(testenv.RepoRoot(), "config", "samples", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(raw), 4096)
		for {
			var u unstructured.Unstructured
			if err := dec.Decode(&u.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				t.Fatalf("reading %s: %v", f, err)
			}
			if u.GetKind() == kind {
				return &u
			}
		}
	}
	t.Fatalf("no %s in config/samples", kind)
	return nil
}

// captured is one request that reached a capture server.
type captured struct {
	Method, Host, URI string
	Header            http.Header
	Body              []byte
}

// captureServer stands in for a host the attacker controls: it records every request
// that reaches it (method, URI, every header, the body), and answers with handle.
type captureServer struct {
	URL  string
	Host string // host:port
	srv  *httptest.Server
	mu   sync.Mutex
	reqs []captured
}

// startCapture starts a capture server on loopback; handle answers (nil: 404).
func startCapture(handle http.HandlerFunc) *captureServer {
	c := &captureServer{}
	c.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(io.LimitReader(r.Body, 1<<20))
		c.mu.Lock()
		c.reqs = append(c.reqs, captured{Method: r.Method, Host: r.Host, URI: r.RequestURI, Header: r.Header.Clone(), Body: body})
		c.mu.Unlock()
		if handle == nil {
			http.NotFound(w, r)
			return
		}
		handle(w, r)
	}))
	c.URL = c.srv.URL
	c.Host = c.srv.Listener.Addr().(*net.TCPAddr).String()
	return c
}

// startCaptureT is startCapture, closed when the test ends.
func startCaptureT(t *testing.T, handle http.HandlerFunc) *captureServer {
	t.Helper()
	c := startCapture(handle)
	t.Cleanup(c.Close)
	return c
}

// Close stops the server.
func (c *captureServer) Close() { c.srv.Close() }

// requests returns what reached the server so far.
func (c *captureServer) requests() []captured {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.reqs)
}

// dump is every request as text (request line, every header, body), for checks that
// a secret never reached the server in any form.
func (c *captureServer) dump() string {
	var b strings.Builder
	for _, r := range c.requests() {
		fmt.Fprintf(&b, "%s %s (Host %s)\n", r.Method, r.URI, r.Host)
		names := make([]string, 0, len(r.Header))
		for n := range r.Header {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(&b, "%s: %s\n", n, strings.Join(r.Header[n], ", "))
		}
		// Basic credentials are base64: written out decoded too, so that a password
		// sent that way is found.
		for _, v := range r.Header.Values("Authorization") {
			if enc, ok := strings.CutPrefix(v, "Basic "); ok {
				if dec, err := base64.StdEncoding.DecodeString(enc); err == nil {
					fmt.Fprintf(&b, "Authorization (decoded): %s\n", dec)
				}
			}
		}
		b.Write(r.Body)
		b.WriteString("\n\n")
	}
	return b.String()
}

// headerValues returns the values of header name over every request.
func (c *captureServer) headerValues(name string) []string {
	var out []string
	for _, r := range c.requests() {
		out = append(out, r.Header.Values(name)...)
	}
	return out
}

// neverContains asserts that none of secrets (non-empty) appears anywhere in what
// reached c: the request lines, headers (Basic credentials decoded) and bodies.
func neverContains(g Gomega, c *captureServer, secrets map[string]string) {
	d := c.dump()
	for what, s := range secrets {
		if s == "" {
			continue
		}
		g.ExpectWithOffset(1, d).NotTo(ContainSubstring(s), "%s reached %s", what, c.Host)
	}
}
