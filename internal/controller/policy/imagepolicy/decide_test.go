package imagepolicy

import (
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
)

const digestA = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"

// fakeLookup serves ImageScans from memory: the decision logic's only input.
type fakeLookup struct {
	byDigest map[string]*policyv1alpha1.ImageScan
	byTag    map[string]*policyv1alpha1.ImageScan
	pending  map[string]*policyv1alpha1.ImageScan
}

func (f fakeLookup) ByDigest(repo, digest string) *policyv1alpha1.ImageScan {
	return f.byDigest[repo+"@"+digest]
}

func (f fakeLookup) ByTag(repo, tag string) (*policyv1alpha1.ImageScan, *policyv1alpha1.ImageScan) {
	return f.byTag[repo+":"+tag], f.pending[repo+":"+tag]
}

var now = time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)

func scanned(findings ...policyv1alpha1.ImageFinding) *policyv1alpha1.ImageScan {
	s := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Name: "s", CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	s.Status.ScannedAt = &metav1.Time{Time: now.Add(-time.Minute)}
	for _, f := range findings {
		switch f.Severity {
		case policyv1alpha1.SeverityCritical:
			s.Status.Counts.Critical++
		case policyv1alpha1.SeverityHigh:
			s.Status.Counts.High++
		case policyv1alpha1.SeverityMedium:
			s.Status.Counts.Medium++
		case policyv1alpha1.SeverityLow:
			s.Status.Counts.Low++
		default:
			s.Status.Counts.Unknown++
		}
	}
	s.Status.Findings = findings
	return s
}

func finding(id string, sev policyv1alpha1.Severity) policyv1alpha1.ImageFinding {
	return policyv1alpha1.ImageFinding{ID: id, Package: "openssl", Installed: "3.0.1", Fixed: "3.0.2", Severity: sev}
}

func policy(mut func(*policyv1alpha1.ImagePolicySpec)) *policyv1alpha1.ImagePolicy {
	p := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "prod"}}
	p.Spec.MaxSeverity = policyv1alpha1.MaxSeverityHigh
	if mut != nil {
		mut(&p.Spec)
	}
	return p
}

