//go:build integration

package imagescan_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	engine "orderly.dev/orderly/internal/imagescan"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testimages"
	"orderly.dev/orderly/internal/testing/testregistry"
)

// The scanner runs against a real registry on loopback (Debian's docker-registry),
// with images built in Go holding a real dpkg database, and the real scanning engine
// (osv-scalibr extraction, local OSV matching) over OSV records the test writes.

const (
	timeout = 60 * time.Second
	poll    = 200 * time.Millisecond
	// retention is short so that garbage collection can be seen.
	retention = 4 * time.Second
)

var (
	k   client.Client
	reg *testregistry.Registry
	// digests of the images pushed, by tag.
	digests = map[string]string{}
	// priv is a registry that wants a password (privUser, privPassword); it holds
	// private/app:1, a copy of the vulnerable image, whose digest is privDigest.
	priv       *testregistry.Registry
	privDigest string
)

const privUser, privPassword = "puller", "s3cret"

// osvDir holds the OSV archives the scanner downloads; baseVulns are written there first.
var (
	osvDir    string
	baseVulns = []testimages.Vuln{{ID: "CVE-2024-1111", Ecosystem: "Debian:12", Package: "openssl", Fixed: "3.0.2-1", Severity: "CRITICAL"}}
)

func TestMain(m *testing.M) {
	testenv.Main(m, func(e *testenv.Env) (func(), error) {
		k = e.Client
		ctx := context.Background()
		var err error
		if reg, err = testregistry.Start(); err != nil {
			return nil, err
		}
		teardown := func() { reg.Close() }
		vulnerable := testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.1-1"}, {Name: "zlib1g", Version: "1:1.2.13.dfsg-1"}}}
		for tag, c := range map[string]testimages.Contents{
			"vuln":  vulnerable,
			"clean": {Dpkg: []testimages.Pkg{{Name: "zlib1g", Version: "1:1.2.13.dfsg-1"}}},
		} {
			d, err := testimages.Push(ctx, reg.Host, "team/app:"+tag, c)
			if err != nil {
				return teardown, err
			}
			digests[tag] = d
		}
		if priv, err = testregistry.StartWithAuth(privUser, privPassword); err != nil {
			return teardown, err
		}
		teardown = func() { reg.Close(); priv.Close() }
		privDigest, err = testimages.Push(ctx, priv.Host, "private/app:1", vulnerable,
			remote.WithAuth(authn.FromConfig(authn.AuthConfig{Username: privUser, Password: privPassword})))
		if err != nil {
			return teardown, err
		}
		// The database is downloaded (--imagescan-db-url) from a file server over
		// osvDir into the scanner's own, empty, directory.
		if osvDir, err = os.MkdirTemp("", "osv-src-"); err != nil {
			return teardown, err
		}
		dbDir, err := os.MkdirTemp("", "osv-")
		if err != nil {
			return teardown, err
		}
		osvServer := httptest.NewServer(http.FileServer(http.Dir(osvDir)))
		teardown = func() {
			reg.Close()
			priv.Close()
			osvServer.Close()
			_ = os.RemoveAll(dbDir)
			_ = os.RemoveAll(osvDir)
		}
		if err := testimages.WriteOSV(osvDir, baseVulns...); err != nil {
			return teardown, err
		}
		s, err := engine.New(engine.Options{DBDir: dbDir, Insecure: []string{reg.Host, priv.Host}})
		if err != nil {
			return teardown, err
		}
		c := imagescan.Controller
		c.Setup = func(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
			sc := &imagescan.Scanner{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Engine: imagescan.FromScanner(s),
				Namespace: "default", PodPullSecrets: true, Retention: retention, Interval: time.Second, RetryInterval: 2 * time.Second,
				RefreshInterval: time.Second, Clock: deps.ClockOrReal(),
				FetchDB: func(ctx context.Context) (bool, error) {
					return engine.DownloadDB(ctx, osvServer.Client(), osvServer.URL, dbDir, "Debian")
				}}
			return sc.SetupWithManager(ctx, mgr)
		}
		stop, err := e.StartManager(kit.Deps{Namespace: "default"}, []kit.Controller{c})
		return func() {
			if stop != nil {
				stop()
			}
			teardown()
		}, err
	})
}

