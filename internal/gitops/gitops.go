// Package gitops recognises the objects that a GitOps tool, Argo CD or Flux, manages:
// the one place where controllers that change users' workloads (SleepSchedule,
// LabelPolicy remediation) learn that Git, not the cluster, is their source of truth.
package gitops

import metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

// Tool is a GitOps tool; its values are those of the APIs' GitOpsTool types.
type Tool string

// The tools recognised.
const (
	ArgoCD Tool = "ArgoCD"
	Flux   Tool = "Flux"
)

// The labels and annotations by which Argo CD and Flux mark what they manage. Argo CD
// tracks by the argocd.argoproj.io/tracking-id annotation (its default since 3.0, and
// with annotation+label), or by a label: app.kubernetes.io/instance by default, which
// Helm charts set too and so tells nothing alone, or the argocd.argoproj.io/instance
// label that installations commonly configure instead. Flux's kustomize-controller
// and helm-controller label every object they apply with the name of their
// Kustomization or HelmRelease.
const (
	ArgoTrackingAnnotation = "argocd.argoproj.io/tracking-id"
	ArgoInstanceLabel      = "argocd.argoproj.io/instance"
	FluxKustomizationLabel = "kustomize.toolkit.fluxcd.io/name"
	FluxHelmReleaseLabel   = "helm.toolkit.fluxcd.io/name"
)

// ToolOf is the GitOps tool that manages o, "" when none.
func ToolOf(o metav1.Object) Tool {
	l := o.GetLabels()
	if _, ok := o.GetAnnotations()[ArgoTrackingAnnotation]; ok {
		return ArgoCD
	}
	if l[ArgoInstanceLabel] != "" {
		return ArgoCD
	}
	if l[FluxKustomizationLabel] != "" || l[FluxHelmReleaseLabel] != "" {
		return Flux
	}
	return ""
}
