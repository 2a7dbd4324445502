package v1alpha1

import (
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Labels and annotations that Orderly reads and writes on tenant namespaces.
const (
	// TenantLabel names the Tenant a namespace belongs to.
	TenantLabel = "tenancy.orderly.dev/tenant"
	// AdoptAnnotation, set by a person on an existing namespace, allows the named
	// Tenant to take the namespace over. Orderly removes it once the namespace is
	// adopted, so that it hands the namespace to one Tenant, once.
	AdoptAnnotation = "tenancy.orderly.dev/adopt"
	// OriginAnnotation records whether Orderly created the namespace ("created") or
	// adopted an existing one ("adopted"); only created namespaces are ever deleted.
	OriginAnnotation = "tenancy.orderly.dev/origin"
	// OwnerUIDAnnotation holds the UID of the Tenant that manages the namespace: the
	// claim. A Tenant manages a namespace only when the namespace records its UID (or
	// carries AdoptAnnotation with its name), so a later Tenant of the same name does
	// not inherit the namespaces of an earlier one.
	OwnerUIDAnnotation = "tenancy.orderly.dev/owner-uid"
	// PreventDeletionLabel is set to "true" on every namespace of a Tenant with
	// spec.preventDeletion; a generated admission policy refuses to delete a namespace
	// that carries it.
	PreventDeletionLabel = "tenancy.orderly.dev/prevent-deletion"
	// CostCenterLabel carries spec.costCenter on every tenant namespace.
	CostCenterLabel = "cost-center"
	// TenantAdminClusterRole is the ClusterRole bound to spec.owners in every namespace.
	// A Tenant may always bind it; further ClusterRoles only when the manager allows
	// them (--tenant-bindable-clusterroles).
	TenantAdminClusterRole = "orderly-tenant-admin"
	// ResourceLabel names the spec.resources entry an object in a tenant namespace was
	// applied from; with TenantLabel and Orderly's managed-by label it marks the object
	// as Orderly's, the only objects spec.resources ever changes or deletes.
	ResourceLabel = "tenancy.orderly.dev/resource"
	// ShareableLabel, set to "true" on an object by its owner, lets Tenants copy it
	// into their namespaces (spec.resources[].from).
	ShareableLabel = "tenancy.orderly.dev/shareable"
	// ResourcesAggregationLabel labels the ClusterRoles whose rules are aggregated
	// into the manager's rights for spec.resources: the platform's allow-list of the
	// kinds a Tenant may put in its namespaces.
	ResourcesAggregationLabel = "tenancy.orderly.dev/aggregate-to-tenant-resources"
)

// Values of OriginAnnotation.
const (
	OriginCreated = "created"
	OriginAdopted = "adopted"
	// OriginSelfService marks a namespace a tenant owner created through
	// spec.selfService. Orderly did not create it, so it is never deleted by Orderly,
	// whatever the deletionPolicy.
	OriginSelfService = "self-service"
)

// SelfServiceVerb is the verb, on the tenants resource and by name, that the
// ClusterRole Orderly generates for a Tenant with spec.selfService grants its owners:
// the generated admission policy checks it (with the API server's authorizer) to let
// an owner create namespaces for the tenants it owns, and no others.
const SelfServiceVerb = "selfservice"

// SelfServiceMarkerResource is a resource that does not exist: the generated
// self-service ClusterRole grants create on it, so that the admission policy can tell
// a requester who may create namespaces only through self-service (and must label
// them for a tenant it owns) from a cluster administrator.
const SelfServiceMarkerResource = "selfservicenamespaces"

// TenantSelfService lets the tenant's owners create namespaces themselves.
// +kubebuilder:validation:XValidation:rule="!(has(self.namePrefix) && has(self.namePattern))",message="set namePrefix or namePattern, not both"
// +kubebuilder:validation:XValidation:rule="has(self.namePrefix) || has(self.namePattern)",message="selfService needs namePrefix or namePattern: the names the tenant's owners may give their namespaces"
type TenantSelfService struct {
	// maxNamespaces is how many namespaces the owners may create themselves (the
	// namespaces listed in spec.namespaces do not count).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxNamespaces int32 `json:"maxNamespaces"`

	// namePrefix every self-service namespace name must start with, such as
	// "payments-". It must not start with kube-.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z0-9][-a-z0-9]*$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('kube-')",message="kube-* namespaces belong to Kubernetes: namePrefix must not start with kube-"
	NamePrefix string `json:"namePrefix,omitempty"`

	// namePattern is an RE2 regular expression the whole name of every self-service
	// namespace must match, such as "payments-(dev|test)-[a-z0-9]+". Names starting
	// with kube- are refused whatever it says.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="''.matches(self) || !''.matches(self)",message="namePattern must be a valid RE2 regular expression"
	NamePattern string `json:"namePattern,omitempty"`
}

// IsolationMode says which NetworkPolicy Orderly puts in each tenant namespace.
// +kubebuilder:validation:Enum=Tenant;None
type IsolationMode string

const (
	// IsolationTenant denies ingress except from the tenant's own namespaces and
	// from namespaces matched by allowFrom. Egress (and so DNS) is never restricted.
	IsolationTenant IsolationMode = "Tenant"
	// IsolationNone adds no NetworkPolicy.
	IsolationNone IsolationMode = "None"
)

// DeletionPolicy says what happens to a namespace when its Tenant is deleted or the
// namespace is removed from the Tenant.
// +kubebuilder:validation:Enum=Retain;Delete
type DeletionPolicy string

const (
	// DeletionPolicyRetain keeps the namespace and its workloads and removes only what
	// Orderly added (labels, RoleBindings, quota, limits, NetworkPolicy).
	DeletionPolicyRetain DeletionPolicy = "Retain"
	// DeletionPolicyDelete deletes namespaces that Orderly created. Adopted namespaces
	// are released as with Retain, because Orderly never deletes what it did not create.
	DeletionPolicyDelete DeletionPolicy = "Delete"
)

// TenantNamespace is one namespace of a tenant.
//
// The labels and annotations a Tenant may set are the team's own: keys under the
// reserved prefixes kubernetes.io/, k8s.io/ and orderly.dev/ (and their subdomains,
// such as tenancy.orderly.dev/ or pod-security.kubernetes.io/) are refused, because
// Kubernetes and Orderly act on them (Orderly's ownership markers, node selectors and
// tolerations of the PodNodeSelector and PodTolerationRestriction plugins) and because
// other tenants' allowFrom may select namespaces only by such keys, so that no Tenant
// can put its namespaces into another tenant's network. The one exception makes a
// namespace stricter: the Pod Security labels enforce, audit and warn set to
// restricted.
type TenantNamespace struct {
	// name of the namespace. kube-* namespaces belong to Kubernetes and are refused.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('kube-')",message="kube-* namespaces belong to Kubernetes: a Tenant cannot list them"
	Name string `json:"name"`

	// labels added to the namespace, besides the ones Orderly sets itself. Keys under
	// kubernetes.io/, k8s.io/ and orderly.dev/ (and their subdomains) are refused, except
	// pod-security.kubernetes.io/enforce, audit and warn set to restricted.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="!('tenancy.orderly.dev/tenant' in self) && !('cost-center' in self)",message="labels must not set tenancy.orderly.dev/tenant or cost-center: Orderly sets them from the Tenant's name and spec.costCenter"
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.startsWith('pod-security.kubernetes.io/') || !k.matches('^([^/]*[.])?(kubernetes[.]io|k8s[.]io|orderly[.]dev)/'))",message="labels must not use the reserved prefixes kubernetes.io/, k8s.io/ or orderly.dev/ (or a subdomain of them): Kubernetes and Orderly set those, and other tenants' allowFrom trusts them"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.startsWith('pod-security.kubernetes.io/') || (k in ['pod-security.kubernetes.io/enforce', 'pod-security.kubernetes.io/audit', 'pod-security.kubernetes.io/warn'] && self[k] == 'restricted'))",message="Pod Security labels may only make a namespace stricter: pod-security.kubernetes.io/enforce, audit or warn, set to restricted"
	Labels map[string]string `json:"labels,omitempty"`

	// annotations added to the namespace. Keys under kubernetes.io/, k8s.io/ and
	// orderly.dev/ (and their subdomains) are refused.
	// +optional
	// +kubebuilder:validation:MaxProperties=64
	// +kubebuilder:validation:XValidation:rule="self.all(k, !k.matches('^([^/]*[.])?(kubernetes[.]io|k8s[.]io|orderly[.]dev)/'))",message="annotations must not use the reserved prefixes kubernetes.io/, k8s.io/ or orderly.dev/ (or a subdomain of them): Orderly's markers (tenancy.orderly.dev/*) and the node selectors and tolerations Kubernetes reads from a namespace are not a Tenant's to set"
	Annotations map[string]string `json:"annotations,omitempty"`
}

