package imagescan

import (
	"context"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// ExcludedNamespaces are the namespaces p never applies to by name.
func ExcludedNamespaces(p *policyv1alpha1.ImagePolicy, managerNS string) []string {
	out := append(slices.Clone(kit.SystemNamespaces), p.Spec.Match.ExcludedNamespaces...)
	if managerNS != "" {
		out = append(out, managerNS)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// NamespaceSelector is p's namespace selector with the excluded namespaces taken out.
func NamespaceSelector(p *policyv1alpha1.ImagePolicy, managerNS string) *metav1.LabelSelector {
	sel := &metav1.LabelSelector{}
	if p.Spec.Match.NamespaceSelector != nil {
		sel = p.Spec.Match.NamespaceSelector.DeepCopy()
	}
	sel.MatchExpressions = append(sel.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: corev1.LabelMetadataName, Operator: metav1.LabelSelectorOpNotIn, Values: ExcludedNamespaces(p, managerNS),
	})
	return sel
}

// MatchedNamespaces lists the namespaces (metadata from the cache) that any of the
// policies applies to.
func MatchedNamespaces(ctx context.Context, r client.Reader, policies []*policyv1alpha1.ImagePolicy, managerNS string) (map[string]bool, error) {
	out := map[string]bool{}
	if len(policies) == 0 {
		return out, nil
	}
	var sels []k8slabels.Selector
	for _, p := range policies {
		sel, err := metav1.LabelSelectorAsSelector(NamespaceSelector(p, managerNS))
		if err != nil {
			return nil, err
		}
		sels = append(sels, sel)
	}
	var list metav1.PartialObjectMetadataList
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("NamespaceList"))
	if err := r.List(ctx, &list); err != nil {
		return nil, err
	}
	for _, ns := range list.Items {
		if kit.ProtectedNamespace(ns.Name, managerNS) {
			continue
		}
		lbls := k8slabels.Merge(k8slabels.Set(ns.Labels), k8slabels.Set{corev1.LabelMetadataName: ns.Name})
		for _, sel := range sels {
			if sel.Matches(lbls) {
				out[ns.Name] = true
				break
			}
		}
	}
	return out, nil
}
