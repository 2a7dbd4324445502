package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PolicyLabel is set on every admission object Orderly generates for a LabelPolicy;
// its value is the LabelPolicy's name.
const PolicyLabel = "policy.orderly.dev/labelpolicy"

// Action says what happens to a workload whose label is missing or not allowed.
// +kubebuilder:validation:Enum=Deny;Default;Audit
type Action string

const (
	// ActionDeny rejects a workload whose label is missing or not allowed.
	ActionDeny Action = "Deny"
	// ActionDefault fills a missing label in from the namespace's label of the same
	// name, else from spec.defaultValue, and rejects the workload when neither exists
	// or the value is not allowed.
	ActionDefault Action = "Default"
	// ActionAudit admits every workload; violations are reported as warnings, in the
	// API server's audit log and in the LabelPolicy's status.
	ActionAudit Action = "Audit"
)

// Remediation says what the background audit does to existing workloads that violate
// the policy.
// +kubebuilder:validation:Enum=None;LabelOnly
type Remediation string

const (
	// RemediateNone only reports violations.
	RemediateNone Remediation = "None"
	// RemediateLabelOnly adds the missing label (from the namespace label or
	// spec.defaultValue) to the metadata of existing violating workloads, never to
	// their pod templates, so that no rollout is triggered. Labels that are present
	// with a value that is not allowed are reported, never overwritten.
	RemediateLabelOnly Remediation = "LabelOnly"
)

// Kind is a workload kind a LabelPolicy can match.
// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet;Job;CronJob;Pod
type Kind string

// The kinds a LabelPolicy can match.
const (
	KindDeployment  Kind = "Deployment"
	KindStatefulSet Kind = "StatefulSet"
	KindDaemonSet   Kind = "DaemonSet"
	KindJob         Kind = "Job"
	KindCronJob     Kind = "CronJob"
	KindPod         Kind = "Pod"
)

// Admission modes reported in status.admissionMode.
const (
	// AdmissionModeNative: the policy is enforced by a ValidatingAdmissionPolicy and,
	// for Default and propagateToPodTemplate, a MutatingAdmissionPolicy.
	AdmissionModeNative = "Native"
	// AdmissionModeWebhook: labels are validated by a ValidatingAdmissionPolicy and
	// filled in by Orderly's own mutating webhook, because the API server does not
	// serve MutatingAdmissionPolicy (or the manager was told to use the webhook).
	AdmissionModeWebhook = "Webhook"
	// AdmissionModeValidationOnly: nothing can fill labels in (no
	// MutatingAdmissionPolicy and no webhook), so labels are validated only.
	AdmissionModeValidationOnly = "NativeValidationOnly"
)

// LabelPolicyMatch selects the workloads a policy applies to.
type LabelPolicyMatch struct {
	// kinds of workload the policy applies to. A Pod whose controller (the
	// ownerReference with controller: true) is a ReplicaSet, StatefulSet or DaemonSet
	// (apps/v1), a Job (batch/v1), a ReplicationController (v1) or a kind listed in
	// podOwners is judged through that controller and not on its own, so the policy
	// never stops a controller from creating its pods; every other Pod, whatever
	// ownerReferences it has, is judged as a bare Pod.
	// +optional
	// +kubebuilder:default={Deployment,StatefulSet,DaemonSet,Job,CronJob,Pod}
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=6
	// +listType=set
	Kinds []Kind `json:"kinds,omitempty"`

	// namespaceSelector restricts the policy to namespaces with matching labels; by
	// default every namespace not excluded.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// excludedNamespaces are never subject to the policy. Every kube-* namespace and
	// the namespace Orderly's manager runs in are always excluded, whether listed or
	// not (see status.protectedNamespaces).
	// +optional
	// +kubebuilder:default={kube-system,kube-public,kube-node-lease}
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	ExcludedNamespaces []string `json:"excludedNamespaces,omitempty"`

	// podOwners are further kinds whose Pods are judged through them, for operators
	// that create Pods themselves rather than through a workload (CloudNativePG's
	// postgresql.cnpg.io/v1 Cluster, Strimzi's core.strimzi.io/v1beta2 StrimziPodSet).
	// A Pod is exempt when its controller ownerReference has exactly one of these
	// apiVersions and kinds. An operator that is not listed must put the label on the
	// Pods it creates, or they are refused like bare Pods. Listing a kind lets anyone
	// who may create such objects run Pods without the label: list only kinds whose
	// objects the policy's label is enforced on another way.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	PodOwners []PodOwner `json:"podOwners,omitempty"`
}