func getScan(g Gomega, name string) *policyv1alpha1.ImageScan {
	var sc policyv1alpha1.ImageScan
	g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, &sc)).To(Succeed())
	return &sc
}

// TestRunningImagesAreScanned: a pod's images get ImageScans by digest, the
// vulnerable one with its finding, the clean one without; each says where it runs;
// once no pod uses them they are collected after the retention period.
func TestRunningImagesAreScanned(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	// Only namespaces an ImagePolicy covers are scanned.
	policy := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "scanned"}, Spec: policyv1alpha1.ImagePolicySpec{
		Match:       policyv1alpha1.ImagePolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"scan": "yes"}}},
		MaxSeverity: policyv1alpha1.MaxSeverityHigh,
	}}
	g.Expect(k.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), policy) })
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "scanned", Labels: map[string]string{"scan": "yes"}}})).To(Succeed())
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "not-covered"}})).To(Succeed())
	repo := reg.Host + "/team/app"
	uncovered := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "not-covered", Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Image: repo + ":vuln"},
	}}}
	g.Expect(k.Create(ctx, uncovered)).To(Succeed())
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "scanned", Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "app", Image: repo + ":vuln"}, {Name: "sidecar", Image: repo + ":clean"},
	}}}
	g.Expect(k.Create(ctx, pod)).To(Succeed())

	vuln := imagescan.ScanName(repo, digests["vuln"])
	g.Eventually(func(g Gomega) {
		sc := getScan(g, vuln)
		g.Expect(sc.Status.ScannedAt).NotTo(BeNil(), "status %+v", sc.Status)
		g.Expect(sc.Spec.Digest).To(Equal(digests["vuln"]))
		g.Expect(sc.Status.Tags).To(ConsistOf("vuln"))
		g.Expect(sc.Status.UsedBy).To(ConsistOf(policyv1alpha1.ImageWorkload{Namespace: "scanned", Kind: "Pod", Name: "web"}), "the namespace no policy covers is not counted")
		g.Expect(sc.Status.Counts.Critical).To(BeEquivalentTo(1))
		g.Expect(sc.Status.Findings).To(ConsistOf(policyv1alpha1.ImageFinding{ID: "CVE-2024-1111", Package: "openssl", Installed: "3.0.1-1", Fixed: "3.0.2-1", Severity: policyv1alpha1.SeverityCritical}))
		g.Expect(sc.Status.Scanner.Name).To(Equal(engine.ScannerName))
		g.Expect(sc.Status.DatabaseVersion).NotTo(BeEmpty())
		g.Expect(meta.IsStatusConditionTrue(sc.Status.Conditions, policyv1alpha1.ImageScanConditionScanned)).To(BeTrue())
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		sc := getScan(g, imagescan.ScanName(repo, digests["clean"]))
		g.Expect(sc.Status.ScannedAt).NotTo(BeNil())
		g.Expect(sc.Status.Packages).To(BeEquivalentTo(1))
		g.Expect(sc.Status.Findings).To(BeEmpty())
	}, timeout, poll).Should(Succeed())

	sc := getScan(g, vuln)
	sc.ManagedFields = nil
	b, _ := json.Marshal(sc)
	t.Logf("ImageScan with one finding: %d bytes of JSON as stored (without managedFields)", len(b))

	g.Expect(k.Delete(ctx, pod)).To(Succeed())
	g.Eventually(func() error {
		return k.Get(ctx, client.ObjectKey{Name: vuln}, &policyv1alpha1.ImageScan{})
	}, timeout, poll).Should(Satisfy(func(err error) bool { return client.IgnoreNotFound(err) == nil && err != nil }))
}

