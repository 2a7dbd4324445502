package devdatabase

import (
	"context"
	"fmt"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// Extension is what Extend did.
type Extension struct {
	// TTL is the DevDatabase's new spec.ttl and ExpiresAt the expiry it gives.
	TTL       time.Duration
	ExpiresAt time.Time
	// ServerMissing is true when the DatabaseServer does not exist, so that its
	// maxTTL could not be checked. That is safe: a DevDatabase without its server
	// has no database, and the controller refuses the ttl (TTLTooLong) if a server
	// with a lower maxTTL appears.
	ServerMissing bool
}

// Extend pushes the expiry of the DevDatabase key later by `by`, by raising its
// spec.ttl: counted from its current expiry, or from now when it has expired
// already (which brings a new, empty database). A ttl longer than the
// DatabaseServer's maxTTL is refused, by the rule the controller applies.
//
// The DatabaseServer is read for its maxTTL, and an error reading it (Forbidden,
// say) is returned rather than skipping the check. The write is guarded by the
// resourceVersion read, so a concurrent change is never silently overwritten.
func Extend(ctx context.Context, c client.Client, key client.ObjectKey, by time.Duration, now time.Time) (Extension, error) {
	if by <= 0 {
		return Extension{}, fmt.Errorf("an extension must be positive, not %s", by)
	}
	var ext Extension
	// A conflict means the DevDatabase changed since it was read (the controller's
	// own status writes do that too): read it again and extend from what is there
	// now, so a concurrent change is built on rather than overwritten.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var err error
		ext, err = extendOnce(ctx, c, key, by, now)
		return err
	})
	return ext, err
}

func extendOnce(ctx context.Context, c client.Client, key client.ObjectKey, by time.Duration, now time.Time) (Extension, error) {
	var d datav1alpha1.DevDatabase
	if err := c.Get(ctx, key, &d); err != nil {
		return Extension{}, fmt.Errorf("reading DevDatabase %s: %w", key, err)
	}
	ext := Extension{TTL: extendedTTL(&d, by, now)}
	var s datav1alpha1.DatabaseServer
	err := c.Get(ctx, client.ObjectKey{Name: d.Spec.ServerRef}, &s)
	switch {
	case apierrors.IsNotFound(err):
		ext.ServerMissing = true
	case apierrors.IsForbidden(err):
		return Extension{}, fmt.Errorf("reading DatabaseServer %s to check its maxTTL (this needs get on databaseservers.data.orderly.dev): %w", d.Spec.ServerRef, err)
	case err != nil:
		return Extension{}, fmt.Errorf("reading DatabaseServer %s to check its maxTTL: %w", d.Spec.ServerRef, err)
	case ttlTooLong(&s, ext.TTL):
		return Extension{}, fmt.Errorf("a ttl of %s would exceed DatabaseServer %s's maxTTL of %s; the latest possible expiry is %s",
			ext.TTL, s.Name, s.Spec.MaxTTL.Duration, d.CreationTimestamp.Add(s.Spec.MaxTTL.Duration).UTC().Format(time.RFC3339))
	}
	patch := client.MergeFromWithOptions(d.DeepCopy(), client.MergeFromWithOptimisticLock{})
	d.Spec.TTL = metav1.Duration{Duration: ext.TTL}
	if err := c.Patch(ctx, &d, patch); err != nil {
		if apierrors.IsConflict(err) {
			return Extension{}, err // retried by Extend, unwrapped so that it is recognised
		}
		return Extension{}, fmt.Errorf("extending DevDatabase %s: %w", key, err)
	}
	ext.ExpiresAt = expiresAt(&d)
	return ext, nil
}

// extendedTTL is the ttl that moves d's expiry by `by` from the later of its
// current expiry and now.
func extendedTTL(d *datav1alpha1.DevDatabase, by time.Duration, now time.Time) time.Duration {
	base := expiresAt(d)
	if now.After(base) {
		base = now
	}
	return base.Add(by).Sub(d.CreationTimestamp.Time).Round(time.Second)
}