// PodOwner is a kind of object that creates Pods directly, as a Pod's controller
// ownerReference names it.
type PodOwner struct {
	// apiVersion of the owner as its ownerReferences carry it, group/version, e.g.
	// postgresql.cnpg.io/v1. Exact: the garbage collector removes a Pod whose owner
	// does not exist only when it serves that version, so no other version is trusted.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/v[0-9]+((alpha|beta)[0-9]+)?$`
	APIVersion string `json:"apiVersion"`

	// kind of the owner, e.g. Cluster.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[A-Z][A-Za-z0-9]*$`
	Kind string `json:"kind"`
}

// AllowedValuesSource names where a LabelPolicy's allowed values are kept.
type AllowedValuesSource struct {
	// labelValueSet is the name of a LabelValueSet (cluster-scoped).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	LabelValueSet string `json:"labelValueSet"`
}

// LabelPolicySpec is the label a cluster's workloads must carry.
// +kubebuilder:validation:XValidation:rule="!has(self.defaultValue) || has(self.allowedValuesFrom) || ((!has(self.allowedValues) || size(self.allowedValues) == 0) && !has(self.allowedPattern)) || (has(self.allowedValues) && self.defaultValue in self.allowedValues) || (has(self.allowedPattern) && self.defaultValue.matches('^(?:' + self.allowedPattern + ')$'))",message="defaultValue must be one of allowedValues or match allowedPattern"
// +kubebuilder:validation:XValidation:rule="!has(self.defaultFromTenant) || !self.defaultFromTenant || (self.label == 'cost-center' && ((has(self.action) && self.action == 'Default') || (has(self.remediate) && self.remediate == 'LabelOnly')))",message="defaultFromTenant needs label cost-center (the label Tenants set from spec.costCenter) and action Default or remediate LabelOnly: otherwise nothing is filled in from the Tenant"
type LabelPolicySpec struct {
	// label is the key every matched workload must carry, e.g. cost-center.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	// +kubebuilder:validation:XValidation:rule="self.matches('^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$')",message="label must be a valid label key: an optional DNS subdomain prefix and '/', then a name of at most 63 characters (alphanumerics, '-', '_', '.')"
	Label string `json:"label"`

	// allowedValues the label may take. When allowedPattern is set as well, a value is
	// allowed when it is listed or matches the pattern. When neither is set, any
	// non-empty value is allowed.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	AllowedValues []string `json:"allowedValues,omitempty"`

	// allowedValuesFrom takes allowed values from a LabelValueSet as well: a value is
	// allowed when it is listed there, active and not expired (or allowed by
	// allowedValues or allowedPattern). A value listed there but retired (active:
	// false, or past its expires) is refused for new workloads and reported as Retired
	// for running ones. Editing the LabelValueSet needs no edit of the policy. While
	// the LabelValueSet does not exist, every matched workload is refused.
	// +optional
	AllowedValuesFrom *AllowedValuesSource `json:"allowedValuesFrom,omitempty"`

	// allowedPattern is an RE2 regular expression the whole value must match
	// (it is anchored: "cc-[0-9]+" allows "cc-42" but not "x-cc-42").
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="''.matches(self) || !''.matches(self)",message="allowedPattern must be a valid RE2 regular expression"
	AllowedPattern string `json:"allowedPattern,omitempty"`

	// match selects the workloads the policy applies to.
	// +optional
	Match LabelPolicyMatch `json:"match,omitempty,omitzero"`

	// action is Deny (reject a missing or not allowed label), Default (fill a missing
	// label in from the namespace's label of the same name, else from defaultValue;
	// reject when neither exists) or Audit (admit, warn and report).
	// +optional
	// +kubebuilder:default=Deny
	Action Action `json:"action,omitempty"`

	// defaultValue is used by action Default when the namespace has no label of the
	// same name, and by remediation LabelOnly.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	DefaultValue string `json:"defaultValue,omitempty"`

	// propagateToPodTemplate also sets a missing label on the pod templates of
	// workloads that are created, or updated in a way that changes the pod template
	// anyway, so cost tools that read pods see it. It never causes a rollout by itself.
	// +optional
	PropagateToPodTemplate bool `json:"propagateToPodTemplate,omitempty"`

	// defaultFromTenant makes the spec.costCenter of the namespace's Tenant the value
	// filled in for a missing label, before the namespace's own label and
	// defaultValue: by action Default at admission and by remediate LabelOnly. The
	// Tenant is the source of truth, so the value holds even when someone removed or
	// changed the namespace's cost-center label by hand; such namespaces are reported
	// in status.tenantDrift. A namespace belongs to a Tenant when it carries the label
	// tenancy.orderly.dev/tenant=<name> and records that Tenant's UID in the annotation
	// tenancy.orderly.dev/owner-uid (as the Tenant controller writes them). Needs label
	// cost-center, the label Tenants set, and action Default or remediate LabelOnly.
	// +optional
	DefaultFromTenant bool `json:"defaultFromTenant,omitempty"`

	// remediate is None (default: report only) or LabelOnly (add the missing label
	// to existing workloads' metadata, never to pod templates, so no rollout starts).
	// +optional
	// +kubebuilder:default=None
	Remediate Remediation `json:"remediate,omitempty"`

	// exceptions admit workloads that would violate the policy, each until its
	// expires time: while an exception is active its workloads are neither refused at
	// admission nor reported or labelled by the audit; when it expires the generated
	// admission policy stops admitting them, without any edit of the LabelPolicy.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Exceptions []LabelPolicyException `json:"exceptions,omitempty"`
}

