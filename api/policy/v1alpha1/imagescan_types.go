package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &ImageScan{}, &ImageScanList{}, &ImagePolicy{}, &ImagePolicyList{})
		return nil
	})
}

// ImageScanLabel is set on every ImageScan; its value is "true". ImageScans are
// written only by Orderly.
const ImageScanLabel = "policy.orderly.dev/imagescan"

// ImageScanPullSecretsAnnotation, on a pending ImageScan, names the pull secrets
// ("namespace/name,...") of the object whose admission queued it, so that a private
// image can be resolved before any pod runs it. Written by Orderly's webhook only.
const ImageScanPullSecretsAnnotation = "policy.orderly.dev/pull-secrets"

// Severity of a vulnerability, as the scanner reports it.
// +kubebuilder:validation:Enum=Critical;High;Medium;Low;Unknown
type Severity string

// The severities, from the worst.
const (
	SeverityCritical Severity = "Critical"
	SeverityHigh     Severity = "High"
	SeverityMedium   Severity = "Medium"
	SeverityLow      Severity = "Low"
	SeverityUnknown  Severity = "Unknown"
)

// Limits of an ImageScan's lists, so that thousands of them stay small in etcd.
const (
	MaxImageScanTags     = 10
	MaxImageScanUsedBy   = 10
	MaxImageScanFindings = 20
)

// ImageScanSpec names the image scanned. Set when the ImageScan is created, never
// changed.
// +kubebuilder:validation:XValidation:rule="has(self.digest) || has(self.tag)",message="an ImageScan names a digest, or (while pending) a tag"
type ImageScanSpec struct {
	// repository of the image, normalized: registry host and path, e.g.
	// registry.example.com/team/app or index.docker.io/library/nginx.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=255
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="repository is immutable"
	Repository string `json:"repository"`

	// digest of the image manifest (or index), sha256:<64 hex>. Empty on a pending
	// ImageScan, which stands for a tag admission met before any scan knew it: the
	// scanner resolves it, scans the digest into its own ImageScan and deletes the
	// pending one.
	// +optional
	// +kubebuilder:validation:Pattern=`^sha256:[a-f0-9]{64}$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="digest is immutable"
	// +kubebuilder:validation:MaxLength=71
	Digest string `json:"digest,omitempty"`

	// tag of a pending ImageScan: the tag admission saw.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="tag is immutable"
	Tag string `json:"tag,omitempty"`
}

