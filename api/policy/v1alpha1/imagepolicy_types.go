package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ImagePolicyLabel is set on every admission object Orderly generates for an
// ImagePolicy; its value is the ImagePolicy's name.
const ImagePolicyLabel = "policy.orderly.dev/imagepolicy"

// MaxSeverity is the worst vulnerability severity an image may carry.
// +kubebuilder:validation:Enum=Critical;High;Medium;Low;None
type MaxSeverity string

// The thresholds. High admits High and lower and blocks Critical; None blocks any
// finding, Unknown severity included.
const (
	MaxSeverityCritical MaxSeverity = "Critical"
	MaxSeverityHigh     MaxSeverity = "High"
	MaxSeverityMedium   MaxSeverity = "Medium"
	MaxSeverityLow      MaxSeverity = "Low"
	MaxSeverityNone     MaxSeverity = "None"
)

// ImageAction says what happens to a workload whose image breaks the policy.
// +kubebuilder:validation:Enum=Deny;Warn;Audit
type ImageAction string

// The actions.
const (
	// ImageActionDeny refuses the workload.
	ImageActionDeny ImageAction = "Deny"
	// ImageActionWarn admits it with a warning to the client (kubectl prints it).
	ImageActionWarn ImageAction = "Warn"
	// ImageActionAudit admits it silently; the violation is in status and metrics.
	ImageActionAudit ImageAction = "Audit"
)

// UnscannedAction says what happens to an image with no scan result yet (or whose
// scan failed: a failed scan is never counted as clean).
// +kubebuilder:validation:Enum=Deny;Allow;AllowFor
type UnscannedAction string

// The unscanned actions.
const (
	UnscannedDeny     UnscannedAction = "Deny"
	UnscannedAllow    UnscannedAction = "Allow"
	UnscannedAllowFor UnscannedAction = "AllowFor"
)

// ImagePolicyMatch selects the namespaces a policy applies to.
type ImagePolicyMatch struct {
	// namespaceSelector restricts the policy to namespaces with matching labels; by
	// default every namespace not excluded.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// excludedNamespaces are never subject to the policy. Every kube-* namespace and
	// the namespace Orderly's manager runs in are always excluded, listed or not.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`
}

// ImageIgnore accepts one vulnerability, for a reason, until it expires.
type ImageIgnore struct {
	// id of the vulnerability as the ImageScan reports it (e.g. CVE-2024-1234 or
	// GHSA-...).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[A-Za-z0-9][A-Za-z0-9._:-]*$`
	ID string `json:"id"`

	// reason the vulnerability is accepted, for whoever reads the policy.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason"`

	// expires is when the vulnerability counts again; never when unset.
	// +optional
	Expires *metav1.Time `json:"expires,omitempty"`
}

// UnscannedPolicy says how admission treats an image that has no scan result yet.
// +kubebuilder:validation:XValidation:rule="self.action == 'AllowFor' ? has(self.gracePeriod) : !has(self.gracePeriod)",message="unscanned.gracePeriod is required with action AllowFor and only allowed with it"
type UnscannedPolicy struct {
	// action is Deny (refuse until scanned; the image is queued for scanning at
	// once), Allow, or AllowFor (admit during a grace period counted from the first
	// time admission met the image, then refuse until it is scanned).
	// +required
	Action UnscannedAction `json:"action"`

	// gracePeriod of AllowFor, e.g. 10m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="gracePeriod must be positive"
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
}

// RequireDigest makes images name a digest (image@sha256:...) instead of a tag.
// +kubebuilder:validation:XValidation:rule="!has(self.rewrite) || !self.rewrite || (has(self.enabled) && self.enabled)",message="requireDigest.rewrite needs requireDigest.enabled"
type RequireDigest struct {
	// enabled refuses images given by tag only.
	// +optional
	Enabled bool `json:"enabled,omitempty"`
	// rewrite, with enabled, has Orderly's mutating webhook pin a tag to the digest
	// the scanner last resolved it to (repo:tag becomes repo:tag@sha256:...) before
	// the check; a tag never resolved yet is left alone, refused, and queued for
	// resolving, so that a retry is pinned. Needs the manager's ImagePolicy webhook
	// (--imagepolicy-webhook); without it only enabled is enforced.
	// +optional
	Rewrite bool `json:"rewrite,omitempty"`
}

