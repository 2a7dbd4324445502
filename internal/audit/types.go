// Package audit grades the operators installed in a cluster against an adoption
// checklist (docs/audit.md): it groups CustomResourceDefinitions by API group, finds
// the Deployment or StatefulSet that controls each kind through its ServiceAccount's
// RBAC, and grades every such controller (and every workload that holds
// cluster-admin) on its API's maturity, the breadth of its RBAC, its availability,
// its observability and what the cluster shows of its maintenance, answering the
// checklist's questions with the evidence for each answer.
//
// Reading (read.go) is a thin layer that lists objects from the API server into a
// Snapshot; everything else is pure functions over the Snapshot, unit tested with
// hand-built objects and with real operators' install manifests (testdata). The
// audit never writes to the cluster.
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

// Snapshot is what the audit reads from the cluster. Leases, PDBs, Pods and Services
// are read only in the namespaces of the operators found (Pods as metadata: only
// their names and labels are used); monitors in every namespace.
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

	// Unread are the lists the reader could not make (forbidden, or failing). A check
	// that needed one is reported unknown, with the permission that would answer it,
	// unless other evidence answers it.
	Unread []Unread
}

// Monitor is a Prometheus Operator ServiceMonitor or PodMonitor, read only when its
// CRD is installed: the audit needs its kind, where it is, where it looks and what it
// selects.
type Monitor struct {
	Kind      string // ServiceMonitor or PodMonitor
	Namespace string
	Name      string
	// Selector selects Services (ServiceMonitor) or Pods (PodMonitor).
	Selector metav1.LabelSelector
	// AnyNamespace and MatchNames are its namespaceSelector: it looks in every
	// namespace, in those named, or (neither set) in its own.
	AnyNamespace bool
	MatchNames   []string
}

// Unread is a list the reader could not make.
type Unread struct {
	// Resource is the resource listed, as RBAC names it: "leases.coordination.k8s.io",
	// "services".
	Resource string `json:"resource"`
	// Namespace is where it was listed; empty for every namespace.
	Namespace string `json:"namespace,omitempty"`
	Error     string `json:"error"`
}

// Permission is what the person running the audit would need to make the list.
func (u Unread) Permission() string {
	if u.Namespace == "" {
		return "list " + u.Resource + " in every namespace"
	}
	return "list " + u.Resource + " in namespace " + u.Namespace
}

// Categories of findings, each scored 0–100 (docs/audit.md has the weights).
const (
	CategoryAPI           = "api"
	CategoryRBAC          = "rbac"
	CategoryAvailability  = "availability"
	CategoryObservability = "observability"
	CategoryMaintenance   = "maintenance"
)

// Results of a check.
const (
	Pass = "pass"
	Warn = "warn"
	Fail = "fail"
	// Unknown: the audit could not read what the check needs (Unread); the check
	// costs nothing and the operator's result is marked partial.
	Unknown = "unknown"
	// NotApplicable: the check does not apply to this operator (a
	// PodDisruptionBudget for one replica).
	NotApplicable = "n/a"
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
	// Evidence names the objects and rules the result rests on: "ClusterRole x
	// (ClusterRoleBinding y) cluster-wide: create on pods", "Lease ns/name held by pod
	// p", "argument --leader-elect of container manager".
	Evidence []string `json:"evidence,omitempty"`
}

// Scores are each category's score and the weighted total, 0–100.
type Scores struct {
	API           int `json:"api"`
	RBAC          int `json:"rbac"`
	Availability  int `json:"availability"`
	Observability int `json:"observability"`
	Maintenance   int `json:"maintenance"`
	Total         int `json:"total"`
}

// Answer answers one question of the adoption checklist for an operator.
type Answer struct {
	// ID is the question's stable identifier: api, cluster-admin, availability,
	// observability, maintenance.
	ID       string `json:"id"`
	Question string `json:"question"`
	// Answer is yes, no, partly, "in effect" (cluster-admin without the name) or
	// unknown.
	Answer  string `json:"answer"`
	Summary string `json:"summary"`
	// Evidence names the rules and objects the answer rests on.
	Evidence []string `json:"evidence"`
}