func TestEvaluate(t *testing.T) {
	crit := scanned(finding("CVE-2024-0001", policyv1alpha1.SeverityCritical), finding("CVE-2024-0002", policyv1alpha1.SeverityHigh))
	highOnly := scanned(finding("CVE-2024-0002", policyv1alpha1.SeverityHigh))
	unknownOnly := scanned(finding("OSV-1", policyv1alpha1.SeverityUnknown))
	failed := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-time.Hour))}}
	failed.Status.Error = &policyv1alpha1.ImageScanError{Reason: "AuthFailed", Message: "401 Unauthorized"}
	freshPending := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-2 * time.Minute))}}
	oldPending := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(now.Add(-20 * time.Minute))}}
	l := fakeLookup{
		byDigest: map[string]*policyv1alpha1.ImageScan{"registry.example.com/app@" + digestA: crit},
		byTag: map[string]*policyv1alpha1.ImageScan{
			"registry.example.com/app:vuln": crit, "registry.example.com/app:high": highOnly,
			"registry.example.com/app:unknown": unknownOnly, "registry.example.com/app:failed": failed,
		},
		pending: map[string]*policyv1alpha1.ImageScan{
			"registry.example.com/app:fresh": freshPending, "registry.example.com/app:old": oldPending,
		},
	}
	past, future := metav1.NewTime(now.Add(-time.Minute)), metav1.NewTime(now.Add(time.Hour))
	allowFor := &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllowFor, GracePeriod: &metav1.Duration{Duration: 10 * time.Minute}}
	tests := []struct {
		name       string
		policy     *policyv1alpha1.ImagePolicy
		image      string
		wantReason string
		wantQueue  bool
		wantIn     []string
	}{
		{"critical above High is blocked, naming CVE, package and versions", policy(nil), "registry.example.com/app:vuln", policyv1alpha1.ImageReasonVulnerable, false,
			[]string{"CVE-2024-0001", "openssl 3.0.1", "fixed in 3.0.2", "maxSeverity High"}},
		{"the High finding is not named when only Critical is above the threshold", policy(nil), "registry.example.com/app:vuln", policyv1alpha1.ImageReasonVulnerable, false, nil},
		{"by digest too", policy(nil), "registry.example.com/app@" + digestA, policyv1alpha1.ImageReasonVulnerable, false, []string{"CVE-2024-0001"}},
		{"High is allowed by maxSeverity High", policy(nil), "registry.example.com/app:high", "", false, nil},
		{"High is blocked by maxSeverity Medium", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.MaxSeverity = policyv1alpha1.MaxSeverityMedium }),
			"registry.example.com/app:high", policyv1alpha1.ImageReasonVulnerable, false, []string{"CVE-2024-0002"}},
		{"Unknown severity passes Low", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.MaxSeverity = policyv1alpha1.MaxSeverityLow }),
			"registry.example.com/app:unknown", "", false, nil},
		{"None blocks Unknown severity", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.MaxSeverity = policyv1alpha1.MaxSeverityNone }),
			"registry.example.com/app:unknown", policyv1alpha1.ImageReasonVulnerable, false, []string{"OSV-1"}},
		{"an ignored CVE admits until it expires", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.Ignore = []policyv1alpha1.ImageIgnore{{ID: "CVE-2024-0001", Reason: "not reachable", Expires: &future}}
		}), "registry.example.com/app:vuln", "", false, nil},
		{"an ignore without expiry admits", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.Ignore = []policyv1alpha1.ImageIgnore{{ID: "CVE-2024-0001", Reason: "false positive"}}
		}), "registry.example.com/app:vuln", "", false, nil},
		{"an expired ignore blocks again", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.Ignore = []policyv1alpha1.ImageIgnore{{ID: "CVE-2024-0001", Reason: "not reachable", Expires: &past}}
		}), "registry.example.com/app:vuln", policyv1alpha1.ImageReasonVulnerable, false, []string{"CVE-2024-0001"}},
		{"an unknown tag is unscanned: denied by default and queued", policy(nil), "registry.example.com/app:new", policyv1alpha1.ImageReasonUnscanned, true, []string{"not been scanned"}},
		{"unscanned Allow admits, still queued", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.Unscanned = &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllow}
		}), "registry.example.com/app:new", "", true, nil},
		{"AllowFor admits a tag first met now", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.Unscanned = allowFor }), "registry.example.com/app:new", "", true, nil},
		{"AllowFor admits within the grace period of its pending scan, not queued twice", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.Unscanned = allowFor }),
			"registry.example.com/app:fresh", "", false, nil},
		{"AllowFor refuses once the grace period is over", policy(func(s *policyv1alpha1.ImagePolicySpec) { s.Unscanned = allowFor }),
			"registry.example.com/app:old", policyv1alpha1.ImageReasonUnscanned, false, []string{"grace period of 10m0s"}},
		{"a failed scan is never clean", policy(nil), "registry.example.com/app:failed", policyv1alpha1.ImageReasonScanFailed, false, []string{"AuthFailed", "401"}},
		{"a failed scan under Allow is admitted", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.Unscanned = &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllow}
		}), "registry.example.com/app:failed", "", false, nil},
		{"registry outside allowedRegistries, without any lookup", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.AllowedRegistries = []string{"registry.corp.io/*"}
		}), "registry.example.com/app:high", policyv1alpha1.ImageReasonRegistryNotAllowed, false, []string{"registry.example.com/app", "registry.corp.io/*"}},
		{"requireDigest refuses a tag", policy(func(s *policyv1alpha1.ImagePolicySpec) {
			s.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true}
		}), "registry.example.com/app:high", policyv1alpha1.ImageReasonDigestRequired, false, []string{"@sha256"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Compile(tt.policy)
			if err != nil {
				t.Fatal(err)
			}
			v := c.Evaluate(tt.image, l, All, now)
			if v.Reason != tt.wantReason || v.Queue != tt.wantQueue {
				t.Fatalf("reason %q queue %v (%s), want %q queue %v", v.Reason, v.Queue, v.Message, tt.wantReason, tt.wantQueue)
			}
			for _, s := range tt.wantIn {
				if !strings.Contains(v.Message, s) {
					t.Errorf("message %q does not name %q", v.Message, s)
				}
			}
			if strings.Contains(tt.name, "not named") && strings.Contains(v.Message, "CVE-2024-0002") {
				t.Errorf("message %q names a finding the threshold allows", v.Message)
			}
		})
	}
}

