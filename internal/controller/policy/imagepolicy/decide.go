package imagepolicy

import (
	"fmt"
	"strings"
	"time"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
)

// ReasonInvalidReference: the image reference does not parse.
const ReasonInvalidReference = "InvalidReference"

// Lookup reads ImageScans, normally from the informer cache.
type Lookup interface {
	// ByDigest is the ImageScan of repository@digest, nil when there is none.
	ByDigest(repository, digest string) *policyv1alpha1.ImageScan
	// ByTag is the ImageScan repository:tag was last seen pointing at (nil when
	// none), and the tag's pending ImageScan (nil when none).
	ByTag(repository, tag string) (scan, pending *policyv1alpha1.ImageScan)
}

// Verdict is the decision on one image.
type Verdict struct {
	Ref imagescan.Ref
	// Reason is empty when the image is allowed, else an ImageReason* constant or
	// ReasonInvalidReference. An unscanned image admitted by the unscanned policy
	// has no Reason but Unscanned set.
	Reason string
	// Message says why, naming the CVEs, packages, installed and fixed versions.
	Message string
	// Severity is the worst blocking severity of a Vulnerable image.
	Severity policyv1alpha1.Severity
	// Unscanned is set when no scan result exists for the image.
	Unscanned bool
	// Queue is set when nothing is known of the image at all (no ImageScan, not
	// even a pending one): admission should create the pending ImageScan.
	Queue bool
}

// Checks selects what Evaluate checks.
type Checks struct {
	// Native are the checks the generated ValidatingAdmissionPolicy makes
	// (allowedRegistries, requireDigest); the webhook leaves them to it.
	Native bool
	// Scan are the checks from scan results (maxSeverity, ignore, unscanned).
	Scan bool
}

// All are all the checks, as the background evaluation makes them.
var All = Checks{Native: true, Scan: true}

// Compiled is a policy prepared for evaluation.
type Compiled struct {
	Policy     *policyv1alpha1.ImagePolicy
	Registries *Registries
}

// Compile prepares p for Evaluate.
func Compile(p *policyv1alpha1.ImagePolicy) (*Compiled, error) {
	r, err := CompileRegistries(p.Spec.AllowedRegistries)
	if err != nil {
		return nil, err
	}
	return &Compiled{Policy: p, Registries: r}, nil
}

// NeedsScans says whether the policy decides anything from scan results: a
// maxSeverity, or an unscanned action other than Allow.
func NeedsScans(p *policyv1alpha1.ImagePolicy) bool {
	return p.Spec.MaxSeverity != "" || unscanned(p).Action != policyv1alpha1.UnscannedAllow
}

// NeedsNative says whether the policy has checks for the ValidatingAdmissionPolicy.
func NeedsNative(p *policyv1alpha1.ImagePolicy) bool {
	return len(p.Spec.AllowedRegistries) > 0 || requireDigest(p)
}

// NeedsRewrite says whether the policy pins tags to digests (requireDigest.rewrite).
func NeedsRewrite(p *policyv1alpha1.ImagePolicy) bool {
	return requireDigest(p) && p.Spec.RequireDigest.Rewrite
}

func requireDigest(p *policyv1alpha1.ImagePolicy) bool {
	return p.Spec.RequireDigest != nil && p.Spec.RequireDigest.Enabled
}

func unscanned(p *policyv1alpha1.ImagePolicy) policyv1alpha1.UnscannedPolicy {
	if p.Spec.Unscanned == nil {
		return policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedDeny}
	}
	return *p.Spec.Unscanned
}

// allowedRank is the worst rank maxSeverity admits; -1 for None (nothing, Unknown
// included).
func allowedRank(m policyv1alpha1.MaxSeverity) int {
	switch m {
	case policyv1alpha1.MaxSeverityNone:
		return -1
	case "":
		return 99
	}
	return imagescan.Rank(policyv1alpha1.Severity(m))
}

// Ignored says whether finding id is ignored at now (listed, and not expired).
func Ignored(p *policyv1alpha1.ImagePolicy, id string, now time.Time) bool {
	for _, ig := range p.Spec.Ignore {
		if ig.ID == id && (ig.Expires == nil || now.Before(ig.Expires.Time)) {
			return true
		}
	}
	return false
}

// NextIgnoreExpiry is the earliest expiry of an ignore still active at now.
func NextIgnoreExpiry(p *policyv1alpha1.ImagePolicy, now time.Time) (time.Time, bool) {
	var out time.Time
	for _, ig := range p.Spec.Ignore {
		if ig.Expires != nil && now.Before(ig.Expires.Time) && (out.IsZero() || ig.Expires.Time.Before(out)) {
			out = ig.Expires.Time
		}
	}
	return out, !out.IsZero()
}

