// Package engine is what the data controllers need from a database server, so that
// engines other than PostgreSQL (MySQL) can be added behind the same interface.
package engine

import (
	"context"
	"crypto/rand"
	"errors"
	"strings"
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
)

// Server is how Orderly connects to a server as its admin.
type Server struct {
	// Name is the DatabaseServer's name: a Connector keeps one pool per name and
	// replaces it when the other fields change.
	Name     string
	Host     string
	Port     int32
	SSLMode  string
	Username string
	Password string
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
	Template   string
	Extensions []string
}

// EnsureResult says what Ensure did.
type EnsureResult struct {
	// Created is true when the database was created by this call.
	Created bool
}

// Info is what a server reports about itself.
type Info struct {
	Version string
	// OwnedDatabases counts databases marked as Orderly's.
	OwnedDatabases int
}

// Engine creates and drops DevDatabases' databases and roles on one server.
type Engine interface {
	// Info connects and reports the server's version and Orderly's databases on it.
	Info(ctx context.Context) (Info, error)
	// Ensure creates what is missing of db: role, database, privileges, extensions.
	Ensure(ctx context.Context, db Database) (EnsureResult, error)
	// Drop terminates connections to db, drops it and its role. With retain, the
	// database is kept and handed to the admin; only the role is dropped.
	Drop(ctx context.Context, db Database, retain bool) error
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