// TestPendingTagIsResolvedAndErrorsAreReported: a pending ImageScan (as admission
// creates for a tag it never saw) is resolved to its digest's ImageScan and deleted;
// a tag the registry does not have is reported on its pending ImageScan, not as clean.
func TestPendingTagIsResolvedAndErrorsAreReported(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	repo := reg.Host + "/team/app"
	pending := func(tag string) *policyv1alpha1.ImageScan {
		return &policyv1alpha1.ImageScan{
			ObjectMeta: metav1.ObjectMeta{Name: imagescan.PendingName(repo, tag), Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, policyv1alpha1.ImageScanLabel: "true"}},
			Spec:       policyv1alpha1.ImageScanSpec{Repository: repo, Tag: tag},
		}
	}
	g.Expect(k.Create(ctx, pending("clean"))).To(Succeed())
	missing := pending("missing")
	g.Expect(k.Create(ctx, missing)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), missing) })

	g.Eventually(func(g Gomega) {
		sc := getScan(g, imagescan.ScanName(repo, digests["clean"]))
		g.Expect(sc.Status.Tags).To(ContainElement("clean"))
		g.Expect(sc.Status.ScannedAt).NotTo(BeNil())
		err := k.Get(ctx, client.ObjectKey{Name: imagescan.PendingName(repo, "clean")}, &policyv1alpha1.ImageScan{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the pending ImageScan is deleted once resolved")
	}, timeout, poll).Should(Succeed())
	g.Eventually(func(g Gomega) {
		sc := getScan(g, missing.Name)
		g.Expect(sc.Status.Error).NotTo(BeNil())
		g.Expect(sc.Status.Error.Reason).To(Equal("NotFound"))
		g.Expect(sc.Status.ScannedAt).To(BeNil())
		c := meta.FindStatusCondition(sc.Status.Conditions, policyv1alpha1.ImageScanConditionScanned)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionFalse))
	}, timeout, poll).Should(Succeed())
}

// TestPrivateImagesUseThePullSecrets: a private image is resolved and scanned with
// the pull secrets of the objects that name it: the secret admission recorded on a
// pending ImageScan, the pods' imagePullSecrets, tried in turn until the registry
// takes one; credentials it refuses are reported as AuthFailed, never as clean.
func TestPrivateImagesUseThePullSecrets(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "private-images"
	policy := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: policyv1alpha1.ImagePolicySpec{
		Match:       policyv1alpha1.ImagePolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"private": "yes"}}},
		MaxSeverity: policyv1alpha1.MaxSeverityHigh,
	}}
	g.Expect(k.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), policy) })
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"private": "yes"}}})).To(Succeed())
	for name, password := range map[string]string{"wrong": "not-the-password", "regcred": privPassword} {
		cfg, _ := json.Marshal(map[string]any{"auths": map[string]any{priv.Host: map[string]string{"username": privUser, "password": password}}})
		g.Expect(k.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeDockerConfigJson,
			Data: map[string][]byte{corev1.DockerConfigJsonKey: cfg}})).To(Succeed())
	}
	repo := priv.Host + "/private/app"

	// Admission met the tag in an object naming only the wrong secret: refused.
	pending := &policyv1alpha1.ImageScan{
		ObjectMeta: metav1.ObjectMeta{Name: imagescan.PendingName(repo, "1"),
			Labels:      map[string]string{labels.ManagedBy: labels.ManagedByValue, policyv1alpha1.ImageScanLabel: "true"},
			Annotations: map[string]string{policyv1alpha1.ImageScanPullSecretsAnnotation: ns + "/wrong"}},
		Spec: policyv1alpha1.ImageScanSpec{Repository: repo, Tag: "1"},
	}
	g.Expect(k.Create(ctx, pending)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), pending) })
	g.Eventually(func(g Gomega) {
		sc := getScan(g, pending.Name)
		g.Expect(sc.Status.Error).NotTo(BeNil())
		g.Expect(sc.Status.Error.Reason).To(Equal("AuthFailed"))
		g.Expect(sc.Status.Error.Message).NotTo(ContainSubstring("not-the-password"))
	}, timeout, poll).Should(Succeed())

	// A pod naming the wrong secret and the right one: the second is tried after the
	// registry refuses the first; the digest is scanned and the pending one deleted.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.PodSpec{
		ImagePullSecrets: []corev1.LocalObjectReference{{Name: "wrong"}, {Name: "regcred"}},
		Containers:       []corev1.Container{{Name: "app", Image: repo + ":1"}},
	}}
	g.Expect(k.Create(ctx, pod)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), pod) })
	g.Eventually(func(g Gomega) {
		sc := getScan(g, imagescan.ScanName(repo, privDigest))
		g.Expect(sc.Status.Error).To(BeNil())
		g.Expect(sc.Status.ScannedAt).NotTo(BeNil())
		g.Expect(sc.Status.Counts.Critical).To(BeEquivalentTo(1))
		g.Expect(sc.Status.Tags).To(ContainElement("1"))
		err := k.Get(ctx, client.ObjectKey{Name: pending.Name}, &policyv1alpha1.ImageScan{})
		g.Expect(client.IgnoreNotFound(err)).To(Succeed())
		g.Expect(err).To(HaveOccurred(), "the pending ImageScan is deleted once resolved")
	}, timeout, poll).Should(Succeed())
}