// ImagePolicySpec is what the images of matched workloads must satisfy.
// +kubebuilder:validation:XValidation:rule="has(self.allowedRegistries) || has(self.maxSeverity) || (has(self.requireDigest) && self.requireDigest.enabled) || (has(self.unscanned) && self.unscanned.action != 'Allow')",message="an ImagePolicy needs at least one of allowedRegistries, maxSeverity, requireDigest.enabled or an unscanned action other than Allow"
// +kubebuilder:validation:MinProperties=1
type ImagePolicySpec struct {
	// match selects the namespaces the policy applies to. Pods and the pod
	// templates of Deployments, StatefulSets, DaemonSets, ReplicaSets, Jobs and
	// CronJobs are checked at create, and at update when their images change.
	// +optional
	Match ImagePolicyMatch `json:"match,omitempty,omitzero"`

	// allowedRegistries are the patterns an image's repository must match:
	// "registry.example.com/*" (any repository of that registry),
	// "registry.example.com/team/*" (any below team/), "registry.example.com/team/app"
	// (that repository only), "*.corp.io/team/*" (any subdomain of corp.io). Images
	// without a registry are Docker Hub's: "nginx" is docker.io/library/nginx. Every
	// registry is allowed when empty. Enforced by a ValidatingAdmissionPolicy, without
	// any registry call or scan.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=255
	// +kubebuilder:validation:items:Pattern=`^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(/\*)?$`
	// +listType=set
	AllowedRegistries []string `json:"allowedRegistries,omitempty"`

	// maxSeverity is the worst severity an image may carry: High admits High and
	// below and blocks Critical; None blocks any finding. Unset: severities are not
	// checked.
	// +optional
	MaxSeverity MaxSeverity `json:"maxSeverity,omitempty"`

	// ignore lists vulnerabilities that do not count, each with a reason and an
	// optional expiry.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=map
	// +listMapKey=id
	Ignore []ImageIgnore `json:"ignore,omitempty"`

	// unscanned is how images without a scan result are treated. Default: Deny.
	// +optional
	Unscanned *UnscannedPolicy `json:"unscanned,omitempty"`

	// action is Deny (refuse), Warn (admit with a warning) or Audit (admit; report
	// in status and metrics). It applies to the scan-based checks and to
	// allowedRegistries and requireDigest alike.
	// +optional
	// +kubebuilder:default=Deny
	Action ImageAction `json:"action,omitempty"`

	// rescanInterval is how often images in use are scanned again even when the
	// vulnerability database did not change (it always rescans when it does).
	// Default 24h, at least 1m.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1m')",message="rescanInterval must be at least 1m"
	RescanInterval *metav1.Duration `json:"rescanInterval,omitempty"`

	// requireDigest refuses images given by tag only.
	// +optional
	RequireDigest *RequireDigest `json:"requireDigest,omitempty"`
}

// ImageViolation is one running pod whose image breaks the policy.
type ImageViolation struct {
	// namespace of the pod's workload.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// kind of the workload: Pod, or the kind of the pod's controller.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// name of the workload.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// image as the pod names it.
	// +required
	// +kubebuilder:validation:MaxLength=512
	Image string `json:"image"`
	// reason is Vulnerable, Unscanned, ScanFailed, RegistryNotAllowed or DigestRequired.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Reason string `json:"reason"`
	// message names the findings, e.g. "CVE-2024-1234 in openssl 3.0.1 (fixed in 3.0.2)".
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// Image violation reasons.
const (
	ImageReasonVulnerable         = "Vulnerable"
	ImageReasonUnscanned          = "Unscanned"
	ImageReasonScanFailed         = "ScanFailed"
	ImageReasonRegistryNotAllowed = "RegistryNotAllowed"
	ImageReasonDigestRequired     = "DigestRequired"
)

// ImageViolations counts running workloads in violation and lists some.
type ImageViolations struct {
	// count of running pods' images in violation.
	// +optional
	Count int32 `json:"count"`
	// items lists up to 20 of them, sorted by namespace, kind, name and image.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Items []ImageViolation `json:"items,omitempty"`
}

// ImageCoverage counts the distinct images running in the matched namespaces.
type ImageCoverage struct {
	// running images (distinct repository and digest, or tag when no digest is known).
	// +optional
	Running int32 `json:"running"`
	// scanned among them: scanned successfully.
	// +optional
	Scanned int32 `json:"scanned"`
	// failed among them: the last scan failed (see the ImageScan's error).
	// +optional
	Failed int32 `json:"failed"`
	// pending among them: not scanned yet.
	// +optional
	Pending int32 `json:"pending"`
}

// Condition types of an ImagePolicy.
const (
	// ImagePolicyConditionReady is True when the admission objects are in place.
	ImagePolicyConditionReady = "Ready"
	// ImagePolicyConditionCompliant is True when no running image breaks the policy.
	ImagePolicyConditionCompliant = "Compliant"
)

// ImagePolicyStatus is the observed state of an ImagePolicy.
type ImagePolicyStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// violations among the running pods at the last evaluation.
	// +optional
	Violations ImageViolations `json:"violations,omitempty,omitzero"`

	// coverage of the running images by scans at the last evaluation.
	// +optional
	Coverage ImageCoverage `json:"coverage,omitempty,omitzero"`

	// lastEvaluated is when running pods were last evaluated.
	// +optional
	LastEvaluated *metav1.Time `json:"lastEvaluated,omitempty"`

	// conditions: Ready and Compliant.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ImagePolicy decides which images may run: from allowed registries, by digest,
// and without vulnerabilities above a severity, from scan results Orderly keeps in
// ImageScans. It never scans inside an admission request.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ip,categories=orderly
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Max Severity",type=string,JSONPath=`.spec.maxSeverity`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.violations.count`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.coverage.running`
// +kubebuilder:printcolumn:name="Scanned",type=integer,JSONPath=`.status.coverage.scanned`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="an ImagePolicy's name is used in the names of generated admission objects and must be at most 40 characters"
type ImagePolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what images must satisfy.
	// +required
	Spec ImagePolicySpec `json:"spec"`

	// status is what Orderly observed.
	// +optional
	Status ImagePolicyStatus `json:"status,omitempty,omitzero"`
}

// ImagePolicyList is a list of ImagePolicies.
// +kubebuilder:object:root=true
type ImagePolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ImagePolicies.
	Items []ImagePolicy `json:"items"`
}