// TenantQuota is the ResourceQuota put in every tenant namespace.
type TenantQuota struct {
	// hard is the set of limits for each named resource, as in ResourceQuota's spec.hard.
	// +required
	// +kubebuilder:validation:MinProperties=1
	Hard corev1.ResourceList `json:"hard"`
}

// TenantTotalQuota is a limit across all the tenant's namespaces.
type TenantTotalQuota struct {
	// hard is the limit for each named resource, summed over every namespace of the
	// tenant, with the names of ResourceQuota's spec.hard (pods, requests.cpu,
	// limits.memory, count/deployments.apps, ...). Orderly enforces it through the
	// ResourceQuota it keeps in each namespace: each namespace may use what it uses now
	// plus an equal share of what the tenant has left (see docs/tenant.md).
	// +required
	// +kubebuilder:validation:MinProperties=1
	// +kubebuilder:validation:MaxProperties=12
	// +kubebuilder:validation:XValidation:rule="self.all(k, isQuantity(string(self[k])))",message="every totalQuota.hard value must be a quantity, such as 4, 500m or 2Gi"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !string(self[k]).startsWith('-'))",message="totalQuota.hard values must not be negative"
	Hard corev1.ResourceList `json:"hard"`
}

// TenantLimitRange is the container LimitRange put in every tenant namespace.
// +kubebuilder:validation:XValidation:rule="has(self.default) || has(self.defaultRequest)",message="limitRange needs default or defaultRequest"
type TenantLimitRange struct {
	// default limits for containers that set none.
	// +optional
	Default corev1.ResourceList `json:"default,omitempty"`

	// defaultRequest is the requests for containers that set none.
	// +optional
	DefaultRequest corev1.ResourceList `json:"defaultRequest,omitempty"`
}

