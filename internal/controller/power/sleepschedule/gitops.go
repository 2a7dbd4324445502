package sleepschedule

import (
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// The labels and annotations by which Argo CD and Flux mark what they manage. Argo CD
// tracks by the argocd.argoproj.io/tracking-id annotation (its default since 3.0, and
// with annotation+label), or by a label: app.kubernetes.io/instance by default, which
// Helm charts set too and so tells nothing alone, or the argocd.argoproj.io/instance
// label that installations commonly configure instead. Flux's kustomize-controller
// and helm-controller label every object they apply with the name of their
// Kustomization or HelmRelease.
const (
	argoTrackingAnnotation = "argocd.argoproj.io/tracking-id"
	argoInstanceLabel      = "argocd.argoproj.io/instance"
	fluxKustomizationLabel = "kustomize.toolkit.fluxcd.io/name"
	fluxHelmReleaseLabel   = "helm.toolkit.fluxcd.io/name"
)

// gitOpsTool is the GitOps tool that manages o, "" when none: a tool that syncs the
// object's replicas from Git scales a sleeping workload back up, unless it is told to
// ignore them (docs/sleepschedule.md, "GitOps").
func gitOpsTool(o client.Object) powerv1alpha1.GitOpsTool {
	l := o.GetLabels()
	if _, ok := o.GetAnnotations()[argoTrackingAnnotation]; ok {
		return powerv1alpha1.GitOpsArgoCD
	}
	if l[argoInstanceLabel] != "" {
		return powerv1alpha1.GitOpsArgoCD
	}
	if l[fluxKustomizationLabel] != "" || l[fluxHelmReleaseLabel] != "" {
		return powerv1alpha1.GitOpsFlux
	}
	return ""
}