// ImageWorkload is one object that uses the image.
type ImageWorkload struct {
	// namespace of the object.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// kind of the object: Pod, or the kind of its controller (e.g. ReplicaSet).
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// name of the object.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// ScannerInfo names the scanner that produced the findings.
type ScannerInfo struct {
	// name of the scanner.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// version of the scanner.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Version string `json:"version"`
}

// SeverityCounts counts findings by severity.
type SeverityCounts struct {
	// critical findings.
	// +optional
	Critical int32 `json:"critical"`
	// high findings.
	// +optional
	High int32 `json:"high"`
	// medium findings.
	// +optional
	Medium int32 `json:"medium"`
	// low findings.
	// +optional
	Low int32 `json:"low"`
	// unknown: findings whose record carries no severity.
	// +optional
	Unknown int32 `json:"unknown"`
}

// ImageFinding is one vulnerability in one package of the image.
type ImageFinding struct {
	// id of the vulnerability, e.g. CVE-2024-1234 or GHSA-xxxx-xxxx-xxxx. Where the
	// database's record is not a CVE but has a CVE alias, the CVE is given here.
	// +required
	// +kubebuilder:validation:MaxLength=64
	ID string `json:"id"`
	// package that is vulnerable.
	// +required
	// +kubebuilder:validation:MaxLength=128
	Package string `json:"package"`
	// installed version of the package.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Installed string `json:"installed,omitempty"`
	// fixed is the first version without the vulnerability; empty when none is known.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Fixed string `json:"fixed,omitempty"`
	// severity of the vulnerability.
	// +required
	Severity Severity `json:"severity"`
}

// ImageScanError says why the last scan failed.
type ImageScanError struct {
	// reason is one of RegistryUnreachable, AuthFailed, NotFound,
	// UnsupportedMediaType, TooLarge, DatabaseMissing, ScanFailed.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Reason string `json:"reason"`
	// message says what failed, without any credential.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// time of the failure.
	// +optional
	Time *metav1.Time `json:"time,omitempty"`
}

// Condition types and reasons of an ImageScan.
const (
	// ImageScanConditionScanned is True when findings are current for the database
	// version recorded, False with the error's reason when the scan failed, Unknown
	// while pending.
	ImageScanConditionScanned = "Scanned"
	ImageScanReasonPending    = "Pending"
	ImageScanReasonSucceeded  = "Succeeded"
)

// ImageScanStatus is what the scanner found in the image.
type ImageScanStatus struct {
	// tags of the repository seen pointing at this digest, most recent first (at most 10).
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +kubebuilder:validation:items:MaxLength=128
	// +listType=atomic
	Tags []string `json:"tags,omitempty"`

	// usedBy names up to 10 objects running the image (sorted); usedByCount counts all.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	UsedBy []ImageWorkload `json:"usedBy,omitempty"`

	// usedByCount is the number of pods using the image when last observed.
	// +optional
	UsedByCount int32 `json:"usedByCount,omitempty"`

	// lastSeenInUse is the last time a pod was seen using the image; the ImageScan
	// is deleted after the manager's retention period without use.
	// +optional
	LastSeenInUse *metav1.Time `json:"lastSeenInUse,omitempty"`

	// scanner that produced the findings.
	// +optional
	Scanner *ScannerInfo `json:"scanner,omitempty"`

	// databaseVersion is the version of the vulnerability database the findings
	// were matched against.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	DatabaseVersion string `json:"databaseVersion,omitempty"`

	// scannedAt is when the last successful scan finished.
	// +optional
	ScannedAt *metav1.Time `json:"scannedAt,omitempty"`

	// packages is the number of packages found in the image.
	// +optional
	Packages int32 `json:"packages,omitempty"`

	// counts of all findings by severity.
	// +optional
	Counts SeverityCounts `json:"counts,omitempty,omitzero"`

	// findings lists the 20 worst findings (by severity, then ID); counts has them all.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Findings []ImageFinding `json:"findings,omitempty"`

	// error is why the last scan failed; such an image is never counted as clean.
	// +optional
	Error *ImageScanError `json:"error,omitempty"`

	// conditions: Scanned.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=4
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ImageScan is the scan result of one image digest of one repository, kept small
// and written only by Orderly. ImagePolicy admission reads it from the cache.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=isc,categories=orderly
// +kubebuilder:printcolumn:name="Repository",type=string,JSONPath=`.spec.repository`
// +kubebuilder:printcolumn:name="Tag",type=string,JSONPath=`.status.tags[0]`
// +kubebuilder:printcolumn:name="Critical",type=integer,JSONPath=`.status.counts.critical`
// +kubebuilder:printcolumn:name="High",type=integer,JSONPath=`.status.counts.high`
// +kubebuilder:printcolumn:name="Scanned",type=string,JSONPath=`.status.conditions[?(@.type=="Scanned")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Scanned")].reason`
// +kubebuilder:printcolumn:name="Used By",type=integer,JSONPath=`.status.usedByCount`
// +kubebuilder:printcolumn:name="Digest",type=string,JSONPath=`.spec.digest`,priority=1
// +kubebuilder:printcolumn:name="DB",type=string,JSONPath=`.status.databaseVersion`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ImageScan struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec names the image.
	// +required
	Spec ImageScanSpec `json:"spec"`

	// status is the scan's result.
	// +optional
	Status ImageScanStatus `json:"status,omitempty,omitzero"`
}

// ImageScanList is a list of ImageScans.
// +kubebuilder:object:root=true
type ImageScanList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the ImageScans.
	Items []ImageScan `json:"items"`
}