// TenantNetworkPolicy configures the NetworkPolicy in every tenant namespace.
type TenantNetworkPolicy struct {
	// isolation is Tenant (default: ingress only from the tenant's own namespaces and
	// allowFrom) or None (no NetworkPolicy).
	// +optional
	// +kubebuilder:default=Tenant
	Isolation IsolationMode `json:"isolation,omitempty"`

	// allowFrom selects further namespaces whose pods may reach the tenant's pods,
	// such as an ingress controller's or monitoring's namespace. Selectors may use only
	// the labels that no Tenant can set (a Tenant could otherwise label its own
	// namespaces into this tenant's network): kubernetes.io/metadata.name (the
	// namespace's name, which the API server sets) and tenancy.orderly.dev/tenant
	// (another tenant's namespaces). An empty selector allows every namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	AllowFrom []TenantNamespaceSelector `json:"allowFrom,omitempty"`
}

// Labels that allowFrom may select namespaces by: no Tenant can set them.
const (
	// NamespaceNameLabel is set by the API server on every namespace to its name.
	NamespaceNameLabel = "kubernetes.io/metadata.name"
)

// TenantNamespaceSelector selects namespaces as a label selector does (the same
// fields), by the labels no Tenant can set: kubernetes.io/metadata.name and
// tenancy.orderly.dev/tenant. The requirements are ANDed; an empty selector selects
// every namespace.
type TenantNamespaceSelector struct {
	// matchLabels selects namespaces carrying each of these labels. Keys are
	// kubernetes.io/metadata.name or tenancy.orderly.dev/tenant.
	// +optional
	// +kubebuilder:validation:MaxProperties=2
	// +kubebuilder:validation:XValidation:rule="self.all(k, k in ['kubernetes.io/metadata.name', 'tenancy.orderly.dev/tenant'])",message="allowFrom may select namespaces only by labels no Tenant can set: kubernetes.io/metadata.name (the namespace's name) or tenancy.orderly.dev/tenant (another tenant's namespaces)"
	MatchLabels map[string]string `json:"matchLabels,omitempty"`

	// matchExpressions are further requirements on the same two labels.
	// +optional
	// +kubebuilder:validation:MaxItems=4
	// +listType=atomic
	MatchExpressions []TenantNamespaceSelectorRequirement `json:"matchExpressions,omitempty"`
}

