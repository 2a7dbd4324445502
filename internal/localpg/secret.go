package localpg

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/labels"
)

// WriteAdminSecret creates or updates the Secret key with the superuser's username
// (Admin) and password, in the form a DatabaseServer's adminCredentialsSecretRef
// reads, creating its namespace when missing. A Secret that Orderly did not create
// (without the label app.kubernetes.io/managed-by: orderly) is never overwritten:
// it may hold someone's real credentials.
func WriteAdminSecret(ctx context.Context, c client.Client, key client.ObjectKey, password string) error {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: key.Namespace}}
	if err := c.Create(ctx, ns, client.FieldOwner(labels.FieldManager)); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", key.Namespace, err)
	}
	data := map[string][]byte{"username": []byte(Admin), "password": []byte(password)}
	var sec corev1.Secret
	err := c.Get(ctx, key, &sec)
	switch {
	case apierrors.IsNotFound(err):
		sec = corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name,
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue}}, Type: corev1.SecretTypeOpaque, Data: data}
		err = c.Create(ctx, &sec, client.FieldOwner(labels.FieldManager))
	case err != nil:
	case sec.Labels[labels.ManagedBy] != labels.ManagedByValue:
		return fmt.Errorf("the Secret %s exists and Orderly did not create it (no label %s=%s), so it is left alone; choose another Secret",
			key, labels.ManagedBy, labels.ManagedByValue)
	default:
		// Guarded by the resourceVersion just read.
		sec.Data = data
		err = c.Update(ctx, &sec, client.FieldOwner(labels.FieldManager))
	}
	if err != nil {
		return fmt.Errorf("writing Secret %s: %w", key, err)
	}
	return nil
}
