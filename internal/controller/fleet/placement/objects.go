package placement

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// maxResources bounds what one policy places.
const maxResources = 500

// selectResources reads the objects the policy's selectors match in its namespace,
// once each, sorted by kind and name.
func selectResources(ctx context.Context, r client.Reader, pp *fleetv1alpha1.PlacementPolicy) ([]*unstructured.Unstructured, error) {
	seen := map[string]bool{}
	var out []*unstructured.Unstructured
	add := func(u *unstructured.Unstructured) {
		k := objKey(u.GroupVersionKind(), u.GetName())
		if seen[k] || !u.GetDeletionTimestamp().IsZero() {
			return
		}
		seen[k] = true
		out = append(out, u)
	}
	for _, s := range pp.Spec.ResourceSelectors {
		gvk := schema.FromAPIVersionAndKind(s.APIVersion, s.Kind)
		if s.Name != "" {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(gvk)
			if err := r.Get(ctx, client.ObjectKey{Namespace: pp.Namespace, Name: s.Name}, u); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return nil, fmt.Errorf("reading %s %s: %w", s.Kind, s.Name, err)
			}
			add(u)
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(s.LabelSelector)
		if err != nil {
			return nil, fmt.Errorf("resource selector for %s: %w", s.Kind, err)
		}
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := r.List(ctx, list, client.InNamespace(pp.Namespace), client.MatchingLabelsSelector{Selector: sel}); err != nil {
			return nil, fmt.Errorf("listing %ss: %w", s.Kind, err)
		}
		for i := range list.Items {
			add(&list.Items[i])
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		if c := compareStrings(a.GetKind(), b.GetKind()); c != 0 {
			return c
		}
		return compareStrings(a.GetName(), b.GetName())
	})
	if len(out) > maxResources {
		return nil, fmt.Errorf("the resource selectors match %d objects, more than the %d one policy may place", len(out), maxResources)
	}
	return out, nil
}

func compareStrings(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// isWorkload says whether the kind has replicas that Divide splits.
func isWorkload(u *unstructured.Unstructured) bool {
	return u.GetAPIVersion() == "apps/v1" && (u.GetKind() == "Deployment" || u.GetKind() == "StatefulSet")
}

// hubReplicas is a workload's replicas on the hub (1 when unset, as the API defaults).
func hubReplicas(u *unstructured.Unstructured) int32 {
	n, found, _ := unstructured.NestedInt64(u.Object, "spec", "replicas")
	if !found {
		return 1
	}
	return int32(n)
}

// memberCopy is the object Orderly applies to a member: the hub object's spec (or
// data) and its labels and annotations, with the ownership labels, without the hub's
// identity, status and cluster-assigned fields.
func memberCopy(hub *unstructured.Unstructured, pp *fleetv1alpha1.PlacementPolicy) *unstructured.Unstructured {
	out := &unstructured.Unstructured{Object: map[string]any{}}
	for k, v := range hub.Object {
		if k == "metadata" || k == "status" {
			continue
		}
		out.Object[k] = runtimeDeepCopy(v)
	}
	out.SetAPIVersion(hub.GetAPIVersion())
	out.SetKind(hub.GetKind())
	out.SetName(hub.GetName())
	out.SetNamespace(hub.GetNamespace())
	l := map[string]string{}
	for k, v := range hub.GetLabels() {
		l[k] = v
	}
	l[labels.ManagedBy] = labels.ManagedByValue
	l[fleetv1alpha1.PolicyNamespaceLabel] = pp.Namespace
	l[fleetv1alpha1.PolicyNameLabel] = pp.Name
	l[fleetv1alpha1.PolicyUIDLabel] = string(pp.UID)
	out.SetLabels(l)
	a := map[string]string{}
	for k, v := range hub.GetAnnotations() {
		if k == "kubectl.kubernetes.io/last-applied-configuration" || k == "deployment.kubernetes.io/revision" {
			continue
		}
		a[k] = v
	}
	if len(a) > 0 {
		out.SetAnnotations(a)
	}
	if out.GetKind() == "Service" && out.GetAPIVersion() == "v1" {
		// The member assigns its own addresses.
		unstructured.RemoveNestedField(out.Object, "spec", "clusterIP")
		unstructured.RemoveNestedField(out.Object, "spec", "clusterIPs")
	}
	return out
}

func runtimeDeepCopy(v any) any {
	return (&unstructured.Unstructured{Object: map[string]any{"v": v}}).DeepCopy().Object["v"]
}

// applyOverrides applies the overrides whose clusterSelector matches the cluster's
// labels to a workload copy.
func applyOverrides(obj *unstructured.Unstructured, overrides []fleetv1alpha1.Override, clusterLabels map[string]string) error {
	if !isWorkload(obj) {
		return nil
	}
	for i, o := range overrides {
		if o.ResourceName != "" && o.ResourceName != obj.GetName() {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(&o.ClusterSelector)
		if err != nil {
			return fmt.Errorf("overrides[%d].clusterSelector: %w", i, err)
		}
		if !sel.Matches(k8slabels.Set(clusterLabels)) {
			continue
		}
		ops := make([]map[string]any, 0, len(o.Patches))
		for _, p := range o.Patches {
			op := map[string]any{"op": p.Op, "path": p.Path}
			if p.Value != nil {
				var v any
				if err := json.Unmarshal(p.Value.Raw, &v); err != nil {
					return fmt.Errorf("overrides[%d]: value of %s: %w", i, p.Path, err)
				}
				op["value"] = v
			}
			ops = append(ops, op)
		}
		raw, _ := json.Marshal(ops)
		patch, err := jsonpatch.DecodePatch(raw)
		if err != nil {
			return fmt.Errorf("overrides[%d]: %w", i, err)
		}
		doc, err := json.Marshal(obj.Object)
		if err != nil {
			return err
		}
		patched, err := patch.Apply(doc)
		if err != nil {
			return fmt.Errorf("overrides[%d] on %s %s: %w", i, obj.GetKind(), obj.GetName(), err)
		}
		m := map[string]any{}
		if err := json.Unmarshal(patched, &m); err != nil {
			return err
		}
		obj.Object = m
	}
	return nil
}
