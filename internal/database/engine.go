// Package database is how Orderly talks to a DatabaseServer, for every controller
// that does (databaseserver, devdatabase, backupverification, secretrotation): what
// they need from a server (Engine, behind which PostgreSQL and MySQL sit, in the
// postgres and mysql packages), its admin credentials (ServerFor), the pools kept per
// server (Pools), which namespaces may use it (AdmitNamespace) and what may be said
// about it (Scrubber). It lives outside the controller tree, and the kit does not
// import it.
package database

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors that controllers turn into conditions.
var (
	// ErrUnreachable: the server could not be reached or refused the admin's login.
	ErrUnreachable = errors.New("database server unreachable")
	// ErrNotOwned: a database or role with Orderly's name exists but is not marked as
	// belonging to this DevDatabase; Orderly leaves it alone.
	ErrNotOwned = errors.New("exists but does not belong to this DevDatabase")
	// ErrTemplateInUse: the template database has open connections, which the
	// server's copy does not allow; retried.
	ErrTemplateInUse = errors.New("template database is in use")
	// ErrTemplateMissing: the template database does not exist on the server.
	ErrTemplateMissing = errors.New("template database does not exist")
	// ErrExtension: an extension could not be created.
	ErrExtension = errors.New("extension could not be created")
	// ErrTimeout: the server stopped a statement at its lock_timeout or
	// statement_timeout (a lock held by another session, a slow clone); retried.
	ErrTimeout = errors.New("the server did not finish in time")
	// ErrServerChanged: the server answering is not the one the database was created
	// on (its DatabaseServer's host now leads elsewhere); nothing is created or
	// dropped there.
	ErrServerChanged = errors.New("the server is not the one the database was created on")
	// ErrInit: spec.init's SQL failed (the server refused it, or it ran out of
	// time) and was rolled back. It is the tenant's SQL: not retried.
	ErrInit = errors.New("the init SQL failed")
)

// SameServer refuses work on a server whose identity (got) is not the one a database
// was created on (want); either may be empty when unknown, which refuses nothing.
func SameServer(want, got string) error {
	if want != "" && got != "" && want != got {
		return fmt.Errorf("%w: it was created on server %s, and the server now answering is %s", ErrServerChanged, want, got)
	}
	return nil
}

// Server is how Orderly connects to a server as its admin.
type Server struct {
	// Name is the DatabaseServer's name: a Connector keeps one pool per name and
	// replaces it when the other fields change.
	Name string
	// Engine is the DatabaseServer's spec.engine: postgres (also when empty) or
	// mysql. The connection Secret's keys depend on it.
	Engine   string
	Host     string
	Port     int32
	SSLMode  string
	Username string
	Password string
	// CACert holds the PEM certificates that sign the server's certificate; with it
	// the connection is verify-full whatever SSLMode says.
	CACert []byte
}

// EffectiveSSLMode is the sslmode connections to s use: verify-full with a CA,
// else SSLMode, else prefer (libpq's default).
func (s Server) EffectiveSSLMode() string {
	switch {
	case len(s.CACert) > 0:
		return "verify-full"
	case s.SSLMode != "":
		return s.SSLMode
	}
	return "prefer"
}

// Database is one DevDatabase's database and role on a server.
type Database struct {
	// Name of the database and Role of its login role: deterministic from the owner.
	Name string
	Role string
	// OwnerUID marks the database and the role as belonging to one DevDatabase.
	OwnerUID string
	// Password of the role. SetPassword says whether to (re)set it on an existing role.
	Password    string
	SetPassword bool
	// Template is a database to clone; empty for an empty database.
	Template string
	// Extensions are created when the database is created, never afterwards.
	Extensions []string
	// ValidUntil is when the role's password stops working (VALID UNTIL): the
	// database's expiry, so that the role cannot log in after it even if Orderly
	// has not dropped it yet. Zero for no limit.
	ValidUntil time.Time
	// ServerID is the identity of the server the database was created on, as
	// EnsureResult.ServerID reported it; empty when unknown. Ensure and Drop refuse
	// (ErrServerChanged) on a server with another identity.
	ServerID string
	// Users are the database's extra login roles. Ensure makes them exactly these:
	// it creates the missing ones (with their Password), sets a password where
	// SetPassword says so, moves their ValidUntil, changes their Access, and drops
	// the users it made for this OwnerUID that are no longer listed. Drop drops them
	// all. Like Role, a user's role carries a marker that only the admin can write,
	// and a role with a user's name but not the marker is never altered or dropped.
	Users []User
}

// Access is what an extra user may do in the database.
type Access string

// Values of Access.
const (
	// ReadOnly: connect, use the schemas, read every table, present and future.
	ReadOnly Access = "ReadOnly"
	// ReadWrite: ReadOnly plus insert, update and delete rows and use sequences.
	ReadWrite Access = "ReadWrite"
)

// User is an extra login role of a Database.
type User struct {
	// Name is the user's name in the DevDatabase; Role its login role (UserRole).
	Name string
	Role string
	// Password of the role; SetPassword says whether to (re)set it on an existing role.
	Password    string
	SetPassword bool
	Access      Access
}

