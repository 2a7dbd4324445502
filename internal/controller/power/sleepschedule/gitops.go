package sleepschedule

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/gitops"
)

// gitOpsTool is the GitOps tool that manages o, "" when none: a tool that syncs the
// object's replicas from Git scales a sleeping workload back up, unless it is told to
// ignore them (docs/sleepschedule.md, "GitOps").
func gitOpsTool(o client.Object) powerv1alpha1.GitOpsTool {
	return powerv1alpha1.GitOpsTool(gitops.ToolOf(o))
}
