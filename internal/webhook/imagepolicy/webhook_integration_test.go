//go:build integration

package imagepolicy_test

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	ipcontroller "orderly.dev/orderly/internal/controller/policy/imagepolicy"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testenv"
	orderlywebhook "orderly.dev/orderly/internal/webhook"
)

// These tests run ImagePolicy admission as the manager does: internal/webhook
// prepares Orderly's webhook server (its certificate, on loopback where the API
// server calls it), the ImagePolicy controller writes the ValidatingAdmissionPolicy
// and the ValidatingWebhookConfiguration, and the API server enforces both. Scan
// results are ImageScans written as the scanner writes them.

const (
	timeout   = 30 * time.Second
	poll      = 200 * time.Millisecond
	managerNS = "orderly-system"
)

var (
	k   client.Client
	cfg *rest.Config
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k, cfg = e.Client, e.Config
		ctx := context.Background()
		if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: managerNS}}); err != nil {
			return nil, err
		}
		port := freePort()
		opts := orderlywebhook.Options{
			Mutation: string(admission.Auto), Host: "127.0.0.1", Port: port, URL: fmt.Sprintf("https://127.0.0.1:%d", port),
			Service: "orderly-webhook", Secret: "orderly-webhook-tls", FailurePolicy: string(admissionv1.Ignore), TimeoutSeconds: 5, ImagePolicy: true,
		}
		ip := ipcontroller.Controller
		server, err := orderlywebhook.Prepare(ctx, e.Config, opts, managerNS, []kit.Controller{ip})
		if err != nil {
			return nil, err
		}
		if server.Admission.Webhook == nil {
			return nil, fmt.Errorf("the ImagePolicy controller needs the webhook served: %+v", server.Admission)
		}
		ip.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
			if err := server.Register(ctx, mgr); err != nil {
				return err
			}
			r := &ipcontroller.Reconciler{Client: mgr.GetClient(), Recorder: kit.EventsFor(mgr, "orderly-imagepolicy"), Clock: deps.ClockOrReal(),
				Admission: deps.Admission, Namespace: deps.Namespace, EvaluateInterval: time.Second}
			return r.SetupWithManager(ctx, mgr, deps.Options)
		}
		return e.StartManager(kit.Deps{Admission: server.Admission, Namespace: managerNS}, []kit.Controller{ip}, func(o *ctrl.Options) {
			o.WebhookServer = server.NewServer()
		})
	})
}

func freePort() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		panic(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func createNS(t *testing.T, name string) {
	t.Helper()
	NewWithT(t).Expect(k.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"imagepolicy-test": name}}})).To(Succeed())
}

func newPolicy(name string, mut func(*policyv1alpha1.ImagePolicySpec)) *policyv1alpha1.ImagePolicy {
	p := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: name}}
	p.Spec.Match.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"imagepolicy-test": name}}
	mut(&p.Spec)
	return p
}

func pod(ns, name string, images ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	for i, img := range images {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: fmt.Sprintf("c%d", i), Image: img})
	}
	return p
}

// writeScan writes the ImageScan of repo@digest as the scanner does, with tag
// pointing at it and the findings.
func writeScan(t *testing.T, digest, tag string, findings ...policyv1alpha1.ImageFinding) {
	repository := repo
	t.Helper()
	g := NewWithT(t)
	ctx := context.Background()
	sc := &policyv1alpha1.ImageScan{
		ObjectMeta: metav1.ObjectMeta{Name: imagescan.ScanName(repository, digest), Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, policyv1alpha1.ImageScanLabel: "true"}},
		Spec:       policyv1alpha1.ImageScanSpec{Repository: repository, Digest: digest},
	}
	g.Expect(k.Create(ctx, sc)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), sc) })
	res := &imagescan.Result{DBVersion: "test-db", Packages: 12}
	for _, f := range findings {
		res.Findings = append(res.Findings, imagescan.Finding{ID: f.ID, Package: f.Package, Installed: f.Installed, Fixed: f.Fixed, Severity: f.Severity})
	}
	imagescan.ApplyResult(&sc.Status, res, policyv1alpha1.ScannerInfo{Name: "test", Version: "0"}, time.Now())
	sc.Status.Tags = []string{tag}
	g.Expect(k.Status().Update(ctx, sc)).To(Succeed())
}

