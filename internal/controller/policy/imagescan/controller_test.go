package imagescan

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
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

func TestObservedWritesLastSeenInUseOnlyWhenDue(t *testing.T) {
	t0 := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	web := policyv1alpha1.ImageWorkload{Namespace: "team-a", Kind: "ReplicaSet", Name: "web"}
	api := policyv1alpha1.ImageWorkload{Namespace: "team-a", Kind: "ReplicaSet", Name: "api"}
	inUse := func(ws ...policyv1alpha1.ImageWorkload) *use {
		u := &use{tags: []string{"v1"}, workloads: map[policyv1alpha1.ImageWorkload]bool{}, pods: len(ws)}
		for _, w := range ws {
			u.workloads[w] = true
		}
		return u
	}
	seen := policyv1alpha1.ImageScanStatus{Tags: []string{"v1"}, UsedBy: []policyv1alpha1.ImageWorkload{web}, UsedByCount: 1, LastSeenInUse: &metav1.Time{Time: t0}}
	tests := []struct {
		name          string
		u             *use
		later         time.Duration
		wantLastSeen  time.Time
		wantUsedCount int32
	}{
		{"the same use soon after", inUse(web), time.Hour, t0, 1},
		{"the same use a tenth of the retention later", inUse(web), 24 * time.Hour, t0.Add(24 * time.Hour), 1},
		{"another workload soon after", inUse(web, api), time.Hour, t0.Add(time.Hour), 2},
		{"no longer in use", nil, time.Hour, t0, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := &Scanner{Retention: 10 * 24 * time.Hour}
			sc := &policyv1alpha1.ImageScan{Status: *seen.DeepCopy()}
			s.observed(sc, tt.u, t0.Add(tt.later))
			if got := sc.Status.LastSeenInUse.Time; !got.Equal(tt.wantLastSeen) {
				t.Errorf("lastSeenInUse %v, want %v", got, tt.wantLastSeen)
			}
			if sc.Status.UsedByCount != tt.wantUsedCount || len(sc.Status.UsedBy) != int(tt.wantUsedCount) {
				t.Errorf("usedBy %v (%d), want %d", sc.Status.UsedBy, sc.Status.UsedByCount, tt.wantUsedCount)
			}
		})
	}
}

// TestObserveFromAStaleCopyKeepsWhatWasWrittenSince: the inventory works from the
// cache; when it is behind (a resolve just added a tag), the status write loses the
// optimistic lock and is computed again on the latest version, which keeps the tag
// (a merge patch from the stale copy replaced the list of tags, losing it).
func TestObserveFromAStaleCopyKeepsWhatWasWrittenSince(t *testing.T) {
	ctx := context.Background()
	sc := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Name: "app", Generation: 1},
		Spec: policyv1alpha1.ImageScanSpec{Repository: "registry.example.com/app", Digest: "sha256:" + strings.Repeat("ab", 32)}}
	sc.Status.Tags = []string{"v1"}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(sc).WithStatusSubresource(sc).Build()
	var stale policyv1alpha1.ImageScan
	if err := c.Get(ctx, client.ObjectKeyFromObject(sc), &stale); err != nil {
		t.Fatal(err)
	}
	latest := stale.DeepCopy()
	latest.Status.Tags = []string{"stable", "v1"}
	if err := c.Status().Update(ctx, latest); err != nil {
		t.Fatal(err)
	}
	s := &Scanner{Client: c, APIReader: c, Retention: time.Hour}
	u := &use{tags: []string{"v1", "v2"}, workloads: map[policyv1alpha1.ImageWorkload]bool{{Namespace: "team-a", Kind: "Pod", Name: "web"}: true}, pods: 1}
	if err := s.observe(ctx, &stale, u, time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatalf("observe from a stale copy: %v", err)
	}
	var after policyv1alpha1.ImageScan
	if err := c.Get(ctx, client.ObjectKeyFromObject(sc), &after); err != nil {
		t.Fatal(err)
	}
	if !slices.Contains(after.Status.Tags, "stable") || !slices.Contains(after.Status.Tags, "v2") || after.Status.UsedByCount != 1 {
		t.Errorf("status after observe: tags %v, usedByCount %d; want the tag written since kept and the use written", after.Status.Tags, after.Status.UsedByCount)
	}
}
