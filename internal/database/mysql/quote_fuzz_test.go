package mysql

import (
	"net"
	"strconv"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"
)

// readIdent reads one backquoted MySQL identifier: what it names, and whether the
// whole input was that one token.
func readIdent(s string) (string, bool) {
	if len(s) < 2 || s[0] != '`' || s[len(s)-1] != '`' {
		return "", false
	}
	var b strings.Builder
	in := s[1 : len(s)-1]
	for i := 0; i < len(in); i++ {
		if in[i] == '`' {
			if i+1 == len(in) || in[i+1] != '`' {
				return "", false
			}
			i++
		}
		b.WriteByte(in[i])
	}
	return b.String(), true
}

// readLiteral reads one single-quoted MySQL string literal with backslash escapes
// (sql_mode without NO_BACKSLASH_ESCAPES, as Orderly's sessions have it).
func readLiteral(s string) (string, bool) {
	if len(s) < 2 || s[0] != '\'' || s[len(s)-1] != '\'' {
		return "", false
	}
	escapes := map[byte]byte{'0': 0, '\'': '\'', '"': '"', 'b': '\b', 'n': '\n', 'r': '\r', 't': '\t', 'Z': 26, '\\': '\\', '%': '%', '_': '_'}
	var b strings.Builder
	in := s[1 : len(s)-1]
	for i := 0; i < len(in); i++ {
		switch c := in[i]; c {
		case '\\':
			if i+1 == len(in) {
				return "", false // escapes the closing quote
			}
			i++
			if e, ok := escapes[in[i]]; ok {
				if in[i] == '%' || in[i] == '_' {
					b.WriteByte('\\') // kept as written outside LIKE
				}
				b.WriteByte(e)
			} else {
				b.WriteByte(in[i])
			}
		case '\'':
			if i+1 == len(in) || in[i+1] != '\'' {
				return "", false
			}
			i++
			b.WriteByte(c)
		default:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// FuzzQuoting quotes any string as a MySQL identifier, string literal and grant
// target. Properties: each is one token that reads back as the string, so no input
// ends it early and adds SQL of its own; and a grant target has no unescaped _ or %,
// so a grant covers the one database named, not every database the pattern matches.
func FuzzQuoting(f *testing.F) {
	for _, s := range []string{"orderly_abc", "we`ird", "o'brien", `back\slash`, "", "a\x00b", "'; DROP USER x; --", "ünï", `x\`, "a%b_c"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, ok := readIdent(Ident(s)); !ok || got != s {
			t.Fatalf("Ident(%q) = %s, which reads back as %q (one token: %v)", s, Ident(s), got, ok)
		}
		if got, ok := readLiteral(Literal(s)); !ok || got != s {
			t.Fatalf("Literal(%q) = %s, which reads back as %q (one token: %v)", s, Literal(s), got, ok)
		}
		target, ok := readIdent(GrantTarget(s))
		if !ok {
			t.Fatalf("GrantTarget(%q) = %s is not one identifier", s, GrantTarget(s))
		}
		var name strings.Builder
		for i := 0; i < len(target); i++ {
			c := target[i]
			if c == '\\' && i+1 < len(target) {
				i++
				name.WriteByte(target[i])
				continue
			}
			if c == '_' || c == '%' {
				t.Fatalf("GrantTarget(%q) = %s: an unescaped wildcard %q", s, GrantTarget(s), c)
			}
			name.WriteByte(c)
		}
		if name.String() != s {
			t.Fatalf("GrantTarget(%q) = %s names %q", s, GrantTarget(s), name.String())
		}
	})
}

// FuzzDSN writes any connection settings as the DSN of a connection Secret and reads
// it back with the driver. Properties: it parses, and the address, user, password and
// database are the ones given.
func FuzzDSN(f *testing.F) {
	f.Add("db.example.com", int32(3306), "ou_abc_reader", "ABCDEFGHIJKLMNOPQRSTUVWXYZ", "orderly_x", "true")
	f.Add("10.0.0.1", int32(3307), "u", "p@ss/w:rd?x=1", "d", "false")
	f.Add("::1", int32(1), "u", "p", "d", "skip-verify")
	f.Fuzz(func(t *testing.T, host string, port int32, user, password, database, tls string) {
		if tls != "true" && tls != "false" && tls != "skip-verify" && tls != "preferred" {
			return
		}
		if net.ParseIP(host) == nil && (host == "" || strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-") != "") {
			return // a DatabaseServer's host is a name or an address
		}
		if !validName.MatchString(user) || !validName.MatchString(database) {
			return // Orderly's names (checkNames); the password is anything
		}
		dsn := DSN(host, port, user, password, database, tls)
		cfg, err := gomysql.ParseDSN(dsn)
		if err != nil {
			t.Fatalf("ParseDSN(%s): %v", dsn, err)
		}
		if cfg.Addr != net.JoinHostPort(host, strconv.Itoa(int(port))) || cfg.User != user || cfg.Passwd != password || cfg.DBName != database {
			t.Fatalf("DSN(%q, %d, %q, %q, %q) = %s reads back as %s %q %q %q", host, port, user, password, database, dsn, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName)
		}
	})
}