func ready(g Gomega, name string) *policyv1alpha1.ImagePolicy {
	var p policyv1alpha1.ImagePolicy
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &p)).To(Succeed())
	c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ImagePolicyConditionReady)
	g.Expect(c).NotTo(BeNil())
	g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	return &p
}

// editPolicy changes a policy's spec on its latest version: the controller writes its
// status meanwhile, so an update from an older read conflicts.
func editPolicy(t *testing.T, name string, mut func(*policyv1alpha1.ImagePolicySpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var p policyv1alpha1.ImagePolicy
		if err := k.Get(context.Background(), client.ObjectKey{Name: name}, &p); err != nil {
			return err
		}
		mut(&p.Spec)
		return k.Update(context.Background(), &p)
	})
	if err != nil {
		t.Fatalf("edit ImagePolicy %s: %v", name, err)
	}
}

// withDebugContainer is p with one more ephemeral container running image, as
// `kubectl debug` writes it to the pods/ephemeralcontainers subresource.
func withDebugContainer(p *corev1.Pod, image string) *corev1.Pod {
	out := p.DeepCopy()
	out.Spec.EphemeralContainers = append(out.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
		Name: fmt.Sprintf("debug-%d", len(out.Spec.EphemeralContainers)), Image: image,
		ImagePullPolicy: corev1.PullIfNotPresent, TerminationMessagePolicy: corev1.TerminationMessageReadFile,
	}})
	return out
}

func digestOf(b byte) string { return "sha256:" + strings.Repeat(fmt.Sprintf("%02x", b), 32) }

const repo = "registry.example.com/team/app"