// TenantNamespaceSelectorRequirement is one requirement of a TenantNamespaceSelector,
// as in a label selector.
// +kubebuilder:validation:XValidation:rule="(self.operator == 'In' || self.operator == 'NotIn') == (has(self.values) && size(self.values) > 0)",message="values are required for In and NotIn, and not allowed for Exists and DoesNotExist"
type TenantNamespaceSelectorRequirement struct {
	// key is the label: kubernetes.io/metadata.name or tenancy.orderly.dev/tenant, the
	// labels no Tenant can set.
	// +required
	// +kubebuilder:validation:Enum=kubernetes.io/metadata.name;tenancy.orderly.dev/tenant
	Key string `json:"key"`

	// operator is In, NotIn, Exists or DoesNotExist.
	// +required
	// +kubebuilder:validation:Enum=In;NotIn;Exists;DoesNotExist
	Operator metav1.LabelSelectorOperator `json:"operator"`

	// values the label may (In) or may not (NotIn) have.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +kubebuilder:validation:items:MaxLength=63
	// +listType=atomic
	Values []string `json:"values,omitempty"`
}

// TenantRoleBinding is a further binding created in every tenant namespace.
type TenantRoleBinding struct {
	// roleRef is the ClusterRole to bind. Only the ClusterRoles the manager allows
	// (--tenant-bindable-clusterroles: by default orderly-tenant-admin, edit and view)
	// are bound; a binding to any other is refused and reported in the
	// RoleBindingsAllowed condition. Roles are refused: the tenant's owners bind the
	// Roles of their namespaces themselves.
	// +required
	// +kubebuilder:validation:XValidation:rule="self.apiGroup == 'rbac.authorization.k8s.io' && (self.kind == 'Role' || self.kind == 'ClusterRole')",message="roleRef must be a Role or ClusterRole of apiGroup rbac.authorization.k8s.io"
	// +kubebuilder:validation:XValidation:rule="self.kind == 'ClusterRole'",message="roleRef must be a ClusterRole: a Tenant binds only the ClusterRoles the platform team allows, and the tenant's owners bind their own Roles themselves"
	RoleRef rbacv1.RoleRef `json:"roleRef"`

	// subjects bound to the role.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.kind in ['User', 'Group', 'ServiceAccount'])",message="subject kind must be User, Group or ServiceAccount"
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.kind != 'ServiceAccount' || (has(s.namespace) && s.namespace != ''))",message="ServiceAccount subjects need a namespace"
	Subjects []rbacv1.Subject `json:"subjects"`
}

