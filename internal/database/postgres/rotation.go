package postgres

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/jackc/pgx/v5"

	"orderly.dev/orderly/internal/database"
)

// The alternating login roles of a SecretRotation's postgresRole generator.
//
// Each of the two roles (<base>_a, <base>_b) carries a comment naming the
// SecretRotation it belongs to (rotationMarkerPrefix + UID), set when Orderly creates
// it: a role of that name without the marker is someone else's and is never
// touched. Roles are never dropped (a consumer may still hold a session); the
// inactive one is NOLOGIN with no password.
//
// The roles they are granted (grantRoles) are the dangerous part: membership hands
// over privileges. A namespace user writes the SecretRotation, so a grant role must
// say itself which namespaces may be given it (its comment, set by whoever
// administers the role), and must confer nothing beyond plain privileges: no
// superuser, CREATEROLE, CREATEDB, REPLICATION or BYPASSRLS, no pg_* role, not the
// admin, directly or through its own memberships.

// rotationMarkerPrefix starts the comment of a rotating login role; the
// SecretRotation's UID follows.
const rotationMarkerPrefix = "orderly.dev/rotation-owner-uid="

// GrantablePrefix starts the comment of a role that SecretRotations in the listed
// namespaces may grant: "orderly.dev/grantable-to=payments,orders".
const GrantablePrefix = "orderly.dev/grantable-to="

// ErrGrantNotAllowed: a grant role does not exist, is not grantable to the
// namespace, or confers more than plain privileges.
var ErrGrantNotAllowed = errors.New("role may not be granted")

// RotatingRole is one of a SecretRotation's two login roles.
type RotatingRole struct {
	// Name of the role (<base>_a or <base>_b).
	Name string
	// OwnerUID is the SecretRotation's UID, marked on the role.
	OwnerUID string
	// Namespace is the SecretRotation's namespace, which every grant role must allow.
	Namespace string
	// Password is set as a SCRAM verifier (the password never reaches the server).
	Password string
	// GrantRoles are the roles the login role is a member of (its grants).
	GrantRoles []string
}

// SetRotatingRole makes role a login role with the new password and exactly the
// memberships in GrantRoles, creating it (marked) when missing. A role of that name
// that is not the SecretRotation's fails with ErrNotOwned; a grant role that may not
// be given fails with ErrGrantNotAllowed, before anything changes.
func (p *Postgres) SetRotatingRole(ctx context.Context, r RotatingRole) error {
	if err := p.checkGrants(ctx, r.Namespace, r.GrantRoles); err != nil {
		return err
	}
	st, err := p.role(ctx, r.Name)
	if err != nil {
		return err
	}
	marker := rotationMarkerPrefix + r.OwnerUID
	if st.exists && st.comment != marker {
		return fmt.Errorf("role %s %w", r.Name, database.ErrNotOwned)
	}
	verifier, err := scramVerifier(r.Password)
	if err != nil {
		return err
	}
	id := ident(r.Name)
	stmts := []string{}
	if !st.exists {
		// Role and marker in one transaction: a role of this name without the marker
		// can only be someone else's.
		stmts = append(stmts, "CREATE ROLE "+id+" NOLOGIN NOINHERIT", "COMMENT ON ROLE "+id+" IS "+literal(marker))
	}
	have, err := p.memberships(ctx, r.Name)
	if err != nil {
		return err
	}
	for _, g := range r.GrantRoles {
		if !slices.Contains(have, g) {
			stmts = append(stmts, "GRANT "+ident(g)+" TO "+id)
		}
	}
	for _, g := range have {
		if !slices.Contains(r.GrantRoles, g) {
			stmts = append(stmts, "REVOKE "+ident(g)+" FROM "+id)
		}
	}
	// INHERIT only once the grants are exactly those asked for.
	stmts = append(stmts, "ALTER ROLE "+id+" INHERIT LOGIN PASSWORD "+literal(verifier))
	return p.inTransaction(ctx, "setting the rotating role's password", stmts)
}

