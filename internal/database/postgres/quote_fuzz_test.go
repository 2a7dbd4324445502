package postgres

import (
	"slices"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"

	"orderly.dev/orderly/internal/database"
)

// unquote reads one quoted token, opened and closed by q, in which q is written twice
// (PostgreSQL's identifiers and standard-conforming strings): what it holds, and
// whether the token was exactly that, with no lone q inside.
func unquote(s string, q byte) (string, bool) {
	if len(s) < 2 || s[0] != q || s[len(s)-1] != q {
		return "", false
	}
	var b strings.Builder
	in := s[1 : len(s)-1]
	for i := 0; i < len(in); i++ {
		if in[i] == q {
			if i+1 == len(in) || in[i+1] != q {
				return "", false // the token would end here
			}
			i++
		}
		b.WriteByte(in[i])
	}
	return b.String(), true
}

// FuzzQuoting quotes any string as a PostgreSQL identifier and string literal.
// Properties: each is one token that reads back as the string (NUL bytes, which
// PostgreSQL cannot hold, are dropped from identifiers), so no input ends the token
// early and adds SQL of its own.
func FuzzQuoting(f *testing.F) {
	for _, s := range []string{"orderly_abc", `we"ird`, "o'brien", `back\slash`, "", "\x00x", `"; DROP ROLE x; --`, "ünï"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, ok := unquote(ident(s), '"'); !ok || got != strings.ReplaceAll(s, "\x00", "") {
			t.Fatalf("ident(%q) = %s, which reads back as %q (one token: %v)", s, ident(s), got, ok)
		}
		if got, ok := unquote(literal(s), '\''); !ok || got != s {
			t.Fatalf("literal(%q) = %s, which reads back as %q (one token: %v)", s, literal(s), got, ok)
		}
	})
}

// FuzzConnString writes any server settings as the keyword/value connection string
// Orderly connects with, and reads it back with pgx. Properties: it parses, and the
// host, port, user, password and database are the ones given: no value can add or
// change a keyword (a password cannot set sslmode=disable or another host).
func FuzzConnString(f *testing.F) {
	f.Add("db.example.com", int32(5432), "admin", "s3cret", "postgres", "require")
	f.Add("10.0.0.1", int32(5433), "o'brien", `pa\ss' sslmode=disable`, "orderly_x", "")
	f.Add("db", int32(1), "u", "p w", "d", "verify-full")
	f.Fuzz(func(t *testing.T, host string, port int32, user, password, dbname, sslmode string) {
		s := database.Server{Host: host, Port: port, Username: user, Password: password, SSLMode: sslmode}
		// What a DatabaseServer can hold: a host name or address, a port, and names
		// and a password without NUL (no Secret value PostgreSQL accepts has one).
		for _, v := range []string{host, user, password, dbname, sslmode} {
			if strings.ContainsRune(v, 0) {
				return
			}
		}
		if host == "" || strings.ContainsAny(host, ",/ \t\n") || port <= 0 || user == "" || dbname == "" ||
			!slices.Contains([]string{"", "disable", "allow", "prefer", "require", "verify-ca", "verify-full"}, sslmode) {
			return // the CRD's enum
		}
		cfg, err := pgx.ParseConfig(ConnString(s, dbname))
		if err != nil {
			if sslmode == "verify-ca" || sslmode == "verify-full" {
				return // pgx reads the system's roots for these; not the string's business
			}
			t.Fatalf("ParseConfig(%s): %v", ConnString(s, dbname), err)
		}
		if cfg.Host != host || int32(cfg.Port) != port || cfg.User != user || cfg.Password != password || cfg.Database != dbname {
			t.Fatalf("ConnString(%+v, %q) = %s reads back as host %q port %d user %q password %q database %q",
				s, dbname, ConnString(s, dbname), cfg.Host, cfg.Port, cfg.User, cfg.Password, cfg.Database)
		}
	})
}

// FuzzUserMarker reads any role comment as a DevDatabase user's marker. Properties:
// a marker Orderly writes for a user name ([a-z0-9-], at most 16) reads back as that
// name and access, and nothing else is taken for another DevDatabase's user.
func FuzzUserMarker(f *testing.F) {
	f.Add("reader", "3f0c7d2e-1b2a-4c5d-8e9f-0a1b2c3d4e5f", "x")
	f.Add("a-b", "uid", "orderly:other")
	f.Fuzz(func(t *testing.T, name, uid, comment string) {
		if n, a := userOf(comment, uid); n != "" && !strings.HasPrefix(comment, Marker(uid)) || a != "" && a != database.ReadOnly && a != database.ReadWrite {
			t.Fatalf("userOf(%q, %q) = %q, %q", comment, uid, n, a)
		}
		if len(name) == 0 || len(name) > 16 || strings.Trim(name, "abcdefghijklmnopqrstuvwxyz0123456789-") != "" {
			return
		}
		for _, access := range []database.Access{database.ReadOnly, database.ReadWrite} {
			if n, a := userOf(userMarkerWith(uid, name, access), uid); n != name || a != access {
				t.Fatalf("the marker of %q (%s) reads back as %q (%s)", name, access, n, a)
			}
		}
		if n, a := userOf(userMarker(uid, name), uid); n != name || a != "" {
			t.Fatalf("the marker of %q before its grants reads back as %q (%s)", name, n, a)
		}
	})
}