// TestScanDecisions: the webhook refuses a vulnerable image naming the CVE, its
// package and versions; admits a clean one; refuses an unscanned one and queues it
// (a pending ImageScan appears); admits a CVE while it is ignored.
func TestScanDecisions(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "scan-decisions")
	writeScan(t, digestOf(1), "vuln", policyv1alpha1.ImageFinding{ID: "CVE-2024-1111", Package: "openssl", Installed: "3.0.1", Fixed: "3.0.2", Severity: policyv1alpha1.SeverityCritical})
	writeScan(t, digestOf(2), "clean")
	p := newPolicy("scan-decisions", func(s *policyv1alpha1.ImagePolicySpec) { s.MaxSeverity = policyv1alpha1.MaxSeverityHigh })
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })
	g.Eventually(func(g Gomega) { ready(g, p.Name) }, timeout, poll).Should(Succeed())

	// The webhook configuration reaches the API server a moment after Ready.
	g.Eventually(func(g Gomega) {
		err := k.Create(ctx, pod("scan-decisions", "vuln", repo+":vuln"))
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "err = %v", err)
		g.Expect(err.Error()).To(And(ContainSubstring("CVE-2024-1111"), ContainSubstring("openssl 3.0.1"), ContainSubstring("fixed in 3.0.2")))
	}, timeout, poll).Should(Succeed())
	g.Expect(k.Create(ctx, pod("scan-decisions", "clean", repo+":clean"))).To(Succeed())
	// A Deployment's pod template is checked too, by digest.
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "scan-decisions", Name: "web"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}}, Spec: pod("", "", repo+"@"+digestOf(1)).Spec},
	}}
	err := k.Create(ctx, d)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "err = %v", err)
	g.Expect(err.Error()).To(ContainSubstring("CVE-2024-1111"))
	// So is a ReplicationController's, and an ephemeral container added to a running
	// pod (kubectl debug) through the pods/ephemeralcontainers subresource.
	rc := &corev1.ReplicationController{ObjectMeta: metav1.ObjectMeta{Namespace: "scan-decisions", Name: "legacy"}, Spec: corev1.ReplicationControllerSpec{
		Selector: map[string]string{"app": "legacy"},
		Template: &corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "legacy"}}, Spec: pod("", "", repo+":vuln").Spec},
	}}
	err = k.Create(ctx, rc)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "a ReplicationController: err = %v", err)
	g.Expect(err.Error()).To(ContainSubstring("CVE-2024-1111"))
	clean := &corev1.Pod{}
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "scan-decisions", Name: "clean"}, clean)).To(Succeed())
	err = k.SubResource("ephemeralcontainers").Update(ctx, withDebugContainer(clean, repo+":vuln"))
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "an ephemeral container: err = %v", err)
	g.Expect(err.Error()).To(ContainSubstring("CVE-2024-1111"))
	g.Expect(k.SubResource("ephemeralcontainers").Update(ctx, withDebugContainer(clean, repo+":clean"))).To(Succeed())

	// Unscanned: refused (Deny by default) and queued, naming the pod's pull secret
	// for the scanner (no pod will run the image before its scan).
	unscanned := pod("scan-decisions", "new", repo+":new")
	unscanned.Spec.ImagePullSecrets = []corev1.LocalObjectReference{{Name: "regcred"}}
	err = k.Create(ctx, unscanned)
	g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "err = %v", err)
	g.Expect(err.Error()).To(ContainSubstring("not been scanned"))
	g.Eventually(func(g Gomega) {
		var pending policyv1alpha1.ImageScan
		g.Expect(k.Get(ctx, client.ObjectKey{Name: imagescan.PendingName(repo, "new")}, &pending)).To(Succeed())
		g.Expect(pending.Annotations).To(HaveKeyWithValue(policyv1alpha1.ImageScanPullSecretsAnnotation, "scan-decisions/regcred"))
	}, timeout, poll).Should(Succeed())
	t.Cleanup(func() {
		_ = k.Delete(context.Background(), &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Name: imagescan.PendingName(repo, "new")}})
	})

	// Ignored until it expires.
	editPolicy(t, p.Name, func(s *policyv1alpha1.ImagePolicySpec) {
		s.Ignore = []policyv1alpha1.ImageIgnore{{ID: "CVE-2024-1111", Reason: "not reachable", Expires: &metav1.Time{Time: time.Now().Add(time.Hour)}}}
	})
	g.Eventually(func() error { return k.Create(ctx, pod("scan-decisions", "ignored", repo+":vuln")) }, timeout, poll).Should(Succeed())
	editPolicy(t, p.Name, func(s *policyv1alpha1.ImagePolicySpec) {
		s.Ignore[0].Expires = &metav1.Time{Time: time.Now().Add(-time.Minute)}
	})
	// Until the webhook sees the edit, a create is admitted: delete that pod again, or
	// it would stay as a second violation below (seen once under load).
	g.Eventually(func() bool {
		expired := pod("scan-decisions", "expired", repo+":vuln")
		err := k.Create(ctx, expired)
		if err == nil {
			_ = k.Delete(ctx, expired)
		}
		return apierrors.IsForbidden(err)
	}, timeout, poll).Should(BeTrue())

	// Status: the running pods that break the policy and the coverage.
	g.Eventually(func(g Gomega) {
		p := ready(g, p.Name)
		g.Expect(p.Status.Violations.Count).To(BeEquivalentTo(1))
		g.Expect(p.Status.Violations.Items[0].Reason).To(Equal(policyv1alpha1.ImageReasonVulnerable))
		g.Expect(p.Status.Violations.Items[0].Name).To(Equal("ignored"))
		g.Expect(p.Status.Coverage).To(Equal(policyv1alpha1.ImageCoverage{Running: 2, Scanned: 2}))
		c := meta.FindStatusCondition(p.Status.Conditions, policyv1alpha1.ImagePolicyConditionCompliant)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	}, timeout, poll).Should(Succeed())
}

