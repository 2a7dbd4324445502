package database

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

var (
	// ErrCredentials: the admin credentials (or CA) Secret is missing or incomplete.
	ErrCredentials = errors.New("admin credentials unavailable")
	// ErrCredentialsNotAllowed: a DatabaseServer names a Secret outside the
	// manager's namespace. The Secret is not read: whoever may create a
	// DatabaseServer must not be able to have Orderly read any Secret and send it to
	// a host of their choosing.
	ErrCredentialsNotAllowed = errors.New("secret not allowed")
)

// CAKey is the key of the CA Secret that holds the PEM certificates.
const CAKey = "ca.crt"

// ServerFor reads a DatabaseServer's admin credentials, and its CA when it names
// one, from the manager's namespace (with reader, which should not be a cache:
// Orderly does not cache Secrets it did not create). A reference to another
// namespace fails with ErrCredentialsNotAllowed before anything is read, as does
// an empty managerNamespace.
func ServerFor(ctx context.Context, reader client.Reader, s *datav1alpha1.DatabaseServer, managerNamespace string) (Server, error) {
	sec, err := readSecret(ctx, reader, "adminCredentialsSecretRef", s.Spec.AdminCredentialsSecretRef, managerNamespace)
	if err != nil {
		return Server{}, err
	}
	user, pass := string(sec.Data["username"]), string(sec.Data["password"])
	if user == "" || pass == "" {
		return Server{}, fmt.Errorf("%w: Secret %s/%s needs the keys username and password", ErrCredentials, sec.Namespace, sec.Name)
	}
	port := s.Spec.Port
	if port == 0 {
		port = datav1alpha1.DefaultPort(s.Spec.Engine)
	}
	srv := Server{Name: s.Name, Engine: string(s.Spec.Engine), Host: s.Spec.Host, Port: port, SSLMode: string(s.Spec.SSLMode), Username: user, Password: pass}
	if ref := s.Spec.CASecretRef; ref != nil {
		ca, err := readSecret(ctx, reader, "caSecretRef", *ref, managerNamespace)
		if err != nil {
			return Server{}, err
		}
		srv.CACert = ca.Data[CAKey]
		if roots, _ := RootCAs(srv.CACert); roots == nil {
			return Server{}, fmt.Errorf("%w: Secret %s/%s needs the key %s with PEM certificates", ErrCredentials, ca.Namespace, ca.Name, CAKey)
		}
	}
	return srv, nil
}

// readSecret reads the Secret ref (the field called field) names, from the
// manager's namespace only.
func readSecret(ctx context.Context, reader client.Reader, field string, ref datav1alpha1.SecretReference, managerNamespace string) (*corev1.Secret, error) {
	if managerNamespace == "" {
		return nil, fmt.Errorf("%w: the manager's namespace is not known, so no Secret is read", ErrCredentialsNotAllowed)
	}
	if ref.Namespace != "" && ref.Namespace != managerNamespace {
		return nil, fmt.Errorf("%w: %s names namespace %s, but Orderly reads a DatabaseServer's Secrets only from its own namespace %s; put the Secret there and set namespace to %s (or leave it unset)",
			ErrCredentialsNotAllowed, field, ref.Namespace, managerNamespace, managerNamespace)
	}
	var sec corev1.Secret
	if err := reader.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: ref.Name}, &sec); err != nil {
		return nil, fmt.Errorf("%w: reading Secret %s/%s (%s): %w", ErrCredentials, managerNamespace, ref.Name, field, err)
	}
	return &sec, nil
}

// Engines is the Connector of a manager that serves several engines: it hands each
// DatabaseServer to the Connector of its spec.engine (postgres when unset).
type Engines map[string]Connector

var _ Connector = Engines(nil)

// ErrEngineUnsupported: no Connector serves the DatabaseServer's engine.
var ErrEngineUnsupported = errors.New("engine not supported")

// Connect connects through the Connector of kind.
func (m Engines) Connect(ctx context.Context, kind string, s Server) (Engine, error) {
	if kind == "" {
		kind = string(datav1alpha1.EnginePostgres)
	}
	c, ok := m[kind]
	if !ok {
		return nil, fmt.Errorf("%w: %q (this manager serves %s)", ErrEngineUnsupported, kind, strings.Join(slices.Sorted(maps.Keys(m)), ", "))
	}
	return c.Connect(ctx, kind, s)
}

// Forget forgets the server called name in every engine's Connector: its engine
// is not known any more once it is deleted.
func (m Engines) Forget(name string) {
	for _, c := range m {
		c.Forget(name)
	}
}

// Close closes every engine's Connector that can be closed.
func (m Engines) Close() {
	for _, c := range m {
		if cl, ok := c.(interface{ Close() }); ok {
			cl.Close()
		}
	}
}

// MySQLUserMax is the longest user name MySQL takes (MariaDB's limit, 80, is longer).
const MySQLUserMax = 32

// NamesFor is Names for a server of engine kind. On mysql the user name must fit
// MySQL's 32 characters: "orderly_" and 24 hex digits of the SHA-256 of the UID
// (96 bits; a hash rather than a cut, so that UIDs that share a prefix get
// different users). The database keeps its name, within the 64 characters both
// allow. Deterministic, like Names, and for postgres exactly Names, so that the
// names of databases made before stay what they were.
func NamesFor(kind, uid string) (database, role string) {
	database, role = Names(uid)
	if kind == string(datav1alpha1.EngineMySQL) {
		sum := sha256.Sum256([]byte(strings.ReplaceAll(strings.ToLower(uid), "-", "")))
		role = "orderly_" + hex.EncodeToString(sum[:])[:MySQLUserMax-len("orderly_")]
	}
	return database, role
}

// MySQLUserPrefix starts the names of a DevDatabase's extra users (spec.users) on
// mysql servers; main users start with "orderly_", so neither is ever the other.
const MySQLUserPrefix = "ou_"

// UserRoleFor is UserRole for a server of engine kind. On mysql the name must fit
// MySQL's 32 characters: "ou_", 12 hex digits of the SHA-256 of the UID (as in
// NamesFor), '_' and the user's name with '-' as '_' (at most 16): 32 at most.
// Names have no '_' of their own (spec.users[].name is [a-z0-9-]), so the user's
// name is read back exactly from the role. For postgres exactly UserRole.
func UserRoleFor(kind, uid, name string) string {
	if kind != string(datav1alpha1.EngineMySQL) {
		return UserRole(uid, name)
	}
	sum := sha256.Sum256([]byte(strings.ReplaceAll(strings.ToLower(uid), "-", "")))
	return MySQLUserPrefix + hex.EncodeToString(sum[:])[:12] + "_" + strings.ReplaceAll(name, "-", "_")
}
