package tenant

import (
	"context"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Orderly writes namespaces and the objects in them with server-side apply under its
// field manager (labels.FieldManager). The API server then records which fields are
// Orderly's, so an apply of what Orderly wants now removes what it set before and no
// longer wants, and keeps what any other writer set; Orderly keeps no bookkeeping of
// its own.
//
// Objects that do not exist yet are made with a create, not an apply: a create fails
// when the object exists, which is how Orderly tells an object it made from one made
// by someone else (an apply would silently take the other one over). The API server
// records a create's fields as an "Update" by Orderly, and an apply cannot remove
// fields that an Update entry of Orderly's still holds. So the first time such an
// object has to change, the fields of Orderly's Update entry are moved to its Apply
// entry first (what client-go's csaupgrade does for client-side apply). The same move
// takes over objects written by earlier versions of Orderly, which used create,
// update and merge patches.

// extractor returns the fields that Orderly applied to an object, as an apply
// configuration (client-go's Extract<Kind> functions).
type extractor[T client.Object] func(obj T) (any, error)

// extractWith adapts one of client-go's Extract<Kind> functions.
func extractWith[T client.Object, A any](extract func(T, string) (A, error)) extractor[T] {
	return func(obj T) (any, error) { return extract(obj, labels.FieldManager) }
}

// patchOp is one JSON patch (RFC 6902) operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// removeOp removes one key of a map under metadata (labels, annotations).
func removeOp(field, key string) patchOp {
	return patchOp{Op: "remove", Path: "/metadata/" + field + "/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(key)}
}

// foldUpdates returns a copy of obj whose managed fields count what Orderly's creates
// and updates set as applied by Orderly.
func foldUpdates[T client.Object](obj T) (T, error) {
	folded := obj.DeepCopyObject().(T)
	err := csaupgrade.UpgradeManagedFields(folded, sets.New(labels.FieldManager), labels.FieldManager)
	return folded, err
}

// orderlyFields returns the part of live that Orderly set, as an object of live's
// kind: the fields its applies own and the fields its creates and updates own, with
// their live values. A field another writer changed since is someone else's and is
// not in it.
func orderlyFields[T client.Object](live T, extract extractor[T]) (T, error) {
	var zero T
	folded, err := foldUpdates(live)
	if err != nil {
		return zero, err
	}
	applied, err := extract(folded)
	if err != nil {
		return zero, err
	}
	raw, err := json.Marshal(applied)
	if err != nil {
		return zero, err
	}
	owned := reflect.New(reflect.TypeOf(live).Elem()).Interface().(T)
	if err := json.Unmarshal(raw, owned); err != nil {
		return zero, err
	}
	return owned, nil
}

// sameFields reports whether what Orderly owns of an object is exactly desired: then
// an apply of desired would change nothing.
func sameFields[T client.Object](owned, desired T) bool {
	a, b := owned.DeepCopyObject().(T), desired.DeepCopyObject().(T)
	a.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	b.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return equality.Semantic.DeepEqual(a, b)
}

// applyOwned brings the fields Orderly owns on live to desired and reports whether
// it wrote. It writes nothing when they are desired already, so a converged reconcile
// makes no API writes (an apply that changes nothing leaves the resourceVersion as it
// is, but is still a request). Otherwise it moves Orderly's Update ownership to its
// Apply entry, together with the JSON patch operations in migrate, under live's
// resourceVersion, and then applies desired to the object live is. An object that is
// gone or was replaced meanwhile is a conflict: the next reconcile judges it afresh.
func applyOwned[T client.Object](ctx context.Context, c client.Client, live, desired T, extract extractor[T], migrate []patchOp) (bool, error) {
	owned, err := orderlyFields(live, extract)
	if err != nil {
		return false, fmt.Errorf("reading Orderly's fields: %w", err)
	}
	if len(migrate) == 0 && sameFields(owned, desired) {
		return false, nil
	}
	if err := takeOverUpdates(ctx, c, live, migrate); err != nil {
		return false, err
	}
	// live's UID makes the apply a precondition on the very object that was judged:
	// an apply would otherwise create an object that is gone, and write over one that
	// someone else put in its place.
	apply := desired.DeepCopyObject().(T)
	apply.SetUID(live.GetUID())
	return true, kit.Apply(ctx, c, apply)
}

// takeOverUpdates moves the fields of Orderly's Update entry on live to its Apply
// entry, and runs the extra operations, in one patch guarded by live's
// resourceVersion. Nothing is sent when there is nothing to do.
func takeOverUpdates[T client.Object](ctx context.Context, c client.Client, live T, extra []patchOp) error {
	var ops []patchOp
	if slices.ContainsFunc(live.GetManagedFields(), isOrderlyUpdate) {
		folded, err := foldUpdates(live)
		if err != nil {
			return err
		}
		ops = append(ops, patchOp{Op: "replace", Path: "/metadata/managedFields", Value: folded.GetManagedFields()})
	}
	ops = append(ops, extra...)
	if len(ops) == 0 {
		return nil
	}
	// Replacing the resourceVersion makes the API server refuse the patch with a
	// conflict when live is stale: the managed fields sent are live's.
	ops = append(ops, patchOp{Op: "replace", Path: "/metadata/resourceVersion", Value: live.GetResourceVersion()})
	raw, err := json.Marshal(ops)
	if err != nil {
		return err
	}
	if err := c.Patch(ctx, live, client.RawPatch(types.JSONPatchType, raw), client.FieldOwner(labels.FieldManager)); err != nil {
		return fmt.Errorf("taking over Orderly's fields of %s: %w", client.ObjectKeyFromObject(live), err)
	}
	return nil
}

// isOrderlyUpdate reports whether entry records fields Orderly set with a create, an
// update or a non-apply patch.
func isOrderlyUpdate(entry metav1.ManagedFieldsEntry) bool {
	return entry.Manager == labels.FieldManager && entry.Operation == metav1.ManagedFieldsOperationUpdate && entry.Subresource == ""
}

// metadataKeys are the label and annotation keys one field manager owns.
type metadataKeys struct {
	labels, annotations sets.Set[string]
}

// ownedByOthers returns the label and annotation keys of obj that some field manager
// other than Orderly owns. An entry that cannot be read counts as owning nothing.
func ownedByOthers(obj metav1.Object) metadataKeys {
	keys := metadataKeys{labels: sets.New[string](), annotations: sets.New[string]()}
	for _, entry := range obj.GetManagedFields() {
		if entry.Manager == labels.FieldManager || entry.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Metadata struct {
				Labels      map[string]json.RawMessage `json:"f:labels"`
				Annotations map[string]json.RawMessage `json:"f:annotations"`
			} `json:"f:metadata"`
		}
		if json.Unmarshal(entry.FieldsV1.GetRawBytes(), &fields) != nil {
			continue
		}
		for k := range fields.Metadata.Labels {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				keys.labels.Insert(key)
			}
		}
		for k := range fields.Metadata.Annotations {
			if key, ok := strings.CutPrefix(k, "f:"); ok {
				keys.annotations.Insert(key)
			}
		}
	}
	return keys
}
