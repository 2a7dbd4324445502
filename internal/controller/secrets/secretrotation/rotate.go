package secretrotation

import (
	"context"
	"fmt"
	"time"

	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// RotateNow asks for a rotation of the SecretRotation key now, by setting
// spec.rotateNow to a new token (the time, in nanoseconds), and returns the token.
// On a Held rotation it resumes the rollout instead.
func RotateNow(ctx context.Context, c client.Client, key client.ObjectKey, now time.Time) (string, error) {
	var token string
	// The controller's status writes move the resourceVersion too, so a conflict
	// is expected now and then: read again and retry.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		var sr secretsv1alpha1.SecretRotation
		if err := c.Get(ctx, key, &sr); err != nil {
			return err
		}
		token = now.UTC().Format("20060102T150405.000000000Z")
		if token == sr.Spec.RotateNow {
			token += "-1"
		}
		before := sr.DeepCopy()
		sr.Spec.RotateNow = token
		return c.Patch(ctx, &sr, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{}), client.FieldOwner(labels.FieldManager))
	})
	if err != nil {
		return "", fmt.Errorf("requesting a rotation of SecretRotation %s: %w", key, err)
	}
	return token, nil
}
