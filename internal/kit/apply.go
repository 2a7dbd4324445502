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
	_, err := ApplyStored(ctx, c, obj)
	return err
}

// ApplyStored is Apply, and returns the object as the API server stored it (its
// resourceVersion, and the fields other managers set).
func ApplyStored(ctx context.Context, c client.Client, obj client.Object) (*unstructured.Unstructured, error) {
	u, err := applyConfiguration(c, obj)
	if err != nil {
		return nil, err
	}
	if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(labels.FieldManager), client.ForceOwnership); err != nil {
		return nil, fmt.Errorf("applying %s %s: %w", u.GetKind(), client.ObjectKeyFromObject(obj), err)
	}
	return u, nil
}

// applyConfiguration is obj as an apply request: without status, creationTimestamp,
// and the identity fields (resourceVersion, uid, managedFields) a read copy carries.
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
	u.SetResourceVersion("")
	u.SetUID("")
	u.SetManagedFields(nil)
	return u, nil
}
