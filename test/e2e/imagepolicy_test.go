//go:build e2e

package e2e

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/testing/testimages"
	"orderly.dev/orderly/internal/testing/testregistry"
)

// TestImagePolicy runs image compliance end to end: a real registry on loopback
// (which the manager, a local process, reaches; kwok nodes never pull), images built
// in Go with a real dpkg database, the real scanner over OSV records written here,
// and the manager serving the ImagePolicy webhook with its own certificate.
func TestImagePolicy(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	reg, err := testregistry.Start()
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(reg.Close)
	digests := map[string]string{}
	for tag, c := range map[string]testimages.Contents{
		"vuln":  {Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.1-1"}, {Name: "zlib1g", Version: "1:1.2.13.dfsg-1"}}},
		"clean": {Dpkg: []testimages.Pkg{{Name: "zlib1g", Version: "1:1.2.13.dfsg-1"}}},
	} {
		d, err := testimages.Push(ctx, reg.Host, "shop/web:"+tag, c)
		g.Expect(err).NotTo(HaveOccurred())
		digests[tag] = d
	}
	dbDir, err := os.MkdirTemp("", "osv-")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(testimages.WriteOSV(dbDir, testimages.Vuln{ID: "CVE-2024-4242", Ecosystem: "Debian:12", Package: "openssl", Fixed: "3.0.2-1", Severity: "CRITICAL"})).To(Succeed())

	port := freePort()
	restartManager(t, "--imagepolicy-webhook", "--webhook-host=127.0.0.1", fmt.Sprintf("--webhook-port=%d", port),
		fmt.Sprintf("--webhook-url=https://127.0.0.1:%d", port), "--imagescan-db-dir="+dbDir, "--imagescan-insecure-registries="+reg.Host)

	const ns = "e2e-images"
	createNamespace(t, ns, map[string]string{"e2e-imagepolicy": "shop"})
	repo := reg.Host + "/shop/web"
	p := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "e2e-shop"}, Spec: policyv1alpha1.ImagePolicySpec{
		Match:             policyv1alpha1.ImagePolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"e2e-imagepolicy": "shop"}}},
		AllowedRegistries: []string{reg.Host + "/*"},
		MaxSeverity:       policyv1alpha1.MaxSeverityHigh,
		Unscanned:         &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedDeny},
	}}
	g.Expect(k.Create(ctx, p)).To(Succeed())
	t.Cleanup(func() { _ = k.Delete(context.Background(), p) })
	g.Eventually(func(g Gomega) {
		var got policyv1alpha1.ImagePolicy
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		c := meta.FindStatusCondition(got.Status.Conditions, policyv1alpha1.ImagePolicyConditionReady)
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue), c.Message)
	}, timeout, poll).Should(Succeed())

	seq := 0
	create := func(image string) error {
		seq++
		d := deployment(ns, fmt.Sprintf("web-%d", seq), 1)
		d.Spec.Template.Spec.Containers[0].Image = image
		err := k.Create(ctx, d)
		if err == nil {
			t.Cleanup(func() { _ = k.Delete(context.Background(), d) })
		}
		return err
	}

	// A registry outside allowedRegistries is refused by the native policy, without
	// any scan: no ImageScan, not even a pending one, appears for it. The probe is a
	// dry run: the policy's binding reaches the API server's admission a moment after
	// Ready, and a Deployment admitted before that would run and count as coverage.
	g.Eventually(func(g Gomega) {
		d := deployment(ns, "outside", 1)
		d.Spec.Template.Spec.Containers[0].Image = "docker.io/library/nginx:1.27"
		err := k.Create(ctx, d, client.DryRunAll)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(And(ContainSubstring("docker.io/library/nginx"), ContainSubstring(reg.Host+"/*")))
	}, timeout, poll).Should(Succeed())

	// Unscanned images are refused (unscanned: Deny) and queued at once; after their
	// scan the vulnerable one is refused naming the CVE, the clean one admitted.
	for _, tag := range []string{"vuln", "clean"} {
		err := create(repo + ":" + tag)
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "err = %v", err)
		g.Expect(err.Error()).To(ContainSubstring("not been scanned"))
	}
	g.Eventually(func(g Gomega) {
		err := create(repo + ":vuln")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "err = %v", err)
		g.Expect(err.Error()).To(And(ContainSubstring("CVE-2024-4242"), ContainSubstring("openssl 3.0.1-1"), ContainSubstring("fixed in 3.0.2-1")))
	}, timeout, poll).Should(Succeed())
	g.Eventually(func() error { return create(repo + ":clean") }, timeout, poll).Should(Succeed())
	var nginx policyv1alpha1.ImageScanList
	g.Expect(k.List(ctx, &nginx)).To(Succeed())
	for _, sc := range nginx.Items {
		g.Expect(sc.Spec.Repository).NotTo(ContainSubstring("nginx"), "an image refused for its registry was scanned")
	}

	// An ignored CVE admits until its expiry passes.
	expires := time.Now().Add(20 * time.Second)
	// Re-read on conflict: the controller writes the policy's status meanwhile.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.Ignore = []policyv1alpha1.ImageIgnore{{ID: "CVE-2024-4242", Reason: "e2e: not reachable", Expires: &metav1.Time{Time: expires}}}
		return k.Update(ctx, p)
	})).To(Succeed())
	g.Eventually(func() error { return create(repo + ":vuln") }, timeout, poll).Should(Succeed())
	time.Sleep(time.Until(expires)) // the expiry itself is what is tested
	g.Eventually(func(g Gomega) {
		err := create(repo + ":vuln")
		g.Expect(apierrors.IsForbidden(err)).To(BeTrue(), "err = %v", err)
		g.Expect(err.Error()).To(ContainSubstring("CVE-2024-4242"))
	}, timeout, poll).Should(Succeed())

	// Coverage and violations of what runs: the clean Deployment and the vulnerable
	// one admitted while its CVE was ignored.
	g.Eventually(func(g Gomega) {
		var got policyv1alpha1.ImagePolicy
		g.Expect(k.Get(ctx, client.ObjectKeyFromObject(p), &got)).To(Succeed())
		g.Expect(got.Status.Coverage.Running).To(BeEquivalentTo(2))
		g.Expect(got.Status.Coverage.Scanned).To(BeEquivalentTo(2))
		g.Expect(got.Status.Violations.Count).To(BeNumerically(">=", 1))
		g.Expect(got.Status.Violations.Items[0].Reason).To(Equal(policyv1alpha1.ImageReasonVulnerable))
		g.Expect(got.Status.Violations.Items[0].Kind).To(Equal("ReplicaSet"))
	}, timeout, poll).Should(Succeed())
	var sc policyv1alpha1.ImageScan
	g.Expect(k.Get(ctx, client.ObjectKey{Name: imagescan.ScanName(repo, digests["clean"])}, &sc)).To(Succeed())
	g.Expect(sc.Status.UsedByCount).To(BeNumerically(">=", 1))
	body, err := httpGet(metricsURL)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(body)).To(ContainSubstring(`orderly_imagepolicy_images{imagepolicy="e2e-shop",state="scanned"} 2`))
	g.Expect(strings.Contains(string(body), "orderly_imagescan_scan_duration_seconds_count")).To(BeTrue())

	// requireDigest with rewrite: a tag the scanner resolved is pinned to its digest in
	// the stored Deployment; one it never saw is refused and queued.
	g.Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := k.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		p.Spec.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true, Rewrite: true}
		return k.Update(ctx, p)
	})).To(Succeed())
	g.Eventually(func(g Gomega) {
		seq++
		d := deployment(ns, fmt.Sprintf("pinned-%d", seq), 1)
		d.Spec.Template.Spec.Containers[0].Image = repo + ":clean"
		g.Expect(k.Create(ctx, d)).To(Succeed())
		t.Cleanup(func() { _ = k.Delete(context.Background(), d) })
		g.Expect(d.Spec.Template.Spec.Containers[0].Image).To(Equal(repo + ":clean@" + digests["clean"]))
	}, timeout, poll).Should(Succeed())
	// The policy's native check changed too; it may reach admission a moment later.
	g.Eventually(func(g Gomega) {
		d := deployment(ns, "unknown-tag", 1)
		d.Spec.Template.Spec.Containers[0].Image = repo + ":unknown"
		err := k.Create(ctx, d, client.DryRunAll)
		g.Expect(err).To(HaveOccurred())
		g.Expect(err.Error()).To(Or(ContainSubstring("requireDigest"), ContainSubstring("not been scanned")))
	}, timeout, poll).Should(Succeed())
}