// TestRequireDigestRewritePinsTags: with rewrite, a tag the scanner resolved is
// pinned to its digest at admission (a Pod, a Deployment's template); a tag never
// resolved is left as written and refused by requireDigest.
func TestRequireDigestRewritePinsTags(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "pinning"
	createNS(t, ns)
	writeScan(t, digestOf(9), "pinned")
	// Unscanned images allowed: only requireDigest decides, and the only webhook is
	// the mutating one.
	p := newPolicy(ns, func(s *policyv1alpha1.ImagePolicySpec) {
		s.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true, Rewrite: true}
		s.Unscanned = &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllow}
	})
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })
	g.Eventually(func(g Gomega) { ready(g, p.Name) }, timeout, poll).Should(Succeed())

	// Until the API server has both configurations a Pod may get in unpinned or be
	// refused: each attempt gets a name of its own.
	attempt := 0
	g.Eventually(func(g Gomega) {
		attempt++
		po := pod(ns, fmt.Sprintf("web-%d", attempt), repo+":pinned")
		g.Expect(k.Create(ctx, po)).To(Succeed())
		g.Expect(po.Spec.Containers[0].Image).To(Equal(repo + ":pinned@" + digestOf(9)))
	}, timeout, poll).Should(Succeed())

	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
			Spec: pod("", "", repo+"@"+digestOf(9), repo+":pinned").Spec},
	}}
	g.Expect(k.Create(ctx, d)).To(Succeed())
	g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(repo+"@"+digestOf(9)), "a digest is left as it is")
	g.Expect(d.Spec.Template.Spec.Containers[1].Image).To(Equal(repo + ":pinned@" + digestOf(9)))

	// The native check may reach admission after the mutating webhook: dry runs
	// until it refuses, then the real request, which the webhook queues.
	g.Eventually(func(g Gomega) {
		err := k.Create(ctx, pod(ns, "unknown", repo+":never-resolved"), client.DryRunAll)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("requireDigest"))
	}, timeout, poll).Should(Succeed())
	err := k.Create(ctx, pod(ns, "unknown", repo+":never-resolved"))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("requireDigest"))
	// ... and queued for the scanner, so that a retry once it is resolved is pinned.
	pending := &policyv1alpha1.ImageScan{}
	g.Eventually(func() error {
		return k.Get(ctx, client.ObjectKey{Name: imagescan.PendingName(repo, "never-resolved")}, pending)
	}, timeout, poll).Should(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), pending) })

	// rewrite without enabled is refused.
	bad := newPolicy("pinning-bad", func(s *policyv1alpha1.ImagePolicySpec) {
		s.MaxSeverity = policyv1alpha1.MaxSeverityHigh
		s.RequireDigest = &policyv1alpha1.RequireDigest{Rewrite: true}
	})
	err = k.Create(ctx, bad)
	g.Expect(apierrors.IsInvalid(err)).To(BeTrue(), "err = %v", err)
	g.Expect(err.Error()).To(ContainSubstring("requireDigest.rewrite needs requireDigest.enabled"))
}

// TestWarnAdmitsWithAWarning: action Warn admits and tells the client why.
func TestWarnAdmitsWithAWarning(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "scan-warn")
	writeScan(t, digestOf(3), "warn", policyv1alpha1.ImageFinding{ID: "CVE-2024-3333", Package: "zlib", Installed: "1.2", Severity: policyv1alpha1.SeverityCritical})
	p := newPolicy("scan-warn", func(s *policyv1alpha1.ImagePolicySpec) {
		s.MaxSeverity = policyv1alpha1.MaxSeverityHigh
		s.Action = policyv1alpha1.ImageActionWarn
	})
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })
	g.Eventually(func(g Gomega) { ready(g, p.Name) }, timeout, poll).Should(Succeed())

	warnings := &warningRecorder{}
	wcfg := rest.CopyConfig(cfg)
	wcfg.WarningHandler = warnings
	wk, err := client.New(wcfg, client.Options{Scheme: k.Scheme()})
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(func(g Gomega) {
		name := fmt.Sprintf("warn-%d", time.Now().UnixNano())
		g.Expect(wk.Create(ctx, pod("scan-warn", name, repo+":warn"))).To(Succeed())
		g.Expect(warnings.text()).To(ContainSubstring("CVE-2024-3333"))
	}, timeout, poll).Should(Succeed())
}

type warningRecorder struct{ msgs []string }

func (w *warningRecorder) HandleWarningHeader(_ int, _ string, text string) {
	w.msgs = append(w.msgs, text)
}
func (w *warningRecorder) text() string { return strings.Join(w.msgs, "\n") }