// Evaluate decides one image of a workload under c at now, reading scan results
// from l only: it never calls a registry or a scanner.
func (c *Compiled) Evaluate(image string, l Lookup, checks Checks, now time.Time) Verdict {
	p := c.Policy
	ref, err := imagescan.ParseRef(image)
	if err != nil {
		return Verdict{Reason: ReasonInvalidReference, Message: err.Error()}
	}
	v := Verdict{Ref: ref}
	if checks.Native {
		if !c.Registries.Allowed(ref.Repository) {
			v.Reason = policyv1alpha1.ImageReasonRegistryNotAllowed
			v.Message = fmt.Sprintf("image %s is from %s, which is not in allowedRegistries (%s)", image, ref.Repository, c.Registries.Describe())
			return v
		}
		if requireDigest(p) && ref.Digest == "" {
			v.Reason = policyv1alpha1.ImageReasonDigestRequired
			v.Message = fmt.Sprintf("image %s names no digest; requireDigest needs image@sha256:...", image)
			return v
		}
	}
	if !checks.Scan || !NeedsScans(p) {
		return v
	}
	var scan, pending *policyv1alpha1.ImageScan
	if ref.Digest != "" {
		scan = l.ByDigest(ref.Repository, ref.Digest)
	} else {
		scan, pending = l.ByTag(ref.Repository, ref.Tag)
	}
	if scan == nil || scan.Status.ScannedAt == nil {
		return c.unscannedVerdict(v, image, scan, pending, now)
	}
	return c.severityVerdict(v, image, scan, now)
}

func (c *Compiled) unscannedVerdict(v Verdict, image string, scan, pending *policyv1alpha1.ImageScan, now time.Time) Verdict {
	v.Unscanned = true
	v.Queue = scan == nil && pending == nil
	known := scan
	if known == nil {
		known = pending
	}
	v.Reason = policyv1alpha1.ImageReasonUnscanned
	v.Message = fmt.Sprintf("image %s has not been scanned yet (queued)", image)
	if known != nil && known.Status.Error != nil {
		v.Reason = policyv1alpha1.ImageReasonScanFailed
		v.Message = fmt.Sprintf("image %s could not be scanned: %s: %s", image, known.Status.Error.Reason, known.Status.Error.Message)
	}
	u := unscanned(c.Policy)
	switch u.Action {
	case policyv1alpha1.UnscannedAllow:
		v.Reason, v.Message = "", ""
	case policyv1alpha1.UnscannedAllowFor:
		since := now
		if known != nil {
			since = known.CreationTimestamp.Time
		}
		grace := time.Duration(0)
		if u.GracePeriod != nil {
			grace = u.GracePeriod.Duration
		}
		if now.Before(since.Add(grace)) {
			v.Reason, v.Message = "", ""
		} else {
			v.Message += fmt.Sprintf("; its grace period of %s (unscanned: AllowFor) is over", grace)
		}
	}
	return v
}

func (c *Compiled) severityVerdict(v Verdict, image string, scan *policyv1alpha1.ImageScan, now time.Time) Verdict {
	p := c.Policy
	if p.Spec.MaxSeverity == "" {
		return v
	}
	limit := allowedRank(p.Spec.MaxSeverity)
	above := 0
	counts := scan.Status.Counts
	for _, s := range []struct {
		n    int32
		sev  policyv1alpha1.Severity
		rank int
	}{{counts.Critical, policyv1alpha1.SeverityCritical, 4}, {counts.High, policyv1alpha1.SeverityHigh, 3}, {counts.Medium, policyv1alpha1.SeverityMedium, 2}, {counts.Low, policyv1alpha1.SeverityLow, 1}, {counts.Unknown, policyv1alpha1.SeverityUnknown, 0}} {
		if s.rank > limit {
			above += int(s.n)
		}
	}
	if above == 0 {
		return v
	}
	var blocking []policyv1alpha1.ImageFinding
	listed := 0
	for _, f := range scan.Status.Findings {
		if imagescan.Rank(f.Severity) <= limit {
			continue
		}
		listed++
		if !Ignored(p, f.ID, now) {
			blocking = append(blocking, f)
		}
	}
	// Findings beyond the 20 listed cannot be matched against ignore: they block.
	unlisted := max(above-listed, 0)
	if len(blocking) == 0 && unlisted == 0 {
		return v
	}
	v.Reason = policyv1alpha1.ImageReasonVulnerable
	if len(blocking) > 0 {
		v.Severity = blocking[0].Severity
	} else {
		v.Severity = policyv1alpha1.SeverityUnknown
	}
	var parts []string
	for i, f := range blocking {
		if i == 3 {
			break
		}
		fixed := "no fix known"
		if f.Fixed != "" {
			fixed = "fixed in " + f.Fixed
		}
		parts = append(parts, fmt.Sprintf("%s (%s) in %s %s, %s", f.ID, f.Severity, f.Package, f.Installed, fixed))
	}
	more := len(blocking) - len(parts) + unlisted
	msg := fmt.Sprintf("image %s has vulnerabilities above maxSeverity %s: %s", image, p.Spec.MaxSeverity, strings.Join(parts, "; "))
	if len(parts) == 0 {
		msg = fmt.Sprintf("image %s has %d vulnerabilities above maxSeverity %s", image, unlisted, p.Spec.MaxSeverity)
	} else if more > 0 {
		msg += fmt.Sprintf("; and %d more (kubectl get imagescan %s -o yaml)", more, scan.Name)
	}
	v.Message = msg
	return v
}