// UserRole is the login role of the DevDatabase uid's user name: deterministic,
// like Names, so that a crash never leaves a role nobody owns. name is at most 16
// characters of [a-z0-9-] ('-' becomes '_'), so the role has at most 57.
func UserRole(uid, name string) string {
	_, role := Names(uid)
	return role + "_" + strings.ReplaceAll(name, "-", "_")
}

// EnsureResult says what Ensure did.
type EnsureResult struct {
	// Created is true when the database was created by this call.
	Created bool
	// ServerID is the identity of the server (empty when the admin may not read it).
	ServerID string
	// UsersDropped names the users (User.Name) Ensure dropped because they are no
	// longer listed.
	UsersDropped []string
}

// DropResult says what Drop did.
type DropResult struct {
	// Terminated counts the sessions Drop ended (connections to the database, and
	// the roles' sessions elsewhere) before dropping.
	Terminated int
}

// TxnState is what the server says of a transaction Init began.
type TxnState string

// Values of TxnState.
const (
	// TxnCommitted: the SQL was applied.
	TxnCommitted TxnState = "committed"
	// TxnAborted: rolled back (or the session died before committing): nothing applied.
	TxnAborted TxnState = "aborted"
	// TxnInProgress: still running on the server.
	TxnInProgress TxnState = "in progress"
	// TxnUnknown: the server no longer knows (too old) or cannot say.
	TxnUnknown TxnState = "unknown"
)

// Info is what a server reports about itself.
type Info struct {
	Version string
	// OwnedDatabases counts databases marked as Orderly's.
	OwnedDatabases int
	// SystemIdentifier is the server's identity; empty when the admin may not read it.
	SystemIdentifier string
}

// Owned names what Orderly owns on a server.
type Owned struct {
	// Databases are the databases marked as Orderly's. A retained database, handed to
	// the admin, is not Orderly's any more; one whose creation was interrupted may not
	// be marked yet, but its role is.
	Databases []string
	// Roles are the login roles (MySQL's users) marked as Orderly's: databases' main
	// roles and their extra users.
	Roles []string
}

// Engine creates and drops DevDatabases' databases and roles on one server.
type Engine interface {
	// Info connects and reports the server's version and Orderly's databases on it.
	Info(ctx context.Context) (Info, error)
	// Owned lists the databases and roles whose names start with prefix and that
	// Orderly marked as its own, each list sorted: those to drop when nothing of
	// theirs should be left (BackupVerification's throwaway databases of runs whose
	// record was lost). A name in the list is no licence to drop: Drop checks the
	// marker of what it drops again.
	Owned(ctx context.Context, prefix string) (Owned, error)
	// Ensure creates what is missing of db: role, database, privileges, extensions.
	Ensure(ctx context.Context, db Database) (EnsureResult, error)
	// Drop terminates connections to db, drops it, its role and its users' roles.
	// With retain, the database is kept and handed to the admin; only the roles are
	// dropped.
	Drop(ctx context.Context, db Database, retain bool) (DropResult, error)
	// Init runs sql once in db as db.Role itself, logged in with db.Password, never
	// as the admin (the SQL is the tenant's), in one transaction with a statement
	// timeout. begun is called with the transaction's identifier once the
	// transaction has begun and before the SQL runs (empty when the engine cannot
	// identify it); when begun fails nothing runs. The SQL's own failure is ErrInit,
	// with the server's message.
	Init(ctx context.Context, db Database, sql string, begun func(txn string) error) error
	// InitOutcome says what became of the transaction txn that Init began (after a
	// restart that lost the answer).
	InitOutcome(ctx context.Context, txn string) (TxnState, error)
}

// Connector returns an Engine for a server; engines may pool connections.
type Connector interface {
	// Connect returns an Engine for s. A pool kept for s.Name but made with other
	// settings (host, port, credentials) is closed and replaced.
	Connect(ctx context.Context, engine string, s Server) (Engine, error)
	// Forget closes what is kept for the server called name (it was deleted).
	Forget(name string)
}

// Names derives the database and role names of a DevDatabase from its UID, so a
// crash between creating and recording them never leaves an object nobody owns.
func Names(uid string) (database, role string) {
	id := strings.ReplaceAll(strings.ToLower(uid), "-", "")
	return "orderly_" + id, "orderly_" + id
}

// Password returns a random password: 26 base32 characters, 130 bits.
func Password() string { return rand.Text() }

// ValidPassword says whether p has the form Password generates: base32 characters,
// 26 of them (up to 64, should a later Go make rand.Text longer). A password read
// back from a connection Secret (which namespace users may edit) is used only if it
// does; otherwise Orderly sets a new one.
func ValidPassword(p string) bool {
	if len(p) < 26 || len(p) > 64 {
		return false
	}
	for _, c := range p {
		if (c < 'A' || c > 'Z') && (c < '2' || c > '7') {
			return false
		}
	}
	return true
}