// Operator is a workload found to control at least one API group, or that holds
// cluster-admin, with its grade.
type Operator struct {
	Kind           string `json:"kind"` // Deployment or StatefulSet
	Namespace      string `json:"namespace"`
	Name           string `json:"name"`
	ServiceAccount string `json:"serviceAccount"` // namespace/name
	Replicas       int32  `json:"replicas"`
	// Version is the release it runs, when the cluster says (image tag or labels).
	Version string `json:"version,omitempty"`
	// Groups are the API groups it controls. Empty for a workload graded because it
	// holds cluster-admin, when nothing ties it to a group.
	Groups []string `json:"groups"`
	// ClusterAdmin is set when it holds every verb on every resource of every group.
	ClusterAdmin bool   `json:"clusterAdmin,omitempty"`
	Scores       Scores `json:"scores"`
	// Ungraded are the categories left out of the total because nothing could be
	// graded in them (api, for a cluster-admin workload tied to no group).
	Ungraded []string `json:"ungraded,omitempty"`
	// Unknown are the checks the audit could not answer (see Report.Unread); the
	// grade rests on the others.
	Unknown   []string  `json:"unknown,omitempty"`
	Grade     string    `json:"grade"`
	Checklist []Answer  `json:"checklist"`
	Findings  []Finding `json:"findings"`
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
	// UserWritten says whether users write this kind, so that its maturity is graded
	// (docs/audit.md says how that is told); the operator's own records are shown but
	// not graded.
	UserWritten bool `json:"userWritten"`
	// CELRules counts the x-kubernetes-validations rules in the served versions' schemas.
	CELRules int `json:"celRules"`
	// ControlledBy are the workloads that control this kind (Kind namespace/name).
	ControlledBy []string `json:"controlledBy"`
}

// Version is one version of a CRD.
type Version struct {
	Name       string `json:"name"`
	Served     bool   `json:"served"`
	Storage    bool   `json:"storage"`
	Deprecated bool   `json:"deprecated,omitempty"`
	Maturity   string `json:"maturity"`
}

// Control is why a workload is taken for a group's controller or writer: the rule
// that lets it act on one of the group's kinds, and where the rule comes from.
type Control struct {
	Workload string `json:"workload"` // Kind namespace/name
	// Role is controller or writer.
	Role string `json:"role"`
	Kind string `json:"kind"`
	// Permission is the verb and resource the rule grants: "patch on clusters/status".
	Permission string `json:"permission"`
	// Via names the role and binding, and the scope: "ClusterRole x (ClusterRoleBinding
	// y) cluster-wide".
	Via string `json:"via"`
	// Wildcard is set when the rule reaches the group only through apiGroups "*".
	Wildcard bool `json:"wildcard,omitempty"`
	// Tie is what ties a wildcard workload to the group, when something does: shared
	// labels, a Helm release, a name, a conversion webhook served by its pods.
	Tie string `json:"tie,omitempty"`
}

// Roles of a workload in a group.
const (
	RoleController = "controller"
	RoleWriter     = "writer"
)

// Group is an API group of CRDs with its API grade and the workloads that act on it.
type Group struct {
	Group string `json:"group"`
	CRDs  []CRD  `json:"crds"`
	// Maturity is the lowest of its user-written kinds' maturities (each kind's is in
	// CRDs; the api.maturity check grades their mix).
	Maturity string `json:"maturity"`
	// Controllers are the workloads that control at least one of the group's kinds
	// (Kind namespace/name); empty when none was found.
	Controllers []string `json:"controllers"`
	// Writers are the other workloads that may write the group's resources: clients of
	// the API (they do not write status), or workloads that reach it only through
	// wildcards and that nothing else ties to it.
	Writers []string `json:"writers"`
	// Evidence is the rule behind each controller and writer.
	Evidence []Control `json:"evidence"`
	APIScore int       `json:"apiScore"`
	Findings []Finding `json:"findings"`
}

// Stats say how much the audit looked at.
type Stats struct {
	CRDs      int `json:"crds"`
	Workloads int `json:"workloads"`
	// Seconds is how long reading and grading took, when the caller measured it.
	Seconds float64 `json:"seconds,omitempty"`
}

// Report is the result of an audit.
type Report struct {
	// Filter are the API groups the report was limited to (--group); empty for all.
	// Grades never depend on it: each operator is graded on every group it controls.
	Filter    []string   `json:"filter,omitempty"`
	Operators []Operator `json:"operators"`
	Groups    []Group    `json:"groups"`
	// Unread are the lists the audit could not make; the checks that needed them are
	// unknown.
	Unread []Unread `json:"unread,omitempty"`
	Stats  Stats    `json:"stats"`
}
