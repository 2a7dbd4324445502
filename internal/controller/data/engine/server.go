package engine

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// ErrCredentials: the admin credentials Secret is missing or incomplete.
var ErrCredentials = errors.New("admin credentials unavailable")

// ServerFor reads a DatabaseServer's admin credentials (with reader, which should
// not be a cache: Orderly does not cache Secrets it did not create).
func ServerFor(ctx context.Context, reader client.Reader, s *datav1alpha1.DatabaseServer) (Server, error) {
	ref := s.Spec.AdminCredentialsSecretRef
	var sec corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: ref.Namespace, Name: ref.Name}, &sec); err != nil {
		return Server{}, fmt.Errorf("%w: reading Secret %s/%s: %w", ErrCredentials, ref.Namespace, ref.Name, err)
	}
	user, pass := string(sec.Data["username"]), string(sec.Data["password"])
	if user == "" || pass == "" {
		return Server{}, fmt.Errorf("%w: Secret %s/%s needs the keys username and password", ErrCredentials, ref.Namespace, ref.Name)
	}
	port := s.Spec.Port
	if port == 0 {
		port = 5432
	}
	return Server{Name: s.Name, Host: s.Spec.Host, Port: port, SSLMode: string(s.Spec.SSLMode), Username: user, Password: pass}, nil
}
