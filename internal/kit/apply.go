package kit

import (
	"context"
	"fmt"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/labels"
)

// Apply writes obj with server-side apply under Orderly's field manager
// (labels.FieldManager), taking over the fields it sets from other managers.
//
// obj declares the whole of what Orderly wants of the object: the fields Orderly set
// before and leaves out now are removed, and fields other managers set are kept. So
// build obj with only the fields Orderly decides (its status, and an empty
// creationTimestamp, are never sent). obj's kind is looked up in c's scheme.
func Apply(ctx context.Context, c client.Client, obj client.Object) error {
	u, err := applyConfiguration(c, obj)
	if err != nil {
		return err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(labels.FieldManager), client.ForceOwnership); err != nil {
		return fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return nil
}

func applyConfiguration(c client.Client, obj client.Object) (*unstructured.Unstructured, error) {
	gvk, err := c.GroupVersionKindFor(obj)
	if err != nil {
		return nil, err
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}