// LabelPolicyException lets some workloads go without an allowed label for a while.
// It names namespaces, a workload selector or both (a workload is excepted when it is
// in one of the namespaces and matches the selector).
// +kubebuilder:validation:XValidation:rule="(has(self.namespaces) && size(self.namespaces) > 0) || has(self.selector)",message="an exception names namespaces, a selector, or both"
type LabelPolicyException struct {
	// name identifies the exception in status and Events.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// namespaces the exception covers; every namespace the policy applies to when
	// empty (then selector is required).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=set
	Namespaces []string `json:"namespaces,omitempty"`

	// selector matches the labels of the excepted workloads (matchLabels and
	// matchExpressions with In, NotIn, Exists, DoesNotExist); every workload of the
	// namespaces when unset.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`

	// reason says why the exception exists, for whoever reads the policy or its audit.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	Reason string `json:"reason"`

	// expires is when the exception ends. Required: an exception that never ends is an
	// exclusion (spec.match). The policy is enforced again within seconds of it.
	// +required
	Expires metav1.Time `json:"expires"`
}

// Exception states reported in status.exceptions.
const (
	// ExceptionActive: the exception admits its workloads.
	ExceptionActive = "Active"
	// ExceptionExpired: the exception's time is over; its workloads are enforced.
	ExceptionExpired = "Expired"
)

// ExceptionStatus is the observed state of one exception.
type ExceptionStatus struct {
	// name of the exception in spec.exceptions.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// state is Active or Expired.
	// +required
	// +kubebuilder:validation:Enum=Active;Expired
	State string `json:"state"`
	// expires is the exception's end, as in the spec.
	// +required
	Expires metav1.Time `json:"expires"`
	// workloads is the number of workloads that violate the policy and were excepted
	// by this exception at the last audit (0 once it expired).
	// +optional
	Workloads int32 `json:"workloads"`
}

// Violation is one workload that does not carry an allowed label.
type Violation struct {
	// kind of the workload, e.g. Deployment.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// namespace of the workload.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the workload.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// reason is Missing, NotAllowed or Retired.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Reason string `json:"reason"`
	// value is the label's value when it is not allowed.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
}

