package imagescan

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

func TestApplyResultIsBoundedSortedAndNamesCVEs(t *testing.T) {
	res := &Result{DBVersion: "db-1", Packages: 40}
	for i := range 30 {
		res.Findings = append(res.Findings, Finding{ID: fmt.Sprintf("GHSA-%02d", i), Package: "p", Severity: policyv1alpha1.SeverityLow})
	}
	res.Findings = append(res.Findings, Finding{ID: "DSA-1", Aliases: []string{"CVE-2024-9999"}, Package: "openssl", Installed: "3.0.1", Fixed: "3.0.2", Severity: policyv1alpha1.SeverityCritical})
	var st policyv1alpha1.ImageScanStatus
	st.Error = &policyv1alpha1.ImageScanError{Reason: "NotFound"}
	now := time.Now()
	ApplyResult(&st, res, policyv1alpha1.ScannerInfo{Name: "osv-scalibr", Version: "v0.5"}, now)
	if len(st.Findings) != policyv1alpha1.MaxImageScanFindings {
		t.Fatalf("%d findings kept, want %d", len(st.Findings), policyv1alpha1.MaxImageScanFindings)
	}
	if f := st.Findings[0]; f.ID != "CVE-2024-9999" || f.Severity != policyv1alpha1.SeverityCritical || f.Fixed != "3.0.2" {
		t.Errorf("worst finding first, by its CVE alias: %+v", f)
	}
	if st.Counts.Critical != 1 || st.Counts.Low != 30 || st.Error != nil || st.DatabaseVersion != "db-1" || st.Packages != 40 {
		t.Errorf("status %+v", st)
	}
	b, _ := json.Marshal(&policyv1alpha1.ImageScan{Status: st})
	if len(b) > 4096 {
		t.Errorf("a full ImageScan status is %d bytes of JSON, want it small", len(b))
	}
}

func TestNames(t *testing.T) {
	d := "sha256:" + strings.Repeat("ab", 32)
	for _, n := range []string{ScanName("registry.example.com/app", d), PendingName("registry.example.com/app", "v1")} {
		if errs := validation.IsDNS1123Label(n); len(errs) > 0 {
			t.Errorf("%s: %v", n, errs)
		}
	}
	if ScanName("a/b", d) == ScanName("a/c", d) {
		t.Error("one digest in two repositories must get two ImageScans")
	}
}

func TestTrimPodKeepsImagesAndDigests(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", Labels: map[string]string{"big": "label"}, Annotations: map[string]string{"a": strings.Repeat("x", 1000)},
			OwnerReferences: []metav1.OwnerReference{{Kind: "ReplicaSet", Name: "rs", Controller: ptr.To(true)}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example.com/app:v1", Command: []string{"x"}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{
			{Name: "c", ImageID: "registry.example.com/app@sha256:" + strings.Repeat("cd", 32)},
		}},
	}
	out, _ := TrimPod(pod)
	trimmed := out.(*corev1.Pod)
	if trimmed.Annotations != nil || trimmed.Labels != nil || trimmed.Spec.Containers[0].Command != nil {
		t.Errorf("trimmed pod keeps more than images: %+v", trimmed)
	}
	imgs, _ := PodImages(trimmed)
	if len(imgs) != 1 || imgs[0].Digest != "sha256:"+strings.Repeat("cd", 32) || imgs[0].Tag != "v1" {
		t.Errorf("images %+v", imgs)
	}
	if w := WorkloadOf(trimmed); w.Kind != "ReplicaSet" || w.Name != "rs" {
		t.Errorf("workload %+v", w)
	}
}

func TestDockerConfigKeychain(t *testing.T) {
	kc, err := ParseDockerConfig([]byte(`{"auths":{"https://registry.example.com":{"username":"u","password":"p"},"docker.io":{"auth":"dTpw"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		reg  string
		want bool
	}{{"registry.example.com", true}, {"index.docker.io", true}, {"other.io", false}} {
		r, _ := name.NewRegistry(tt.reg)
		a, err := kc.Resolve(r)
		if err != nil {
			t.Fatal(err)
		}
		if got := a != authn.Anonymous; got != tt.want {
			t.Errorf("%s: credentials %v, want %v", tt.reg, got, tt.want)
		}
	}
}

func TestPullSecretReferences(t *testing.T) {
	refs := PullSecretsFor("team-a", []corev1.LocalObjectReference{{Name: "one"}, {Name: ""}, {Name: "one"}, {Name: "two"}})
	if got := FormatPullSecrets(refs); got != "team-a/one,team-a/two" {
		t.Fatalf("FormatPullSecrets = %q", got)
	}
	// Malformed entries are skipped; the list stays bounded.
	parsed := ParsePullSecrets("team-a/one, bad,/x,y/,team-b/a,team-b/b,team-b/c,team-b/d")
	if len(parsed) != MaxPullSecrets || parsed[0].String() != "team-a/one" || parsed[1].String() != "team-b/a" {
		t.Fatalf("ParsePullSecrets = %v", parsed)
	}
	sc := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{
		policyv1alpha1.ImageScanPullSecretsAnnotation: "team-b/x,team-a/one"}}}
	// The pods' secrets come first; admission's are added without repeats.
	got := admittedWith(sc, refs)
	if FormatPullSecrets(got) != "team-a/one,team-a/two,team-b/x" {
		t.Fatalf("admittedWith = %v", got)
	}
	if len(refs) != 2 {
		t.Fatalf("admittedWith changed its argument: %v", refs)
	}
}
