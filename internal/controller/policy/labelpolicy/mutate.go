package labelpolicy

import (
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// MutationRequest is one object the webhook is asked to mutate.
type MutationRequest struct {
	// Kind is the workload's kind, e.g. Deployment.
	Kind policyv1alpha1.Kind
	// Update is true for UPDATE, false for CREATE.
	Update bool
	// Object is the object as it would be stored; Mutate changes it in place.
	Object map[string]any
	// OldObject is the stored object on UPDATE, nil on CREATE.
	OldObject map[string]any
	// NamespaceLabels are the labels of the object's namespace.
	NamespaceLabels map[string]string
	// NamespaceAnnotations are the annotations of the object's namespace: with
	// defaultFromTenant, its owner-uid says which Tenant it belongs to.
	NamespaceAnnotations map[string]string
	// Tenants are the Tenants' cost centers by tenant name, for a policy with
	// defaultFromTenant; nil otherwise.
	Tenants map[string]TenantDefault
}

// Mutate fills the policy's label in on req.Object exactly as the
// MutatingAdmissionPolicy compiled by compileMAP would, and reports whether it changed
// anything. It is that policy's Go twin, run by Orderly's webhook where the API server
// does not serve MutatingAdmissionPolicy; the unit tests hold the two to the same cases.
func Mutate(p *policyv1alpha1.LabelPolicy, req MutationRequest) bool {
	if req.Kind == policyv1alpha1.KindPod && judgedThroughOwner(p, ownerRefsOf(req.Object)) {
		return false // a trusted controller's pod, as podsMatchCondition says
	}
	key := p.Spec.Label
	own := getString(req.Object, "metadata", "labels", key)
	value := own
	if p.Spec.Action == policyv1alpha1.ActionDefault && value == "" && p.Spec.DefaultFromTenant {
		value = tenantCostCenter(req.NamespaceLabels, req.NamespaceAnnotations, req.Tenants)
	}
	if p.Spec.Action == policyv1alpha1.ActionDefault && value == "" {
		value = req.NamespaceLabels[key]
		if value == "" {
			value = p.Spec.DefaultValue
		}
	}
	if value == "" {
		return false
	}
	changed := false
	if p.Spec.Action == policyv1alpha1.ActionDefault && own == "" {
		_ = unstructured.SetNestedField(req.Object, value, "metadata", "labels", key)
		changed = true
	}
	if !p.Spec.PropagateToPodTemplate {
		return changed
	}
	info, ok := kinds[req.Kind]
	if !ok || info.templatePath == nil || !matchesKind(p, req.Kind) {
		return changed
	}
	tmpl, found, _ := unstructured.NestedFieldNoCopy(req.Object, info.templatePath...)
	if !found {
		return changed
	}
	if req.Update && req.OldObject != nil {
		// Labelling a template that does not change anyway would roll the workload out.
		old, _, _ := unstructured.NestedFieldNoCopy(req.OldObject, info.templatePath...)
		if equality.Semantic.DeepEqual(tmpl, old) {
			return changed
		}
	}
	labelsPath := append(append([]string{}, info.templatePath...), "metadata", "labels")
	if _, has, _ := unstructured.NestedFieldNoCopy(req.Object, append(labelsPath, key)...); has {
		return changed
	}
	_ = unstructured.SetNestedField(req.Object, value, append(labelsPath, key)...)
	return true
}

func matchesKind(p *policyv1alpha1.LabelPolicy, k policyv1alpha1.Kind) bool {
	for _, m := range matchKinds(p) {
		if m == k {
			return true
		}
	}
	return false
}

func getString(obj map[string]any, path ...string) string {
	s, _, _ := unstructured.NestedString(obj, path...)
	return s
}

func getSlice(obj map[string]any, path ...string) []any {
	v, _, _ := unstructured.NestedFieldNoCopy(obj, path...)
	s, _ := v.([]any)
	return s
}
