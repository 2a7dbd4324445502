package kit

import (
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admissionregistration/v1"
)

// This file is the one rule that keeps Orderly out of Kubernetes' own namespaces and
// out of its own: no object a namespace user writes, and no policy, makes Orderly act
// there, so that nothing Orderly does can stop the control plane or Orderly itself.
// Every controller applies it:
//
//   - Tenant never manages such a namespace (NamespaceConflict; the API server refuses
//     a Tenant that lists a kube-* namespace).
//   - SleepSchedule never sleeps one, whatever its selector (listed as excluded).
//   - LabelPolicy and ImagePolicy never cover one: their admission objects carry
//     ProtectedMatchCondition and exclude SystemNamespaces and the manager's namespace
//     by name; their webhooks and audits check ProtectedNamespace; ImageScan scans no
//     image for pods that run only there.
//   - DevDatabase, BackupVerification, SecretRotation, Canary, ServiceDomain and
//     PlacementPolicy objects created in one are not acted on (Ready=False with a reason
//     that says so).
//   - The cluster-scoped kinds that refer to credentials (DatabaseServer, DomainZone,
//     the kubeconfig Secrets of ClusterProfiles) read them from the manager's namespace
//     on purpose: that is where the platform team keeps what only Orderly may read. They
//     act on nothing there.

// ProtectedPrefix starts the names of the namespaces of the cluster's own components
// (kube-system, kube-public, kube-node-lease, and add-ons such as kube-flannel).
const ProtectedPrefix = "kube-"

// SystemNamespaces are the kube-* namespaces every cluster has. A namespaceSelector
// cannot match a name prefix, so admission bindings exclude these by name too, and the
// API server skips them before evaluating any CEL.
var SystemNamespaces = []string{"kube-system", "kube-public", "kube-node-lease"}

// Protection says why a namespace is protected.
type Protection int

const (
	// NotProtected: Orderly may act in the namespace.
	NotProtected Protection = iota
	// KubernetesNamespace: a kube-* namespace.
	KubernetesNamespace
	// ManagerNamespace: the namespace the manager runs in.
	ManagerNamespace
)

// NamespaceProtection says whether namespace ns is protected, and why. managerNS is the
// manager's namespace ("" when unknown).
func NamespaceProtection(ns, managerNS string) Protection {
	switch {
	case strings.HasPrefix(ns, ProtectedPrefix):
		return KubernetesNamespace
	case managerNS != "" && ns == managerNS:
		return ManagerNamespace
	}
	return NotProtected
}

// ProtectedNamespace says whether Orderly must leave namespace ns alone.
func ProtectedNamespace(ns, managerNS string) bool {
	return NamespaceProtection(ns, managerNS) != NotProtected
}

// ProtectedNamespaces describes the protected namespaces, for status and messages:
// "kube-*" and the manager's namespace.
func ProtectedNamespaces(managerNS string) []string {
	out := []string{ProtectedPrefix + "*"}
	if managerNS != "" && !strings.HasPrefix(managerNS, ProtectedPrefix) {
		out = append(out, managerNS)
	}
	return out
}

// ProtectedMatchCondition keeps a generated admission policy or webhook out of the
// protected namespaces: a namespaceSelector cannot match a name prefix; CEL can.
func ProtectedMatchCondition(managerNS string) admissionv1.MatchCondition {
	expr := "!request.namespace.startsWith(" + strconv.Quote(ProtectedPrefix) + ")"
	if managerNS != "" {
		expr += " && request.namespace != " + strconv.Quote(managerNS)
	}
	return admissionv1.MatchCondition{Name: "not-protected-namespace", Expression: expr}
}
