// Package audit grades the operators installed in a cluster against an adoption
// checklist (docs/audit.md): it groups CustomResourceDefinitions by API group, finds
// the Deployment or StatefulSet that controls each group through its ServiceAccount's
// RBAC, and grades every such controller on its API's maturity, the breadth of its
// RBAC, its availability and its observability.
//
// Reading (read.go) is a thin layer that lists objects from the API server into a
// Snapshot; everything else is pure functions over the Snapshot, unit tested with
// hand-built objects. The audit never writes to the cluster.
package audit

import (
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Snapshot is what the audit reads from the cluster. Leases, PDBs, Pods, Services and
// Monitors are read only in the namespaces of the controllers found (Pods as metadata:
// only their names and labels are used).
type Snapshot struct {
	CRDs                []apiextensionsv1.CustomResourceDefinition
	Deployments         []appsv1.Deployment
	StatefulSets        []appsv1.StatefulSet
	ClusterRoles        []rbacv1.ClusterRole
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	Roles               []rbacv1.Role
	RoleBindings        []rbacv1.RoleBinding

	Leases   []coordinationv1.Lease
	PDBs     []policyv1.PodDisruptionBudget
	Pods     []metav1.PartialObjectMetadata
	Services []corev1.Service
	Monitors []Monitor
}

// Monitor is a Prometheus Operator ServiceMonitor or PodMonitor, read only when its
// CRD is installed: the audit needs its kind, where it is and what it selects.
type Monitor struct {
	Kind      string // ServiceMonitor or PodMonitor
	Namespace string
	Name      string
	// Selector selects Services (ServiceMonitor) or Pods (PodMonitor) in Namespace.
	Selector metav1.LabelSelector
}

// Categories of findings, each scored 0–100 (docs/audit.md has the weights).
const (
	CategoryAPI           = "api"
	CategoryRBAC          = "rbac"
	CategoryAvailability  = "availability"
	CategoryObservability = "observability"
)

// Results of a check.
const (
	Pass = "pass"
	Warn = "warn"
	Fail = "fail"
)

// Finding is the result of one check, with the reason for it.
type Finding struct {
	Category string `json:"category"`
	// Check is a stable identifier, e.g. rbac.escalate (the list is in docs/audit.md).
	Check string `json:"check"`
	// Subject is what the check looked at when it is not the operator itself: an API
	// group for the api checks.
	Subject string `json:"subject,omitempty"`
	Result  string `json:"result"`
	// Penalty is what the finding takes from its category's score of 100.
	Penalty int    `json:"penalty"`
	Message string `json:"message"`
}

// Scores are each category's score and the weighted total, 0–100.
type Scores struct {
	API           int `json:"api"`
	RBAC          int `json:"rbac"`
	Availability  int `json:"availability"`
	Observability int `json:"observability"`
	Total         int `json:"total"`
}

// Operator is a workload found to control at least one API group, with its grade.
type Operator struct {
	Kind           string    `json:"kind"` // Deployment or StatefulSet
	Namespace      string    `json:"namespace"`
	Name           string    `json:"name"`
	ServiceAccount string    `json:"serviceAccount"` // namespace/name
	Replicas       int32     `json:"replicas"`
	Groups         []string  `json:"groups"`
	Scores         Scores    `json:"scores"`
	Grade          string    `json:"grade"`
	Findings       []Finding `json:"findings"`
}

// Ref names the operator as it appears in groups' controllers: Kind namespace/name.
func (o Operator) Ref() string { return o.Kind + " " + o.Namespace + "/" + o.Name }

// CRD summarizes one CustomResourceDefinition of a group.
type CRD struct {
	Name  string `json:"name"`
	Kind  string `json:"kind"`
	Scope string `json:"scope"`
	// Conversion is the conversion strategy: None or Webhook.
	Conversion string    `json:"conversion"`
	Versions   []Version `json:"versions"`
	// Maturity is that of the most mature version served: stable, beta, alpha or other.
	Maturity string `json:"maturity"`
	// CELRules counts the x-kubernetes-validations rules in the served versions' schemas.
	CELRules int `json:"celRules"`
}

// Version is one version of a CRD.
type Version struct {
	Name       string `json:"name"`
	Served     bool   `json:"served"`
	Storage    bool   `json:"storage"`
	Deprecated bool   `json:"deprecated,omitempty"`
	Maturity   string `json:"maturity"`
}

// Group is an API group of CRDs with its API grade and the workloads that act on it.
type Group struct {
	Group string `json:"group"`
	CRDs  []CRD  `json:"crds"`
	// Maturity is the lowest of its CRDs' maturities: a group is as mature as its least
	// mature kind.
	Maturity string `json:"maturity"`
	// Controllers are the workloads that control the group (Kind namespace/name); empty
	// when none was found.
	Controllers []string `json:"controllers"`
	// Writers are the other workloads that may write the group's resources: clients of
	// the API (they do not write status), or workloads that reach it only through
	// wildcards.
	Writers  []string  `json:"writers"`
	APIScore int       `json:"apiScore"`
	Findings []Finding `json:"findings"`
}

// Report is the result of an audit.
type Report struct {
	Operators []Operator `json:"operators"`
	Groups    []Group    `json:"groups"`
}
