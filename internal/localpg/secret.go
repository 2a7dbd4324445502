package localpg

import (
	"context"

	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/labels"
)

// WriteAdminSecret creates or updates the Secret key with the superuser's username
// (Admin) and password, in the form a DatabaseServer's adminCredentialsSecretRef
// reads, creating its namespace when missing. A Secret that Orderly did not create
// (without the label app.kubernetes.io/managed-by: orderly) is never overwritten:
// it may hold someone's real credentials.
func WriteAdminSecret(ctx context.Context, c client.Client, key client.ObjectKey, password string) error {
	return devcluster.WriteSecret(ctx, c, key, map[string][]byte{"username": []byte(Admin), "password": []byte(password)},
		devcluster.SecretWrite{FieldManager: labels.FieldManager, NotOurs: "choose another Secret"})
}
