package kit

import (
	"context"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// conflictRetries is how often a write that lost an optimistic lock is tried again
// on the latest version before the conflict is returned.
const conflictRetries = 3

// PatchStatus writes the status that compute sets on obj, when it differs from what
// obj holds, as a merge patch guarded by obj's resourceVersion: a status computed
// from a stale cached copy never overwrites a newer one.
//
// compute must derive the status from the object it is given and from what this
// reconcile observed, never from the copy the reconcile started with: on a conflict
// PatchStatus reads the latest version from reader (the API server, not the cache)
// and calls compute again on it. When the latest version has another generation (the
// spec changed) or is gone, nothing is written and nil is returned: the reconcile the
// spec change triggers reports afresh. After conflictRetries conflicts the conflict
// is returned, and the controller's backoff retries.
//
// On return obj holds the status compute set last, written or not.
func PatchStatus[T client.Object](ctx context.Context, c client.Client, reader client.Reader, obj T, compute func(T)) error {
	_, err := PatchStatusReplacing(ctx, c, reader, obj, compute)
	return err
}

// PatchStatusReplacing is PatchStatus that also returns the version of obj whose
// status the write replaced, so that the caller can send Events for the transitions
// it made; it is the zero T (nil) when nothing was written.
func PatchStatusReplacing[T client.Object](ctx context.Context, c client.Client, reader client.Reader, obj T, compute func(T)) (T, error) {
	var none T
	generation := obj.GetGeneration()
	for attempt := 0; ; attempt++ {
		before := obj.DeepCopyObject().(T)
		compute(obj)
		if equality.Semantic.DeepEqual(before, obj) {
			return none, nil
		}
		err := c.Status().Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		switch {
		case err == nil:
			return before, nil
		case apierrors.IsNotFound(err):
			return none, nil
		case !apierrors.IsConflict(err) || attempt >= conflictRetries:
			return none, fmt.Errorf("updating status: %w", err)
		}
		if err := reread(ctx, reader, obj); err != nil {
			if apierrors.IsNotFound(err) {
				return none, nil
			}
			return none, fmt.Errorf("updating status: %w", err)
		}
		if obj.GetGeneration() != generation {
			return none, nil
		}
	}
}

// reread replaces obj with the version reader holds; obj is left as it was when the
// read fails. The read goes into a new object: decoding into a used one would keep
// fields that the latest version no longer has.
func reread(ctx context.Context, reader client.Reader, obj client.Object) error {
	v := reflect.ValueOf(obj).Elem()
	fresh := reflect.New(v.Type())
	if err := reader.Get(ctx, client.ObjectKeyFromObject(obj), fresh.Interface().(client.Object)); err != nil {
		return err
	}
	v.Set(fresh.Elem())
	return nil
}