// TestNativeChecks: allowedRegistries and requireDigest are refused by the
// ValidatingAdmissionPolicy, without the webhook (no scan-based check is set) and
// without any scan; the message names the image's repository and the patterns.
func TestNativeChecks(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	createNS(t, "native")
	p := newPolicy("native", func(s *policyv1alpha1.ImagePolicySpec) {
		s.AllowedRegistries = []string{"registry.example.com/team/*", "*.corp.io"}
		s.Unscanned = &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllow}
	})
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })
	g.Eventually(func(g Gomega) { ready(g, p.Name) }, timeout, poll).Should(Succeed())
	g.Expect(k.Get(ctx, client.ObjectKey{Name: "orderly-imagepolicy-native"}, &admissionv1.ValidatingWebhookConfiguration{})).
		To(Satisfy(apierrors.IsNotFound), "a policy without scan-based checks needs no webhook")

	g.Eventually(func(g Gomega) {
		err := k.Create(ctx, pod("native", "hub", "nginx:1.27"))
		g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "err = %v", err)
		g.Expect(err.Error()).To(And(ContainSubstring("docker.io/library/nginx"), ContainSubstring("registry.example.com/team/*, *.corp.io")))
	}, timeout, poll).Should(Succeed())
	for _, ok := range []string{repo + ":v1", "eu.registry.corp.io/x/y@" + digestOf(9)} {
		g.Expect(k.Create(ctx, pod("native", fmt.Sprintf("ok-%d", len(ok)), ok))).To(Succeed(), ok)
	}
	err := k.Create(ctx, pod("native", "other-team", "registry.example.com/other/app:v1"))
	g.Expect(err).To(HaveOccurred())

	// An ephemeral container (what `kubectl debug` adds) puts an image on a node too,
	// through the pods/ephemeralcontainers subresource: refused from a registry the
	// policy does not allow, admitted from one it does.
	running := &corev1.Pod{}
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "native", Name: fmt.Sprintf("ok-%d", len(repo+":v1"))}, running)).To(Succeed())
	err = k.SubResource("ephemeralcontainers").Update(ctx, withDebugContainer(running, "busybox:1.36"))
	g.Expect(apierrors.IsForbidden(err) || apierrors.IsInvalid(err)).To(BeTrue(), "an ephemeral container from Docker Hub: err = %v", err)
	g.Expect(err.Error()).To(ContainSubstring("docker.io/library/busybox"))
	g.Expect(k.SubResource("ephemeralcontainers").Update(ctx, withDebugContainer(running, repo+":debug"))).To(Succeed())

	// requireDigest, added to the same policy.
	editPolicy(t, p.Name, func(s *policyv1alpha1.ImagePolicySpec) {
		s.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true}
	})
	g.Eventually(func(g Gomega) {
		err := k.Create(ctx, pod("native", "tagged", repo+":v2"))
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(ContainSubstring("requireDigest"))
	}, timeout, poll).Should(Succeed())
	g.Expect(k.Create(ctx, pod("native", "pinned", repo+"@"+digestOf(4)))).To(Succeed())
	// A workload admitted earlier can still be updated when its images do not change.
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: "native", Name: fmt.Sprintf("ok-%d", len(repo+":v1"))}, running)).To(Succeed())
	running.Labels = map[string]string{"touched": "yes"}
	g.Expect(k.Update(ctx, running)).To(Succeed())
}

// TestInvalidPoliciesAreRefused: bad input never reaches the controller.
func TestInvalidPoliciesAreRefused(t *testing.T) {
	ctx := context.Background()
	for name, mut := range map[string]func(*policyv1alpha1.ImagePolicySpec){
		"bad-pattern": func(s *policyv1alpha1.ImagePolicySpec) {
			s.AllowedRegistries = []string{"https://registry.example.com"}
		},
		"allowfor-no-time": func(s *policyv1alpha1.ImagePolicySpec) {
			s.Unscanned = &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllowFor}
		},
		"short-rescan": func(s *policyv1alpha1.ImagePolicySpec) {
			s.MaxSeverity = policyv1alpha1.MaxSeverityHigh
			s.RescanInterval = &metav1.Duration{Duration: time.Second}
		},
		"nothing-to-do": func(s *policyv1alpha1.ImagePolicySpec) {
			s.Unscanned = &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllow}
		},
	} {
		err := k.Create(ctx, newPolicy(name, mut))
		if !apierrors.IsInvalid(err) {
			t.Errorf("%s: err = %v, want Invalid", name, err)
		}
	}
}