func TestEvaluateTruncatedFindingsBlockDespiteIgnores(t *testing.T) {
	s := scanned(finding("CVE-2024-0001", policyv1alpha1.SeverityCritical))
	s.Status.Counts.Critical = 25 // 24 more than listed: they cannot be matched against ignore
	p := policy(func(s *policyv1alpha1.ImagePolicySpec) {
		s.Ignore = []policyv1alpha1.ImageIgnore{{ID: "CVE-2024-0001", Reason: "r"}}
	})
	c, _ := Compile(p)
	v := c.Evaluate("registry.example.com/app:x", fakeLookup{byTag: map[string]*policyv1alpha1.ImageScan{"registry.example.com/app:x": s}}, All, now)
	if v.Reason != policyv1alpha1.ImageReasonVulnerable || !strings.Contains(v.Message, "24") {
		t.Errorf("verdict %+v: want Vulnerable naming the 24 unlisted findings", v)
	}
}

func TestRegistryPatterns(t *testing.T) {
	tests := []struct {
		pattern string
		repo    string
		want    bool
	}{
		{"registry.example.com/*", "registry.example.com/app", true},
		{"registry.example.com/*", "registry.example.com/team/app", true},
		{"registry.example.com", "registry.example.com/app", true},
		{"registry.example.com/*", "registry.example.com.evil.io/app", false},
		{"registry.example.com/*", "evil.io/registry.example.com/app", false},
		{"registry.example.com/team/*", "registry.example.com/team/app", true},
		{"registry.example.com/team/*", "registry.example.com/team2/app", false},
		{"registry.example.com/team/*", "registry.example.com/team", false},
		{"registry.example.com/team/app", "registry.example.com/team/app", true},
		{"registry.example.com/team/app", "registry.example.com/team/app2", false},
		{"*.corp.io/team/*", "eu.registry.corp.io/team/app", true},
		{"*.corp.io/team/*", "corp.io/team/app", false},
		{"*.corp.io/team/*", "evilcorp.io/team/app", false},
		{"127.0.0.1:5000/*", "127.0.0.1:5000/app", true},
		{"127.0.0.1:5000/*", "127.0.0.1:5001/app", false},
		{"docker.io/library/*", "docker.io/library/nginx", true},
	}
	for _, tt := range tests {
		r, err := CompileRegistries([]string{tt.pattern})
		if err != nil {
			t.Fatal(err)
		}
		if got := r.Allowed(tt.repo); got != tt.want {
			t.Errorf("%q allows %q = %v, want %v (regexp %s)", tt.pattern, tt.repo, got, tt.want, RegistryRegexp(tt.pattern))
		}
	}
	if !(*Registries)(nil).Allowed("anything/at/all") {
		t.Error("no patterns must allow every registry")
	}
}

func TestParseRefNormalizes(t *testing.T) {
	tests := []struct{ image, repo, tag, digest string }{
		{"nginx", "docker.io/library/nginx", "latest", ""},
		{"nginx:1.27", "docker.io/library/nginx", "1.27", ""},
		{"team/app:v1", "docker.io/team/app", "v1", ""},
		{"index.docker.io/library/nginx", "docker.io/library/nginx", "latest", ""},
		{"127.0.0.1:5000/app:v1", "127.0.0.1:5000/app", "v1", ""},
		{"registry.example.com/app@" + digestA, "registry.example.com/app", "", digestA},
		{"registry.example.com/app:v1@" + digestA, "registry.example.com/app", "v1", digestA},
	}
	for _, tt := range tests {
		r, err := imagescan.ParseRef(tt.image)
		if err != nil {
			t.Fatalf("%s: %v", tt.image, err)
		}
		if r.Repository != tt.repo || r.Tag != tt.tag || r.Digest != tt.digest {
			t.Errorf("%s: got %+v, want repo %s tag %s digest %s", tt.image, r, tt.repo, tt.tag, tt.digest)
		}
	}
	if _, err := imagescan.ParseRef("UPPER/Case::bad"); err == nil {
		t.Error("a bad reference parsed")
	}
}