// TenantSpec is what a tenant needs to start.
type TenantSpec struct {
	// owners are bound in every tenant namespace to the ClusterRole orderly-tenant-admin
	// (aggregated from the built-in admin role).
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.kind in ['User', 'Group', 'ServiceAccount'])",message="subject kind must be User, Group or ServiceAccount"
	// +kubebuilder:validation:XValidation:rule="self.all(s, s.kind != 'ServiceAccount' || (has(s.namespace) && s.namespace != ''))",message="ServiceAccount subjects need a namespace"
	Owners []rbacv1.Subject `json:"owners,omitempty"`

	// namespaces of the tenant. Orderly creates the missing ones and labels each
	// tenancy.orderly.dev/tenant=<tenant>. A namespace that already exists is only
	// taken over when it carries the annotation tenancy.orderly.dev/adopt=<tenant>,
	// which Orderly removes once it has adopted the namespace. A namespace belongs to
	// the Tenant whose UID it records, not to whichever Tenant bears the name.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=name
	Namespaces []TenantNamespace `json:"namespaces"`

	// costCenter is set as the label cost-center on every tenant namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`
	CostCenter string `json:"costCenter,omitempty"`

	// quota, when set, puts one ResourceQuota in every tenant namespace.
	// +optional
	Quota *TenantQuota `json:"quota,omitempty"`

	// totalQuota, when set, limits what all the tenant's namespaces use together.
	// Orderly keeps the ResourceQuota of each namespace at what the namespace uses plus
	// an equal share of the tenant's remaining headroom, and moves the headroom as usage
	// changes; no webhook is in the pod path. Where quota.hard names the same resource,
	// a namespace's limit is the smaller of quota.hard and its share. Status reports
	// the tenant's total usage.
	// +optional
	TotalQuota *TenantTotalQuota `json:"totalQuota,omitempty"`

	// limitRange, when set, puts one container LimitRange in every tenant namespace.
	// +optional
	LimitRange *TenantLimitRange `json:"limitRange,omitempty"`

	// networkPolicy configures network isolation; by default ingress is allowed only
	// from the tenant's own namespaces.
	// +optional
	NetworkPolicy TenantNetworkPolicy `json:"networkPolicy,omitempty,omitzero"`

	// additionalRoleBindings are created in every tenant namespace, each to a
	// ClusterRole the manager allows Tenants to bind (see roleRef).
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	AdditionalRoleBindings []TenantRoleBinding `json:"additionalRoleBindings,omitempty"`

	// deletionPolicy says what happens to a namespace when the Tenant is deleted or
	// the namespace is removed from the list: Retain (default) keeps it and removes
	// only what Orderly added; Delete deletes namespaces that Orderly created.
	// +optional
	// +kubebuilder:default=Retain
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`

	// selfService, when set, lets the owners create namespaces themselves: a namespace
	// created with the label tenancy.orderly.dev/tenant=<tenant> is admitted only when
	// the requester is one of the owners, its name fits namePrefix or namePattern and
	// the tenant has fewer than maxNamespaces self-service namespaces (a generated
	// ValidatingAdmissionPolicy decides, with the Tenant as its parameter). Orderly then
	// gives it the tenant's RBAC, quota, limits and NetworkPolicy, as a listed
	// namespace. Owners get the permission to create namespaces, and to delete their
	// self-service namespaces, and nothing more. Self-service namespaces are never
	// deleted by Orderly: removing selfService or the Tenant releases them.
	// +optional
	SelfService *TenantSelfService `json:"selfService,omitempty"`

	// preventDeletion, when true, protects the Tenant and its namespaces: the API server
	// refuses to delete them (a generated ValidatingAdmissionPolicy, with a message
	// saying how to lift it) until it is set to false. Orderly labels each namespace
	// of the tenant tenancy.orderly.dev/prevent-deletion=true while it is set. With it,
	// deletionPolicy Delete does not delete a namespace removed from the list: it is
	// released instead.
	// +optional
	PreventDeletion bool `json:"preventDeletion,omitempty"`

	// allowed restricts the storage classes, ingress classes, priority classes,
	// runtime classes and image registries that workloads in the tenant's namespaces
	// may use; a generated ValidatingAdmissionPolicy (with the Tenant as its parameter)
	// refuses the rest with a message naming what is allowed. A list left out allows
	// anything.
	// +optional
	Allowed *TenantAllowed `json:"allowed,omitempty"`

	// resources are objects Orderly applies (server-side apply) into every namespace
	// of the tenant, listed or self-service, and keeps there: default ConfigMaps, an
	// ExternalSecret, a default Role... Only kinds the platform has granted the manager
	// (ClusterRoles labelled tenancy.orderly.dev/aggregate-to-tenant-resources) can be
	// applied; others are reported in status. An object of the same name that Orderly
	// did not apply is left alone and reported. An entry removed from the list, a
	// namespace that leaves the tenant, and a deleted Tenant take their objects with them.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Resources []TenantResource `json:"resources,omitempty"`
}

// TenantResource is one object kept in the tenant's namespaces: written out in
// object, or copied from an existing object with from.
// +kubebuilder:validation:XValidation:rule="has(self.object) != has(self.from)",message="set exactly one of object and from"
// +kubebuilder:validation:XValidation:rule="!has(self.object) || (has(self.object.apiVersion) && size(self.object.apiVersion) > 0 && has(self.object.kind) && size(self.object.kind) > 0)",message="object needs apiVersion and kind"
// +kubebuilder:validation:XValidation:rule="!has(self.object) || (has(self.object.metadata) && has(self.object.metadata.name) && size(self.object.metadata.name) > 0)",message="object needs metadata.name (generateName is not supported: the object is kept under one name)"
// +kubebuilder:validation:XValidation:rule="!has(self.object) || !has(self.object.metadata.generateName)",message="object.metadata.generateName is not supported: give metadata.name"
// +kubebuilder:validation:XValidation:rule="!has(self.object) || !(self.object.kind in ['Namespace', 'Tenant', 'ResourceQuota', 'LimitRange'])",message="a Tenant's namespaces, quota and limits are declared in its own fields, not in resources"
// +kubebuilder:validation:XValidation:rule="!has(self.from) || !(self.from.kind in ['Namespace', 'Tenant', 'ResourceQuota', 'LimitRange'])",message="a Tenant's namespaces, quota and limits are declared in its own fields, not in resources"
type TenantResource struct {
	// name identifies the entry: in status, and in the tenancy.orderly.dev/resource
	// label of the objects applied from it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// namespaceSelector limits the entry to the tenant's namespaces whose labels match
	// (e.g. environment: prod); every namespace of the tenant when unset. An object in
	// a namespace that stops matching is removed.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// object is the manifest, as in a file for kubectl apply: apiVersion, kind,
	// metadata.name (metadata.namespace is left out: it is each tenant namespace) and
	// the rest. In every string value, {{ .Namespace }} and {{ .Tenant }} are replaced
	// by the namespace's and the Tenant's names (Go template syntax; no other data or
	// functions).
	// +optional
	// +kubebuilder:validation:EmbeddedResource
	// +kubebuilder:pruning:PreserveUnknownFields
	Object *runtime.RawExtension `json:"object,omitempty"`

	// from copies an existing object (from.name), or every object a label selector
	// matches in a namespace (from.selector), into the tenant's namespaces, each under
	// its own name, and keeps the copies as the sources change. A source must carry
	// the label tenancy.orderly.dev/shareable: "true": its owner opts in, so that no
	// Tenant copies what was not meant to be shared. Its content (all but metadata
	// and status) and its labels and annotations are copied, without templates.
	// +optional
	From *TenantResourceSource `json:"from,omitempty"`
}

// MaxSelectedSources is how many sources one spec.resources entry copies with
// from.selector; status.resources[].objectNames holds them.
const MaxSelectedSources = 64

// TenantResourceSource names the object, or selects the objects, a spec.resources
// entry copies.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.selector)",message="from needs exactly one of name and selector"
type TenantResourceSource struct {
	// apiVersion of the source, e.g. v1.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// kind of the source, e.g. Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// namespace of the source.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// name of the source, and of its copies.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// selector copies every object of the kind in namespace whose labels match (and
	// that carries the shareable label), at most 64 of them, by name order: a source
	// added to the selection is copied, and one that leaves it (relabelled, no longer
	// shareable or deleted) has its copies removed. The manager needs list on the kind
	// (docs/tenant.md).
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// TenantAllowed lists what the tenant's workloads may use. Each list, when set,
// replaces "anything" with its entries.
type TenantAllowed struct {
	// storageClasses PersistentVolumeClaims may name (spec.storageClassName, after the
	// cluster's default class is filled in). A claim with no class is refused.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	StorageClasses []string `json:"storageClasses,omitempty"`

	// ingressClasses Ingresses may name (spec.ingressClassName). An Ingress with no
	// class is refused.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	IngressClasses []string `json:"ingressClasses,omitempty"`

	// priorityClasses pods (and pod templates) may name in spec.priorityClassName. A
	// pod that names none is admitted.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	PriorityClasses []string `json:"priorityClasses,omitempty"`

	// runtimeClasses pods (and pod templates) may name in spec.runtimeClassName. A pod
	// that names none is admitted.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=set
	RuntimeClasses []string `json:"runtimeClasses,omitempty"`

	// registries are the prefixes every container image of a pod (and pod template)
	// must start with, such as "ghcr.io/acme/" or "registry.example.com/"; "*" stands
	// for any characters but "/", as in "*.example.com/". Images without a registry
	// are Docker Hub's: "nginx" is "docker.io/library/nginx".
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	// +kubebuilder:validation:items:Pattern=`^[a-zA-Z0-9.:/*_-]+$`
	// +listType=set
	Registries []string `json:"registries,omitempty"`
}

// NamespaceState is the state of one tenant namespace.
// +kubebuilder:validation:Enum=Ready;Pending;Conflict;Failed
type NamespaceState string

// Values of NamespaceState.
const (
	NamespaceReady    NamespaceState = "Ready"
	NamespacePending  NamespaceState = "Pending"
	NamespaceConflict NamespaceState = "Conflict"
	NamespaceFailed   NamespaceState = "Failed"
)

// TenantNamespaceStatus is the observed state of one tenant namespace.
type TenantNamespaceStatus struct {
	// name of the namespace.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// state is Ready, Pending (being created or terminating), Conflict (the namespace
	// belongs to someone else) or Failed (a write failed; see message).
	// +required
	State NamespaceState `json:"state"`

	// selfService is true for a namespace an owner created through spec.selfService.
	// +optional
	SelfService bool `json:"selfService,omitempty"`

	// message explains a state other than Ready.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`

	// quota is the usage of the ResourceQuota Orderly keeps in the namespace, for the
	// resources of spec.quota and spec.totalQuota; absent when there is none.
	// +optional
	Quota *TenantQuotaUsage `json:"quota,omitempty"`
}

// TenantQuotaUsage is what a quota allows and what is used of it.
type TenantQuotaUsage struct {
	// hard is the limit of each resource: for a namespace, the ResourceQuota's
	// spec.hard that Orderly set; for the tenant, spec.totalQuota.hard.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Hard corev1.ResourceList `json:"hard,omitempty"`

	// used is what is in use of each resource: for a namespace, the ResourceQuota's
	// status.used (as the API server counts it); for the tenant, the sum over its
	// namespaces.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	Used corev1.ResourceList `json:"used,omitempty"`
}

// Condition types of a Tenant.
const (
	// ConditionReady is True when every namespace and every object in it is as declared.
	ConditionReady = "Ready"
	// ConditionNamespaceConflict is True when a listed namespace belongs to someone else.
	ConditionNamespaceConflict = "NamespaceConflict"
	// ConditionResourcesReady is True when RoleBindings, quota, limits and
	// NetworkPolicy are in place in every namespace Orderly manages.
	ConditionResourcesReady = "ResourcesReady"
	// ConditionRoleBindingsAllowed is False when additionalRoleBindings asks for a role
	// that Tenants may not bind; those bindings are not created.
	ConditionRoleBindingsAllowed = "RoleBindingsAllowed"
	// ConditionSelfServiceReady is True when the admission policy, its binding and the
	// owners' ClusterRole of spec.selfService are in place (and when selfService is not
	// set and nothing of it is left).
	ConditionSelfServiceReady = "SelfServiceReady"
	// ConditionDeletionProtected is True when spec.preventDeletion is set and the
	// admission policy that enforces it is in place (absent without preventDeletion).
	ConditionDeletionProtected = "DeletionProtected"
	// ConditionAllowedEnforced is True when spec.allowed is set and its admission
	// policy is in place (absent without spec.allowed); its message says what is allowed.
	ConditionAllowedEnforced = "AllowedEnforced"
	// ConditionTotalQuotaAvailable is True while the tenant uses less than
	// spec.totalQuota.hard of every resource, and False (reason TotalQuotaReached) when
	// it has reached the limit of one: no namespace of the tenant can then use more of
	// it until usage drops. Absent without spec.totalQuota.
	ConditionTotalQuotaAvailable = "TotalQuotaAvailable"
	// ConditionExtraResourcesApplied is True when every spec.resources object is in
	// every tenant namespace as declared; absent without spec.resources.
	ConditionExtraResourcesApplied = "ExtraResourcesApplied"
)

// TenantStatus is the observed state of a Tenant.
type TenantStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// namespaceCount is the number of namespaces of the tenant: those in the spec and
	// the self-service ones.
	// +optional
	NamespaceCount int32 `json:"namespaceCount,omitempty"`

	// selfServiceNamespaces is the number of namespaces the owners created through
	// spec.selfService that Orderly has seen. The generated admission policy compares
	// it with spec.selfService.maxNamespaces: a namespace created before Orderly counted
	// the previous one can exceed the limit (see docs/tenant.md).
	// +optional
	SelfServiceNamespaces int32 `json:"selfServiceNamespaces,omitempty"`

	// readyNamespaces is the number of namespaces whose state is Ready.
	// +optional
	ReadyNamespaces int32 `json:"readyNamespaces,omitempty"`

	// namespaces is the state of each namespace in the spec, then of each self-service
	// namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=200
	// +listType=map
	// +listMapKey=name
	Namespaces []TenantNamespaceStatus `json:"namespaces,omitempty"`

	// totalQuota is spec.totalQuota.hard and the sum of what the tenant's namespaces use
	// of it; absent without spec.totalQuota.
	// +optional
	TotalQuota *TenantQuotaUsage `json:"totalQuota,omitempty"`

	// resources is what became of each spec.resources entry; Orderly also reads it
	// to remove the objects of an entry taken out of spec.resources.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	Resources []TenantResourceStatus `json:"resources,omitempty"`

	// conditions: Ready, NamespaceConflict, ResourcesReady, RoleBindingsAllowed,
	// SelfServiceReady, DeletionProtected, AllowedEnforced, TotalQuotaAvailable and
	// ExtraResourcesApplied.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=12
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// TenantResourceStatus is what became of one spec.resources entry.
type TenantResourceStatus struct {
	// name of the entry.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// apiVersion of the object the entry applies.
	// +required
	// +kubebuilder:validation:MaxLength=253
	APIVersion string `json:"apiVersion"`
	// kind of the object the entry applies.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Kind string `json:"kind"`
	// objectName is the name of the object the entry applies; empty for an entry
	// with from.selector, whose objects are in objectNames.
	// +required
	// +kubebuilder:validation:MaxLength=253
	ObjectName string `json:"objectName"`
	// objectNames are the sources an entry with from.selector copies, by name.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	// +listType=atomic
	ObjectNames []string `json:"objectNames,omitempty"`
	// namespaces is how many of the tenant's namespaces the entry is for (those its
	// namespaceSelector matches).
	// +required
	Namespaces int32 `json:"namespaces"`
	// applied is how many of them hold the object (every selected object) as declared.
	// +required
	Applied int32 `json:"applied"`
	// message says why the object is not in every namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Tenant onboards a team: namespaces, owners' RBAC, quota, limits and network
// isolation, created and kept correct by Orderly.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=tn,categories=orderly
// +kubebuilder:printcolumn:name="Namespaces",type=integer,JSONPath=`.status.namespaceCount`
// +kubebuilder:printcolumn:name="Ready Namespaces",type=integer,JSONPath=`.status.readyNamespaces`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="a Tenant's name is used as a label value and must be at most 63 characters"
type Tenant struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what the tenant needs.
	// +required
	Spec TenantSpec `json:"spec"`

	// status is what Orderly observed.
	// +optional
	Status TenantStatus `json:"status,omitempty,omitzero"`
}

// TenantList is a list of Tenants.
// +kubebuilder:object:root=true
type TenantList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Tenants.
	Items []Tenant `json:"items"`
}