// ComplianceSummary is what an audit found in one namespace or tenant, or in a group of
// them.
type ComplianceSummary struct {
	// name of the namespace or tenant; "(other)" for the sum of those not listed,
	// "(none)" for the namespaces of no tenant.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// workloads matched there.
	// +optional
	Workloads int32 `json:"workloads"`
	// violations among them: workloads without an allowed label.
	// +optional
	Violations int32 `json:"violations"`
	// namespaces summed in this entry (for a tenant or "(other)").
	// +optional
	Namespaces int32 `json:"namespaces,omitempty"`
}

// GitOpsTool is a GitOps tool that manages a workload.
// +kubebuilder:validation:Enum=ArgoCD;Flux
type GitOpsTool string

// RemediatedWorkload is one workload whose metadata remediation labelled.
type RemediatedWorkload struct {
	// kind of the workload, e.g. Deployment.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// namespace of the workload.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the workload.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// value is the value written to the label.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value"`
	// gitOps is the GitOps tool that manages the workload (ArgoCD or Flux, by its
	// tracking label or annotation), when one does: the label is then in the cluster
	// and not in Git.
	// +optional
	GitOps GitOpsTool `json:"gitOps,omitempty"`
	// time is when the audit that labelled it ran.
	// +required
	Time metav1.Time `json:"time"`
}

// TenantDrift is a namespace whose cost-center label is missing or differs from its
// Tenant's spec.costCenter.
type TenantDrift struct {
	// namespace that drifted.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// tenant the namespace belongs to.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Tenant string `json:"tenant"`
	// costCenter is the Tenant's spec.costCenter: the value workloads there get.
	// +required
	// +kubebuilder:validation:MaxLength=63
	CostCenter string `json:"costCenter"`
	// value is the namespace's own cost-center label; empty when it is missing.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Value string `json:"value,omitempty"`
}

// Violation reasons.
const (
	ViolationMissing    = "Missing"
	ViolationNotAllowed = "NotAllowed"
	// ViolationRetired: the value is in the policy's LabelValueSet but retired.
	ViolationRetired = "Retired"
)

// Condition types of a LabelPolicy.
const (
	// ConditionReady is True when the admission objects are in place and the last
	// audit ran.
	ConditionReady = "Ready"
	// ConditionAdmissionReady is True when the generated admission policies and
	// bindings are as the spec says.
	ConditionAdmissionReady = "AdmissionReady"
	// ConditionDefaultingAvailable is True when missing labels can be filled in at
	// admission (by a MutatingAdmissionPolicy or Orderly's webhook), False with a
	// reason otherwise.
	ConditionDefaultingAvailable = "DefaultingAvailable"
	// ConditionCompliant is True when the last audit found no violating workload.
	ConditionCompliant = "Compliant"
)

