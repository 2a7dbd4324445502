package devcluster

import (
	"context"
	"fmt"
	"maps"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/labels"
)

// EnsureNamespace creates namespace name unless it exists.
func EnsureNamespace(ctx context.Context, c client.Client, name, fieldManager string) error {
	err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, client.FieldOwner(fieldManager))
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", name, err)
	}
	return nil
}

// SecretWrite says how WriteSecret writes a Secret.
type SecretWrite struct {
	// FieldManager owns the write.
	FieldManager string
	// Annotations are set on the Secret, beside those it has.
	Annotations map[string]string
	// NotOurs ends the error about a Secret Orderly did not create: what to do instead.
	NotOurs string
}

// WriteSecret creates or updates Secret key with data on a local cluster, creating
// its namespace when missing. A Secret that Orderly did not create (without the
// label app.kubernetes.io/managed-by: orderly) is never overwritten: it may hold
// someone's real credentials, and the error says so.
func WriteSecret(ctx context.Context, c client.Client, key client.ObjectKey, data map[string][]byte, w SecretWrite) error {
	if err := EnsureNamespace(ctx, c, key.Namespace, w.FieldManager); err != nil {
		return err
	}
	var sec corev1.Secret
	err := c.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name, Annotations: w.Annotations,
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}}, Type: corev1.SecretTypeOpaque, Data: data}
		err = c.Create(ctx, &sec, client.FieldOwner(w.FieldManager))
	case err != nil:
	case sec.Labels[labels.ManagedBy] != labels.ManagedByValue:
		return fmt.Errorf("the Secret %s exists and Orderly did not create it (no label %s=%s), so it is left alone; %s",
			key, labels.ManagedBy, labels.ManagedByValue, w.NotOurs)
	default:
		// Guarded by the resourceVersion just read.
		sec.Data = data
		if len(w.Annotations) > 0 {
			if sec.Annotations == nil {
				sec.Annotations = map[string]string{}
			}
			maps.Copy(sec.Annotations, w.Annotations)
		}
		err = c.Update(ctx, &sec, client.FieldOwner(w.FieldManager))
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s: %w", key, err)
	}
	return nil
}
