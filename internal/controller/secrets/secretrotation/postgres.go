package secretrotation

import (
	"context"
	"errors"
	"fmt"
	"strconv"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/postgres"
)

// roleRotator is what the postgresRole generator needs of an engine.
type roleRotator interface {
	SetRotatingRole(ctx context.Context, r postgres.RotatingRole) error
	DisableLogin(ctx context.Context, name, ownerUID string) error
}

// Keys of the Secret the postgresRole generator writes.
const (
	keyUsername = "username"
	keyPassword = "password"
	keyHost     = "host"
	keyPort     = "port"
)

// rolePair returns the two login roles of base, and which one a rotation from
// active switches to.
func rolePair(base, active string) (next string) {
	if active == base+"_a" {
		return base + "_b"
	}
	return base + "_a"
}

// serverRotator is the engine of a postgresRole generator's DatabaseServer.
type serverRotator struct {
	roleRotator
	// server is where the roles are: the Secret's host and port.
	server database.Server
	// scrub keeps the server's credentials out of what the SecretRotation's status
	// says of its errors.
	scrub database.Scrubber
}

// rotator connects to the DatabaseServer a postgresRole generator names, after
// checking that the server lets this namespace use it. Problems are reported on m.
func (r *Reconciler) rotator(ctx context.Context, m *machine) (*serverRotator, error) {
	g := m.spec().Generator.PostgresRole
	fail := func(reason, msg string, err error) (*serverRotator, error) {
		m.problem = &problem{reason, msg}
		if err == nil {
			err = errors.New(msg)
		}
		return nil, err
	}
	if r.Databases == nil {
		return fail(ReasonServerFailed, "the manager has no database connector", nil)
	}
	var s datav1alpha1.DatabaseServer
	if err := r.APIReader.Get(ctx, client.ObjectKey{Name: g.ServerRef}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return fail(ReasonServerNotFound, fmt.Sprintf("DatabaseServer %q does not exist; create it or correct spec.generator.postgresRole.serverRef", g.ServerRef), nil)
		}
		return fail(ReasonServerFailed, fmt.Sprintf("reading DatabaseServer %s: %v", g.ServerRef, err), err)
	}
	if err := database.AdmitNamespace(ctx, r.APIReader, &s, m.sr.Namespace, r.Namespace); err != nil {
		if errors.Is(err, database.ErrNamespaceNotAllowed) {
			return fail(ReasonServerNotAllowed, err.Error(), nil)
		}
		return fail(ReasonServerFailed, err.Error(), err)
	}
	// Neither the admin's credentials nor its Secret's name goes into the status.
	srv, err := database.ServerFor(ctx, r.APIReader, &s, r.Namespace)
	scrub := database.ScrubberFor(srv).OfServer(&s)
	if err != nil {
		return fail(ReasonServerFailed, scrub.Error(err).Error(), err)
	}
	e, err := r.Databases.Connect(ctx, string(s.Spec.Engine), srv)
	if err != nil {
		return fail(ReasonServerFailed, scrub.Error(err).Error(), err)
	}
	rot, ok := e.(roleRotator)
	if !ok {
		return fail(ReasonServerFailed, fmt.Sprintf("the engine of DatabaseServer %s cannot rotate roles", s.Name), nil)
	}
	return &serverRotator{roleRotator: rot, server: srv, scrub: scrub}, nil
}

// generatePostgres sets a new password on the inactive login role and returns the
// Secret's data for it. The role that the Secret holds now is not touched: its
// consumers keep working until they have rolled and the grace period is over.
func (r *Reconciler) generatePostgres(ctx context.Context, m *machine) (map[string][]byte, error) {
	g := m.spec().Generator.PostgresRole
	rot, err := r.rotator(ctx, m)
	if err != nil {
		return nil, err
	}
	to := rolePair(g.Role, m.st.Rotation.FromRole)
	password := database.Password()
	if err := rot.SetRotatingRole(ctx, postgres.RotatingRole{Name: to, OwnerUID: string(m.sr.UID), Namespace: m.sr.Namespace,
		Password: password, GrantRoles: g.GrantRoles}); err != nil {
		m.problem = &problem{ReasonServerFailed, rot.scrub.Error(err).Error()}
		return nil, err
	}
	m.st.Rotation.ToRole = to
	return map[string][]byte{keyUsername: []byte(to), keyPassword: []byte(password), keyHost: []byte(rot.server.Host),
		keyPort: []byte(strconv.Itoa(int(rot.server.Port)))}, nil
}

// revokePostgres takes the login away from the previous role (NOLOGIN, no
// password); nothing for other generators.
func (r *Reconciler) revokePostgres(ctx context.Context, m *machine) error {
	rotation := m.st.Rotation
	if m.spec().Generator.PostgresRole == nil || rotation.FromRole == "" || rotation.FromRole == m.st.ActiveRole {
		return nil
	}
	return r.disable(ctx, m, rotation.FromRole)
}

// disable takes the login away from one of the SecretRotation's roles.
func (r *Reconciler) disable(ctx context.Context, m *machine, role string) error {
	rot, err := r.rotator(ctx, m)
	if err != nil {
		return err
	}
	if err := rot.DisableLogin(ctx, role, string(m.sr.UID)); err != nil {
		m.problem = &problem{ReasonServerFailed, rot.scrub.Error(err).Error()}
		return err
	}
	return nil
}
