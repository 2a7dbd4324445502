package kit

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// ErrDeleting is returned by AddFinalizer for an object that is being deleted: the
// API server accepts no new finalizers on it, and the reconcile should take the
// deletion path instead.
var ErrDeleting = errors.New("the object is being deleted")

// AddFinalizer adds finalizer to obj and writes it at once, before the reconcile
// creates anything the finalizer must clean up. The write is guarded by obj's
// resourceVersion; on a conflict obj is read again from reader and the write retried.
// Nothing is written when obj has the finalizer already. An object that is gone
// returns its NotFound error (the caller stops: client.IgnoreNotFound).
func AddFinalizer(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, finalizer string) error {
	return writeFinalizers(ctx, c, reader, obj, false, func() (bool, error) {
		if controllerutil.ContainsFinalizer(obj, finalizer) {
			return false, nil
		}
		if !obj.GetDeletionTimestamp().IsZero() {
			return false, ErrDeleting
		}
		return controllerutil.AddFinalizer(obj, finalizer), nil
	})
}

// RemoveFinalizer removes finalizer from obj and writes it, like AddFinalizer. An
// object that is gone already is not an error.
func RemoveFinalizer(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, finalizer string) error {
	return writeFinalizers(ctx, c, reader, obj, true, func() (bool, error) {
		return controllerutil.RemoveFinalizer(obj, finalizer), nil
	})
}

func writeFinalizers(ctx context.Context, c client.Client, reader client.Reader, obj client.Object, goneIsDone bool, change func() (bool, error)) error {
	for attempt := 0; ; attempt++ {
		before := obj.DeepCopyObject().(client.Object)
		changed, err := change()
		if err != nil || !changed {
			return err
		}
		err = c.Patch(ctx, obj, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}))
		if err == nil {
			return nil
		}
		if apierrors.IsConflict(err) && attempt < conflictRetries {
			err = reread(ctx, reader, obj)
		}
		switch {
		case err == nil:
			continue
		case apierrors.IsNotFound(err) && goneIsDone:
			return nil
		case apierrors.IsNotFound(err):
			return err
		}
		return fmt.Errorf("updating finalizers: %w", err)
	}
}