// LabelPolicyStatus is the observed state of a LabelPolicy.
type LabelPolicyStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// admissionMode is Native (ValidatingAdmissionPolicy, plus MutatingAdmissionPolicy
	// where something is filled in), Webhook (ValidatingAdmissionPolicy, plus Orderly's
	// mutating webhook because the API server does not serve MutatingAdmissionPolicy)
	// or NativeValidationOnly (nothing can fill labels in: they are validated only).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	AdmissionMode string `json:"admissionMode,omitempty"`

	// violations is the number of matched workloads that lacked an allowed label at
	// the last audit (after remediation, if any).
	// +optional
	Violations int32 `json:"violations"`

	// remediated is the number of workloads labelled by the last audit.
	// +optional
	Remediated int32 `json:"remediated,omitempty"`

	// remediatedGitOpsManaged is how many of them a GitOps tool (Argo CD, Flux)
	// manages: their label is not in Git (recentlyRemediated names them).
	// +optional
	RemediatedGitOpsManaged int32 `json:"remediatedGitOpsManaged,omitempty"`

	// recentlyRemediated names the workloads remediation labelled most recently, newest
	// first, up to 20 across audits (each audit adds at most 20), so that an auditor
	// can see which objects Orderly changed and when.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	RecentlyRemediated []RemediatedWorkload `json:"recentlyRemediated,omitempty"`

	// protectedNamespaces are the namespaces the policy never applies to, whatever
	// spec.match says: every kube-* namespace (the cluster's own components) and the
	// namespace Orderly's manager runs in, so that no policy can block the cluster or
	// Orderly itself. Neither the admission objects, nor the webhook, nor the audit
	// act there.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	ProtectedNamespaces []string `json:"protectedNamespaces,omitempty"`

	// topViolations lists up to 20 violating workloads, sorted by namespace, kind and name.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	TopViolations []Violation `json:"topViolations,omitempty"`

	// workloads is the number of matched workloads at the last audit, compliant or
	// not, so that coverage is 1 - violations/workloads.
	// +optional
	Workloads int32 `json:"workloads,omitempty"`

	// namespaces summarizes the last audit per namespace: the 20 namespaces with the
	// most violations (then the most workloads, then by name). The rest are in
	// otherNamespaces, so the status stays small however many namespaces there are.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Namespaces []ComplianceSummary `json:"namespaces,omitempty"`

	// otherNamespaces sums the namespaces not listed in namespaces (name "(other)").
	// +optional
	OtherNamespaces *ComplianceSummary `json:"otherNamespaces,omitempty"`

	// tenants summarizes the last audit per Tenant, read from each namespace's
	// tenancy.orderly.dev/tenant label ("(none)" for namespaces without it): the 20
	// tenants with the most violations; the rest are in otherTenants.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Tenants []ComplianceSummary `json:"tenants,omitempty"`

	// otherTenants sums the tenants not listed in tenants (name "(other)").
	// +optional
	OtherTenants *ComplianceSummary `json:"otherTenants,omitempty"`

	// exceptions is the state of each of spec.exceptions.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=name
	Exceptions []ExceptionStatus `json:"exceptions,omitempty"`

	// excepted is the number of workloads that violate the policy but were admitted by
	// an active exception at the last audit; they are not counted in violations.
	// +optional
	Excepted int32 `json:"excepted,omitempty"`

	// tenantDrift lists, with spec.defaultFromTenant, up to 20 namespaces (by name)
	// whose cost-center label is missing or differs from their Tenant's
	// spec.costCenter at the last audit. Workloads there still get the Tenant's value.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	TenantDrift []TenantDrift `json:"tenantDrift,omitempty"`

	// tenantDriftNamespaces is how many namespaces drifted at the last audit, listed in
	// tenantDrift or not.
	// +optional
	TenantDriftNamespaces int32 `json:"tenantDriftNamespaces,omitempty"`

	// tenantDefaults is how many Tenants with spec.costCenter the generated mutating
	// admission policy carries (spec.defaultFromTenant), at most 1000.
	// +optional
	TenantDefaults int32 `json:"tenantDefaults,omitempty"`

	// lastAuditTime is when the last audit finished.
	// +optional
	LastAuditTime *metav1.Time `json:"lastAuditTime,omitempty"`

	// conditions: Ready, AdmissionReady, DefaultingAvailable and Compliant.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// LabelPolicy requires a label (such as cost-center) on workloads: it rejects or
// fills in missing labels at admission, through the API server's own admission
// policies, and audits the workloads already running.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lp,categories=orderly
// +kubebuilder:printcolumn:name="Label",type=string,JSONPath=`.spec.label`
// +kubebuilder:printcolumn:name="Action",type=string,JSONPath=`.spec.action`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.status.admissionMode`
// +kubebuilder:printcolumn:name="Violations",type=integer,JSONPath=`.status.violations`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Last Audit",type=date,JSONPath=`.status.lastAuditTime`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 40",message="a LabelPolicy's name is used in the names of generated admission objects and must be at most 40 characters"
type LabelPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the label required and what to do without it.
	// +required
	Spec LabelPolicySpec `json:"spec"`

	// status is what Orderly observed.
	// +optional
	Status LabelPolicyStatus `json:"status,omitempty,omitzero"`
}

// LabelPolicyList is a list of LabelPolicies.
// +kubebuilder:object:root=true
type LabelPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the LabelPolicies.
	Items []LabelPolicy `json:"items"`
}