// DisableLogin takes the login away from a SecretRotation's role (NOLOGIN, no
// password): its sessions end when their clients disconnect, and no new login
// works. A role that does not exist is not an error; one that is not the
// SecretRotation's fails with ErrNotOwned.
func (p *Postgres) DisableLogin(ctx context.Context, name, ownerUID string) error {
	st, err := p.role(ctx, name)
	if err != nil || !st.exists {
		return err
	}
	if st.comment != rotationMarkerPrefix+ownerUID {
		return fmt.Errorf("role %s %w", name, database.ErrNotOwned)
	}
	return p.exec(ctx, 1, "disabling the role's login", "ALTER ROLE "+ident(name)+" NOLOGIN PASSWORD NULL")
}

// memberships lists the roles name is a direct member of.
func (p *Postgres) memberships(ctx context.Context, name string) ([]string, error) {
	ctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	rows, err := p.pool.Query(ctx, `SELECT g.rolname FROM pg_auth_members m JOIN pg_roles g ON g.oid = m.roleid
		JOIN pg_roles r ON r.oid = m.member WHERE r.rolname = $1 ORDER BY 1`, name)
	if err != nil {
		return nil, p.classify(err, "listing the role's memberships")
	}
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	return out, p.classify(err, "listing the role's memberships")
}

// checkGrants refuses grant roles that do not exist, are not grantable to namespace
// (their comment), or confer more than plain privileges, themselves or through the
// roles they are members of.
func (p *Postgres) checkGrants(ctx context.Context, namespace string, grants []string) error {
	if len(grants) == 0 {
		return nil
	}
	ctx, cancel := p.timeouts.Deadline(ctx, 1)
	defer cancel()
	rows, err := p.pool.Query(ctx, `SELECT g.rolname, coalesce(shobj_description(g.oid, 'pg_authid'), ''),
		EXISTS (SELECT 1 FROM pg_roles x WHERE pg_has_role(g.oid, x.oid, 'MEMBER') AND
			(x.rolsuper OR x.rolcreaterole OR x.rolcreatedb OR x.rolreplication OR x.rolbypassrls
			 OR starts_with(x.rolname, 'pg_') OR x.rolname = current_user))
		FROM pg_roles g WHERE g.rolname = ANY($1)`, grants)
	if err != nil {
		return p.classify(err, "checking the grant roles")
	}
	type grant struct {
		name, comment string
		privileged    bool
	}
	found, err := pgx.CollectRows(rows, func(row pgx.CollectableRow) (grant, error) {
		var g grant
		err := row.Scan(&g.name, &g.comment, &g.privileged)
		return g, err
	})
	if err != nil {
		return p.classify(err, "checking the grant roles")
	}
	for _, want := range grants {
		i := slices.IndexFunc(found, func(g grant) bool { return g.name == want })
		switch {
		case i < 0:
			return fmt.Errorf("%w: role %s does not exist", ErrGrantNotAllowed, want)
		case found[i].privileged:
			return fmt.Errorf("%w: role %s confers more than plain privileges (superuser, CREATEROLE, CREATEDB, REPLICATION, BYPASSRLS, a pg_* role or the admin)", ErrGrantNotAllowed, want)
		case !grantableTo(found[i].comment, namespace):
			return fmt.Errorf("%w: role %s is not grantable to namespace %s (its comment must be %s<namespaces>)", ErrGrantNotAllowed, want, namespace, GrantablePrefix)
		}
	}
	return nil
}

// grantableTo says whether a role's comment lets namespace grant it.
func grantableTo(comment, namespace string) bool {
	list, ok := strings.CutPrefix(comment, GrantablePrefix)
	if !ok {
		return false
	}
	for n := range strings.SplitSeq(list, ",") {
		if n = strings.TrimSpace(n); n != "" && n == namespace {
			return true
		}
	}
	return false
}

// inTransaction runs stmts in one transaction, within the deadline of as many
// statements.
func (p *Postgres) inTransaction(ctx context.Context, what string, stmts []string) error {
	ctx, cancel := p.timeouts.Deadline(ctx, len(stmts)+1)
	defer cancel()
	err := pgx.BeginFunc(ctx, p.pool, func(tx pgx.Tx) error {
		for _, s := range stmts {
			if _, err := tx.Exec(ctx, s); err != nil {
				return err
			}
		}
		return nil
	})
	return p.classify(err, what)
}