// TestANewDatabaseRescansImagesInUse: the database is downloaded from its URL; when
// the archive there changes, the new version is loaded and the images in use are
// scanned again against it (an unchanged archive changes nothing: the other tests
// run with a refresh every second).
func TestANewDatabaseRescansImagesInUse(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns = "db-refresh"
	policy := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: ns}, Spec: policyv1alpha1.ImagePolicySpec{
		Match:       policyv1alpha1.ImagePolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"refresh": "yes"}}},
		MaxSeverity: policyv1alpha1.MaxSeverityHigh,
	}}
	g.Expect(k.Create(ctx, policy)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), policy) })
	g.Expect(k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{"refresh": "yes"}}})).To(Succeed())
	repo := reg.Host + "/team/app"
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: repo + ":clean"}}}}
	g.Expect(k.Create(ctx, pod)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), pod) })
	name := imagescan.ScanName(repo, digests["clean"])
	var before *policyv1alpha1.ImageScan
	g.Eventually(func(g Gomega) {
		before = getScan(g, name)
		g.Expect(before.Status.ScannedAt).NotTo(BeNil())
		g.Expect(before.Status.Counts.Critical).To(BeZero())
	}, timeout, poll).Should(Succeed())
	// Several refreshes of the same archive later, still the same version.
	time.Sleep(3 * time.Second)
	g.Expect(getScan(g, name).Status.DatabaseVersion).To(Equal(before.Status.DatabaseVersion))

	// The clean image's zlib1g gets a critical record at the URL.
	zlib := testimages.Vuln{ID: "CVE-2024-2222", Ecosystem: "Debian:12", Package: "zlib1g", Fixed: "1:1.3.dfsg-1", Severity: "CRITICAL"}
	g.Expect(testimages.WriteOSV(osvDir, append(slices.Clone(baseVulns), zlib)...)).To(Succeed())
	t.Cleanup(func() { _ = testimages.WriteOSV(osvDir, baseVulns...) })
	g.Eventually(func(g Gomega) {
		sc := getScan(g, name)
		g.Expect(sc.Status.DatabaseVersion).NotTo(Equal(before.Status.DatabaseVersion))
		g.Expect(sc.Status.Counts.Critical).To(BeEquivalentTo(1))
		g.Expect(sc.Status.Findings).To(ContainElement(HaveField("ID", "CVE-2024-2222")))
	}, timeout, poll).Should(Succeed())
}

// TestImageScansAreValidated: an ImageScan's identity cannot change.
func TestImageScansAreValidated(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	sc := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Name: "validated"}, Spec: policyv1alpha1.ImageScanSpec{Repository: "r.io/a", Digest: "sha256:nothex"}}
	g.Expect(k.Create(ctx, sc)).NotTo(Succeed())
	sc.Spec.Digest = digests["clean"]
	g.Expect(k.Create(ctx, sc)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), sc) })
	// A patch, not an update: the controller may write the scan's status meanwhile.
	before := sc.DeepCopy()
	sc.Spec.Repository = "r.io/b"
	err := k.Patch(ctx, sc, client.MergeFrom(before))
	g.Expect(err).To(HaveOccurred())
	g.Expect(err.Error()).To(ContainSubstring("repository is immutable"))
}
