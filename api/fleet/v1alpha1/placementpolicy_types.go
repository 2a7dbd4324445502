package v1alpha1

import (
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations of multi-cluster placement.
const (
	// KubeconfigSecretAnnotation, on a ClusterProfile, names the Secret in the
	// manager's namespace that holds Orderly's kubeconfig for that cluster (key
	// "kubeconfig"). The ClusterProfile API has no slot for credentials (its
	// accessProviders name an endpoint and an exec plugin), so Orderly reads them
	// from a Secret the platform team controls.
	KubeconfigSecretAnnotation = "fleet.orderly.dev/kubeconfig-secret"
	// ClusterProfileAnnotation, on that Secret, names the ClusterProfile
	// ("namespace/name") the Secret may serve: a ClusterProfile cannot borrow the
	// credentials of another cluster by naming its Secret.
	ClusterProfileAnnotation = "fleet.orderly.dev/cluster-profile"
	// AllowedNamespacesAnnotation, on that Secret, lists the namespaces (comma
	// separated, or "*" for all but kube-* and the manager's) whose PlacementPolicies
	// may place on the cluster; none when absent. It is the platform team's
	// allow-list: a team cannot reach a member unless the platform team admitted its
	// namespace.
	AllowedNamespacesAnnotation = "fleet.orderly.dev/allowed-namespaces"
	// KubeconfigKey is the key of the kubeconfig in the Secret.
	KubeconfigKey = "kubeconfig"
	// HealthSourceAnnotation, on a ClusterProfile, says who writes its
	// ControlPlaneHealthy condition: HealthSourceOrderly (the default) or
	// HealthSourceFleetManager. With the fleet manager, Orderly still probes the
	// member but writes what it finds to its own condition
	// (fleet.orderly.dev/Reachable), and failover follows the fleet manager's verdict.
	HealthSourceAnnotation   = "fleet.orderly.dev/health-source"
	HealthSourceOrderly      = "Orderly"
	HealthSourceFleetManager = "FleetManager"

	// PolicyNamespaceLabel, PolicyNameLabel and PolicyUIDLabel are on every object
	// Orderly applies to a member: the PlacementPolicy that placed it. Orderly changes
	// and deletes only objects whose PolicyUIDLabel is the policy's UID.
	PolicyNamespaceLabel = "fleet.orderly.dev/policy-namespace"
	PolicyNameLabel      = "fleet.orderly.dev/policy-name"
	PolicyUIDLabel       = "fleet.orderly.dev/policy-uid"

	// FieldManager is the field manager of Orderly's writes to members.
	FieldManager = "orderly-placement"
)

// Strategy is how a PlacementPolicy places workloads on the chosen clusters.
// +kubebuilder:validation:Enum=Duplicate;Divide
type Strategy string

const (
	// StrategyDuplicate puts a whole copy (every replica) on each chosen cluster.
	StrategyDuplicate Strategy = "Duplicate"
	// StrategyDivide splits each workload's replicas across the chosen clusters by
	// weight (largest remainder, deterministic).
	StrategyDivide Strategy = "Divide"
)

// PurgeMode says what happens to Orderly's copies on a member that the policy no
// longer wants them on.
// +kubebuilder:validation:Enum=Never;Immediate
type PurgeMode string

const (
	// PurgeNever leaves them on the member (they keep their ownership labels).
	PurgeNever PurgeMode = "Never"
	// PurgeImmediate deletes them at once, when the member is reachable and healthy.
	PurgeImmediate PurgeMode = "Immediate"
)

// DeletionPolicy says what happens to the copies on the members when the
// PlacementPolicy is deleted.
// +kubebuilder:validation:Enum=Delete;Orphan
type DeletionPolicy string

const (
	// DeletionDelete deletes Orderly's copies from every member (deletion of the
	// policy waits until each member confirmed).
	DeletionDelete DeletionPolicy = "Delete"
	// DeletionOrphan leaves them on the members.
	DeletionOrphan DeletionPolicy = "Orphan"
)

// ResourceSelector selects objects in the policy's namespace on the hub.
// +kubebuilder:validation:XValidation:rule="has(self.name) != has(self.labelSelector)",message="set exactly one of name and labelSelector"
// +kubebuilder:validation:XValidation:rule="(self.apiVersion == 'apps/v1') == (self.kind in ['Deployment', 'StatefulSet'])",message="apiVersion must be apps/v1 for Deployment and StatefulSet, v1 for ConfigMap, Secret, Service and ServiceAccount"
type ResourceSelector struct {
	// apiVersion of the objects.
	// +required
	// +kubebuilder:validation:Enum=v1;apps/v1
	APIVersion string `json:"apiVersion"`
	// kind of the objects.
	// +required
	// +kubebuilder:validation:Enum=Deployment;StatefulSet;ConfigMap;Secret;Service;ServiceAccount
	Kind string `json:"kind"`
	// name of one object.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name,omitempty"`
	// labelSelector selects the objects of the kind by their labels.
	// +optional
	LabelSelector *metav1.LabelSelector `json:"labelSelector,omitempty"`
}

// Weight is the share of replicas that a cluster, or a group of clusters with one
// value of spec.weightLabel, gets under Divide. A group's share is split evenly among
// its healthy clusters.
// +kubebuilder:validation:XValidation:rule="has(self.cluster) != has(self.labelValue)",message="set exactly one of cluster and labelValue"
type Weight struct {
	// cluster is a ClusterProfile's name. ClusterProfiles of that name in several
	// namespaces share the weight, split evenly like a labelValue group.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Cluster string `json:"cluster,omitempty"`
	// labelValue is a value of spec.weightLabel on ClusterProfiles.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	LabelValue string `json:"labelValue,omitempty"`
	// weight is the share, relative to the other weights.
	// +required
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	Weight int32 `json:"weight"`
}

// Spread limits how unevenly replicas fall across the values of a cluster label.
type Spread struct {
	// topologyKey is the ClusterProfile label whose values are the domains (for
	// example "topology.kubernetes.io/region").
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=317
	TopologyKey string `json:"topologyKey"`
	// maxSkew is the largest difference allowed between the replicas of two domains,
	// per workload; replicas move one at a time from the fullest domain to the
	// emptiest until it holds. It overrides weights where they disagree.
	// +required
	// +kubebuilder:validation:Minimum=1
	MaxSkew int32 `json:"maxSkew"`
}

// JSONPatch is one RFC 6902 operation on the copy for the matching clusters. Only
// the replicas, container images and environment may be patched.
type JSONPatch struct {
	// op is the operation.
	// +required
	// +kubebuilder:validation:Enum=add;replace;remove
	Op string `json:"op"`
	// path is a JSON pointer: /spec/replicas,
	// /spec/template/spec/containers/N/image,
	// /spec/template/spec/containers/N/env (or env/N, env/N/value, env/-), and the same
	// under initContainers.
	// +required
	// +kubebuilder:validation:MaxLength=128
	// +kubebuilder:validation:XValidation:rule="self.matches('^/spec/replicas$') || self.matches('^/spec/template/spec/(initContainers|containers)/[0-9]+/(image|env|env/-|env/[0-9]+|env/[0-9]+/value)$')",message="path must be /spec/replicas, /spec/template/spec/containers/N/image or /spec/template/spec/containers/N/env[/N[/value]|/-] (or under initContainers)"
	// +kubebuilder:validation:MinLength=1
	Path string `json:"path"`
	// value is the value to add or replace.
	// +optional
	Value *apiextensionsv1.JSON `json:"value,omitempty"`
}

// Override changes the copies of Deployments and StatefulSets on some clusters.
type Override struct {
	// clusterSelector selects the ClusterProfiles the override applies to.
	// +required
	ClusterSelector metav1.LabelSelector `json:"clusterSelector"`
	// resourceName limits the override to workloads of this name; all when empty.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ResourceName string `json:"resourceName,omitempty"`
	// patches are applied in order, after the replicas are divided.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Patches []JSONPatch `json:"patches"`
}

// Failover says when a cluster counts as failed and how its replicas come back.
type Failover struct {
	// unhealthyFor is how long a cluster's ControlPlaneHealthy must stay False before
	// its replicas move to the other clusters (Divide). A cluster that is only slow or
	// briefly unreachable keeps its replicas.
	// +optional
	// +kubebuilder:default="60s"
	UnhealthyFor metav1.Duration `json:"unhealthyFor,omitempty"`
	// returnRate is how many replicas per workload move back each minute to a
	// cluster that recovered from a failure (the first batch at once).
	// +optional
	// +kubebuilder:default=5
	// +kubebuilder:validation:Minimum=1
	ReturnRate int32 `json:"returnRate,omitempty"`
	// purgeMode says what happens to the copies on a cluster the policy no longer
	// selects (its labels changed, or a resource was deselected). Failover never
	// deletes: a failed cluster that comes back keeps its objects, scaled to what it
	// gets back.
	// +optional
	// +kubebuilder:default=Immediate
	PurgeMode PurgeMode `json:"purgeMode,omitempty"`
}

// PlacementPolicySpec is what to place and where.
// +kubebuilder:validation:XValidation:rule="!has(self.weights) || size(self.weights) == 0 || self.weights.exists(w, w.weight > 0)",message="weights must sum to more than zero"
// +kubebuilder:validation:XValidation:rule="!has(self.weights) || !self.weights.exists(w, has(w.labelValue)) || has(self.weightLabel)",message="weights by labelValue need weightLabel"
// +kubebuilder:validation:XValidation:rule="self.strategy == 'Divide' || !has(self.weights) || size(self.weights) == 0",message="weights apply only to strategy Divide"
// +kubebuilder:validation:XValidation:rule="self.strategy == 'Divide' || !has(self.capacityProperty)",message="capacityProperty applies only to strategy Divide"
// +kubebuilder:validation:XValidation:rule="!has(self.capacityProperty) || !has(self.weights) || size(self.weights) == 0",message="set weights or capacityProperty, not both: capacityProperty makes each cluster's reported capacity its weight"
type PlacementPolicySpec struct {
	// resourceSelectors select the objects in this namespace to place.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	ResourceSelectors []ResourceSelector `json:"resourceSelectors"`
	// clusterSelector selects ClusterProfiles by their labels; every ClusterProfile
	// Orderly can reach when empty.
	// +optional
	ClusterSelector *metav1.LabelSelector `json:"clusterSelector,omitempty"`
	// strategy is Duplicate (a whole copy on each cluster) or Divide (replicas split
	// by weight).
	// +optional
	// +kubebuilder:default=Duplicate
	Strategy Strategy `json:"strategy,omitempty"`
	// weightLabel is the ClusterProfile label whose values weights[].labelValue name.
	// +optional
	// +kubebuilder:validation:MaxLength=317
	WeightLabel string `json:"weightLabel,omitempty"`
	// weights are the static shares of Divide; every cluster the same share when
	// empty. A selected cluster no weight names gets no replicas.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=atomic
	// +kubebuilder:validation:XValidation:rule="self.size() == 0 || self.exists(w, w.weight > 0)",message="at least one weight must be above 0: with every weight 0 no cluster gets a replica"
	Weights []Weight `json:"weights,omitempty"`
	// capacityProperty divides replicas by reported capacity instead of static
	// weights: the name of a ClusterProfile status property (set by the fleet manager,
	// e.g. "cpu.allocatable" or "example.com/free-cpu") whose value is a quantity
	// ("48", "93500m", "1.5k"); each cluster's weight is that value. A cluster that
	// does not report it, or reports something that is not a non-negative quantity,
	// gets no replicas and says why in its status.
	// +optional
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	CapacityProperty string `json:"capacityProperty,omitempty"`
	// spread limits the skew of replicas across a cluster label (Divide).
	// +optional
	Spread *Spread `json:"spread,omitempty"`
	// overrides change the copies on some clusters.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	Overrides []Override `json:"overrides,omitempty"`
	// failover says when replicas leave a failed cluster and how they come back.
	// +optional
	// +kubebuilder:default={}
	Failover Failover `json:"failover,omitempty"`
	// deletionPolicy says what happens to the copies when this policy is deleted.
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy DeletionPolicy `json:"deletionPolicy,omitempty"`
}

// ClusterPhase is where a chosen cluster stands for the policy.
// +kubebuilder:validation:Enum=Healthy;Unhealthy;Failed;Returning;Unreachable
type ClusterPhase string

const (
	// ClusterHealthy: the cluster is healthy and gets its full share.
	ClusterHealthy ClusterPhase = "Healthy"
	// ClusterUnhealthy: the cluster is unhealthy for less than unhealthyFor; it keeps
	// its share.
	ClusterUnhealthy ClusterPhase = "Unhealthy"
	// ClusterFailed: unhealthy for unhealthyFor or longer; its share went to the others.
	ClusterFailed ClusterPhase = "Failed"
	// ClusterReturning: healthy again after a failure; its share comes back at
	// returnRate.
	ClusterReturning ClusterPhase = "Returning"
	// ClusterUnreachable: Orderly has no working credentials for the cluster.
	ClusterUnreachable ClusterPhase = "Unreachable"
)

// ClusterStatus is the placement on one cluster: one ClusterProfile, identified by
// namespace and name.
type ClusterStatus struct {
	// name is the ClusterProfile's name.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// namespace is the ClusterProfile's namespace. ClusterProfiles of the same name
	// in different namespaces are different clusters.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// phase is the cluster's health as the policy sees it.
	// +optional
	Phase ClusterPhase `json:"phase,omitempty"`
	// phaseSince is when the cluster entered Failed or Returning.
	// +optional
	PhaseSince *metav1.Time `json:"phaseSince,omitempty"`
	// replicas is how many replicas (summed over the workloads) the cluster should run.
	// +optional
	Replicas int32 `json:"replicas"`
	// readyReplicas is how many of them the cluster reported ready at the last sync.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
	// applied is how many objects the last sync applied.
	// +optional
	Applied int32 `json:"applied"`
	// lastSync is when Orderly last applied the objects to the cluster successfully.
	// +optional
	LastSync *metav1.Time `json:"lastSync,omitempty"`
	// error is why the last sync failed.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Error string `json:"error,omitempty"`
}

// PlacementPolicyStatus is the observed placement.
type PlacementPolicyStatus struct {
	// observedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// conditions: Ready (every chosen cluster synced and its replicas ready),
	// Scheduled (clusters were chosen), Synced (every chosen cluster took the objects).
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// resources is how many objects the resource selectors matched.
	// +optional
	Resources int32 `json:"resources"`
	// clusters is the placement on each chosen cluster, by ClusterProfile namespace
	// and name.
	// +optional
	// +kubebuilder:validation:MaxItems=100
	// +listType=map
	// +listMapKey=namespace
	// +listMapKey=name
	Clusters []ClusterStatus `json:"clusters,omitempty"`
	// selectedClusters is how many clusters the clusterSelector chose.
	// +optional
	SelectedClusters int32 `json:"selectedClusters"`
	// readyClusters is how many chosen clusters are synced with their replicas ready.
	// +optional
	ReadyClusters int32 `json:"readyClusters"`
	// replicas is the sum of the replicas placed across clusters.
	// +optional
	Replicas int32 `json:"replicas"`
	// readyReplicas is the sum of the ready replicas across clusters.
	// +optional
	ReadyReplicas int32 `json:"readyReplicas"`
}

// PlacementPolicy places workloads of its namespace (and their ConfigMaps, Secrets,
// Services) on member clusters chosen from the ClusterProfile inventory, keeps them
// there, and moves replicas away from a cluster that failed and back when it
// recovers.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pp,categories=orderly
// +kubebuilder:printcolumn:name="Strategy",type=string,JSONPath=`.spec.strategy`
// +kubebuilder:printcolumn:name="Clusters",type=integer,JSONPath=`.status.selectedClusters`
// +kubebuilder:printcolumn:name="Ready Clusters",type=integer,JSONPath=`.status.readyClusters`
// +kubebuilder:printcolumn:name="Replicas",type=integer,JSONPath=`.status.replicas`
// +kubebuilder:printcolumn:name="Ready Replicas",type=integer,JSONPath=`.status.readyReplicas`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PlacementPolicy struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is what to place and where.
	// +required
	Spec PlacementPolicySpec `json:"spec"`
	// status is the observed placement.
	// +optional
	Status PlacementPolicyStatus `json:"status,omitempty"`
}

// PlacementPolicyList is a list of PlacementPolicies.
// +kubebuilder:object:root=true
type PlacementPolicyList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the PlacementPolicies.
	Items []PlacementPolicy `json:"items"`
}
