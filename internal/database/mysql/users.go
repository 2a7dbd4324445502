package mysql

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"orderly.dev/orderly/internal/database"
)

// A DevDatabase's extra users (spec.users) are MySQL users named by
// database.UserRoleFor (ou_<12 hex of the uid's hash>_<name>), made by the admin and
// recorded, like the main user, in orderly.owners (kind user, the DevDatabase's
// uid) before they are created, so that a user with such a name and no record is
// someone else's and is never altered or dropped. The record's state is "creating"
// until the user's privileges are granted, then its access (ReadOnly or
// ReadWrite): a record whose state is not the access asked for means the grants
// are not done (a crash, a change of access), so they are done again, after
// revoking whatever the user had on the database and, on a change of access,
// ending the user's sessions (MySQL applies database privileges to a session at
// its next USE only).
//
// The privileges are granted on the database only (GrantTarget, with _ and %
// escaped), never globally and never WITH GRANT OPTION; a database-level grant
// covers the tables made later, as PostgreSQL's default privileges do:
//
//	ReadOnly:  SELECT, SHOW VIEW
//	ReadWrite: SELECT, INSERT, UPDATE, DELETE, SHOW VIEW
//
// Their passwords are set as the main user's (a hash on MariaDB). MySQL has no
// VALID UNTIL: like the main user, they end with the database's drop.

// stateUserCreating is an extra user's record before its privileges are granted.
const stateUserCreating = "creating"

// errNoSuchGrant: REVOKE of privileges the user does not hold.
const errNoSuchGrant = 1141

// privileges are what each access is granted on the database.
func privileges(a database.Access) string {
	if a == database.ReadWrite {
		return "SELECT, INSERT, UPDATE, DELETE, SHOW VIEW"
	}
	return "SELECT, SHOW VIEW"
}

// userNameOf is the spec.users name of an extra user's role (UserRoleFor backwards).
func userNameOf(role string) string {
	rest := strings.TrimPrefix(role, database.MySQLUserPrefix)
	if _, name, ok := strings.Cut(rest, "_"); ok {
		return strings.ReplaceAll(name, "_", "-")
	}
	return role
}

// extraUsers lists the records of db's owner's extra users: role to state.
func (m *MySQL) extraUsers(ctx context.Context, db database.Database) (map[string]string, error) {
	qctx, cancel := m.timeouts.Deadline(ctx, 1)
	defer cancel()
	rows, err := m.pool.db.QueryContext(qctx, "SELECT name, state FROM "+Ident(Schema)+".owners WHERE kind = ? AND owner_uid = ? AND name <> ?",
		kindUser, db.OwnerUID, db.Role)
	if err != nil {
		return nil, m.classify(err, "listing the database's users")
	}
	defer func() { _ = rows.Close() }()
	out := map[string]string{}
	for rows.Next() {
		var name, state string
		if err := rows.Scan(&name, &state); err != nil {
			return nil, m.classify(err, "listing the database's users")
		}
		out[name] = state
	}
	return out, m.classify(rows.Err(), "listing the database's users")
}

// ensureUsers makes db's extra users exactly db.Users and returns the names of
// those it dropped. Called once db's database is granted to its main user.
func (m *MySQL) ensureUsers(ctx context.Context, db database.Database) ([]string, error) {
	have, err := m.extraUsers(ctx, db)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, u := range db.Users {
		want[u.Role] = true
		if err := m.ensureUser(ctx, db, u); err != nil {
			return nil, err
		}
	}
	var unlisted []string
	for role := range have {
		if !want[role] {
			unlisted = append(unlisted, role)
		}
	}
	slices.Sort(unlisted)
	if len(unlisted) == 0 {
		return nil, nil
	}
	_, err = m.dropUsers(ctx, db, unlisted)
	dropped := make([]string, 0, len(unlisted))
	if err == nil {
		for _, role := range unlisted {
			dropped = append(dropped, userNameOf(role))
		}
	}
	return dropped, err
}

// ensureUser records, creates, keeps the password of and grants one extra user.
func (m *MySQL) ensureUser(ctx context.Context, db database.Database, u database.User) error {
	rec, err := m.record(ctx, kindUser, u.Role)
	if err != nil {
		return err
	}
	exists, err := m.userExists(ctx, u.Role)
	if err != nil {
		return err
	}
	switch {
	case rec.exists && rec.owner != db.OwnerUID, !rec.exists && exists:
		return fmt.Errorf("user %s %w", u.Role, database.ErrNotOwned)
	case !rec.exists:
		if rec, err = m.claim(ctx, kindUser, u.Role, db.OwnerUID, stateUserCreating); err != nil {
			return err
		}
		if rec.owner != db.OwnerUID {
			return fmt.Errorf("user %s %w", u.Role, database.ErrNotOwned)
		}
	}
	spec := userSpec(u.Role)
	if !exists || u.SetPassword {
		flavor, err := m.flavor(ctx)
		if err != nil {
			return err
		}
		stmt, what := "CREATE USER ", "creating user "+u.Name
		if exists {
			stmt, what = "ALTER USER ", "setting user "+u.Name+"'s password"
		}
		if err := m.exec(ctx, what, stmt+spec+" "+identifiedBy(flavor, u.Password)); err != nil {
			return err
		}
	}
	if rec.state == string(u.Access) {
		return nil
	}
	if exists && rec.state != stateUserCreating {
		// MySQL applies a change of database privileges to a session at its next
		// USE only: the user's sessions are ended, so that none keeps the old access
		// (a ReadWrite made ReadOnly could write on otherwise).
		if _, err := m.kill(ctx, "USER = ?", u.Role); err != nil {
			return err
		}
	}
	// Revoked first, so that a change of access leaves nothing of the old one.
	err = m.exec(ctx, "revoking user "+u.Name+"'s privileges", "REVOKE ALL PRIVILEGES ON "+GrantTarget(db.Name)+".* FROM "+spec)
	if err != nil && errNumber(err) != errNoSuchGrant {
		return err
	}
	if err := m.exec(ctx, "granting user "+u.Name+"'s privileges", "GRANT "+privileges(u.Access)+" ON "+GrantTarget(db.Name)+".* TO "+spec); err != nil {
		return err
	}
	return m.setRecordState(ctx, kindUser, u.Role, db.OwnerUID, string(u.Access))
}

// dropUsers drops the extra users roles of db's owner (all those recorded when
// roles is nil): each locked, its sessions killed, dropped, its record removed.
// It returns the sessions it ended.
func (m *MySQL) dropUsers(ctx context.Context, db database.Database, roles []string) (int, error) {
	if roles == nil {
		have, err := m.extraUsers(ctx, db)
		if err != nil {
			return 0, err
		}
		for role := range have {
			roles = append(roles, role)
		}
		slices.Sort(roles)
	}
	n := 0
	for _, role := range roles {
		exists, err := m.userExists(ctx, role)
		if err != nil {
			return n, err
		}
		if exists {
			spec := userSpec(role)
			if err := m.exec(ctx, "locking a user", "ALTER USER "+spec+" ACCOUNT LOCK"); err != nil {
				return n, err
			}
			k, err := m.kill(ctx, "USER = ?", role)
			n += k
			if err != nil {
				return n, err
			}
			if err := m.exec(ctx, "dropping a user", "DROP USER IF EXISTS "+spec); err != nil {
				return n, err
			}
		}
		if err := m.forget(ctx, kindUser, role, db.OwnerUID); err != nil {
			return n, err
		}
	}
	return n, nil
}
