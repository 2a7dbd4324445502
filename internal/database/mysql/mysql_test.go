package mysql

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	gomysql "github.com/go-sql-driver/mysql"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
)

func TestQuoting(t *testing.T) {
	for _, tc := range []struct{ got, want string }{
		{Ident("orderly_abc"), "`orderly_abc`"},
		{Ident("a`b"), "`a``b`"},
		// In a grant, _ and % are wildcards: escaped, the grant names one database.
		{GrantTarget("orderly_abc"), "`orderly\\_abc`"},
		{GrantTarget("a%b\\c"), "`a\\%b\\\\c`"},
		{Literal("it's"), "'it''s'"},
		{Literal(`a\'; DROP USER x; --`), `'a\\''; DROP USER x; --'`},
		{userSpec("orderly_abc"), "'orderly_abc'@'%'"},
	} {
		if tc.got != tc.want {
			t.Errorf("got %s, want %s", tc.got, tc.want)
		}
	}
}

func TestNativeHash(t *testing.T) {
	// MySQL's PASSWORD('password').
	if got := NativeHash("password"); got != "*2470C0C06DEE42FD1618BB99005ADCA2EC9D1E19" {
		t.Errorf("NativeHash = %s", got)
	}
	p := database.Password()
	if c := identifiedBy("10.11.19-MariaDB-0+deb12u1", p); strings.Contains(c, p) || !strings.HasPrefix(c, "IDENTIFIED BY PASSWORD '*") {
		t.Errorf("MariaDB is sent the password itself: %s", c)
	}
	if c := identifiedBy("8.4.3", p); c != "IDENTIFIED BY '"+p+"'" {
		t.Errorf("MySQL: %s", c)
	}
}

// Names fit both servers: MySQL's users have at most 32 characters (MariaDB's 80),
// databases at most 64; postgres names are unchanged.
func TestNamesFitMySQL(t *testing.T) {
	uid := "5296e397-1b2c-4d5e-8f90-0123456789ab"
	db, user := database.NamesFor(Kind, uid)
	if db != "orderly_5296e3971b2c4d5e8f900123456789ab" || len(db) > 64 {
		t.Errorf("database %s", db)
	}
	if !strings.HasPrefix(user, "orderly_") || len(user) != 32 {
		t.Errorf("user %s (%d characters)", user, len(user))
	}
	if again, _ := database.NamesFor(Kind, uid); again != db {
		t.Error("names are not deterministic")
	}
	// UIDs that share a long prefix get different users.
	_, u1 := database.NamesFor(Kind, "a1a1a1a1-0000-4000-8000-000000000011")
	_, u2 := database.NamesFor(Kind, "a1a1a1a1-0000-4000-8000-000000000012")
	if u1 == u2 {
		t.Errorf("two DevDatabases share the user %s", u1)
	}
	pgDB, pgRole := database.NamesFor("postgres", uid)
	if wantDB, wantRole := database.Names(uid); pgDB != wantDB || pgRole != wantRole {
		t.Errorf("postgres names changed: %s %s", pgDB, pgRole)
	}
	if err := checkNames(database.Database{Name: db, Role: user}); err != nil {
		t.Error(err)
	}
	for _, bad := range []database.Database{{Name: db, Role: "orderly_5296e3971b2c4d5e8f9001234"}, {Name: "a`b", Role: user}, {Name: strings.Repeat("a", 65), Role: user}} {
		if checkNames(bad) == nil {
			t.Errorf("names %q/%q accepted", bad.Name, bad.Role)
		}
	}
}

func TestConnectionData(t *testing.T) {
	db := database.Database{Name: "orderly_abc", Role: "orderly_ab", Password: "ABCDEFGHIJKLMNOPQRSTUVWXYZ"}
	for _, tc := range []struct {
		server                  database.Server
		wantURI, wantJDBC, wDSN string
	}{
		{database.Server{Host: "db.example", Port: 3306},
			"mysql://orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@db.example:3306/orderly_abc?ssl-mode=PREFERRED",
			"jdbc:mysql://db.example:3306/orderly_abc?password=ABCDEFGHIJKLMNOPQRSTUVWXYZ&sslMode=PREFERRED&user=orderly_ab",
			"orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@tcp(db.example:3306)/orderly_abc?tls=preferred"},
		{database.Server{Host: "127.0.0.1", Port: 3307, SSLMode: "disable"},
			"mysql://orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@127.0.0.1:3307/orderly_abc?ssl-mode=DISABLED",
			"jdbc:mysql://127.0.0.1:3307/orderly_abc?password=ABCDEFGHIJKLMNOPQRSTUVWXYZ&sslMode=DISABLED&user=orderly_ab",
			"orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@tcp(127.0.0.1:3307)/orderly_abc"},
		{database.Server{Host: "::1", Port: 3306, SSLMode: "require"},
			"mysql://orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@[::1]:3306/orderly_abc?ssl-mode=REQUIRED",
			"jdbc:mysql://[::1]:3306/orderly_abc?password=ABCDEFGHIJKLMNOPQRSTUVWXYZ&sslMode=REQUIRED&user=orderly_ab",
			"orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@tcp([::1]:3306)/orderly_abc?tls=skip-verify"},
		{database.Server{Host: "db.example", Port: 3306, CACert: []byte("pem")},
			"mysql://orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@db.example:3306/orderly_abc?ssl-mode=VERIFY_IDENTITY",
			"jdbc:mysql://db.example:3306/orderly_abc?password=ABCDEFGHIJKLMNOPQRSTUVWXYZ&sslMode=VERIFY_IDENTITY&user=orderly_ab",
			"orderly_ab:ABCDEFGHIJKLMNOPQRSTUVWXYZ@tcp(db.example:3306)/orderly_abc?tls=true"},
	} {
		data := ConnectionData(tc.server, db)
		for key, want := range map[string]string{
			datav1alpha1.SecretKeyURI: tc.wantURI, datav1alpha1.SecretKeyJDBCURL: tc.wantJDBC, datav1alpha1.SecretKeyDSN: tc.wDSN,
			datav1alpha1.SecretKeyUsername: db.Role, datav1alpha1.SecretKeyDatabase: db.Name, datav1alpha1.SecretKeyPassword: db.Password,
			datav1alpha1.SecretKeyHost: tc.server.Host, datav1alpha1.SecretKeyPort: fmt.Sprint(tc.server.Port),
		} {
			if got := string(data[key]); got != want {
				t.Errorf("%s: %s = %s, want %s", tc.server.Host, key, got, want)
			}
		}
		if _, ok := data[datav1alpha1.SecretKeyCACert]; ok != (len(tc.server.CACert) > 0) {
			t.Errorf("ca.crt present: %v", ok)
		}
		// The DSN is one the driver reads back to the same settings.
		cfg, err := gomysql.ParseDSN(string(data[datav1alpha1.SecretKeyDSN]))
		if err != nil {
			t.Fatalf("the driver cannot parse the DSN: %v", err)
		}
		if cfg.User != db.Role || cfg.Passwd != db.Password || cfg.DBName != db.Name {
			t.Errorf("the DSN reads back as %s/%s/%s", cfg.User, cfg.Passwd, cfg.DBName)
		}
	}
}

func TestTLSFollowsSSLMode(t *testing.T) {
	for _, tc := range []struct {
		mode                      string
		wantTLS, wantVerify, fall bool
	}{
		{"disable", false, false, false},
		{"prefer", true, false, true},
		{"allow", true, false, true},
		{"require", true, false, false},
		{"verify-ca", true, true, false},
		{"verify-full", true, true, false},
	} {
		c, fallback, err := tlsConfig(database.Server{Host: "db.example", SSLMode: tc.mode})
		if err != nil {
			t.Fatal(err)
		}
		if (c != nil) != tc.wantTLS || fallback != tc.fall {
			t.Errorf("%s: TLS %v, fallback %v", tc.mode, c != nil, fallback)
			continue
		}
		if c != nil && (!c.InsecureSkipVerify || c.VerifyConnection != nil) != tc.wantVerify {
			t.Errorf("%s: verifies %v", tc.mode, !tc.wantVerify)
		}
	}
	c, _, _ := tlsConfig(database.Server{Host: "db.example", SSLMode: "verify-full"})
	if c.ServerName != "db.example" || c.InsecureSkipVerify {
		t.Errorf("verify-full does not check the host: %+v", c)
	}
	if _, _, err := tlsConfig(database.Server{Host: "db.example", CACert: []byte("not pem")}); !errors.Is(err, database.ErrCredentials) {
		t.Errorf("a CA that is no certificate: %v", err)
	}
}

// Errors name neither the admin nor its password; refused logins are unreachable
// servers, lock waits timeouts.
func TestClassify(t *testing.T) {
	const admin = "platform_admin"
	for _, tc := range []struct {
		err  error
		want error
	}{
		{&gomysql.MySQLError{Number: 1045, Message: "Access denied for user 'platform_admin'@'10.0.0.1' (using password: YES)"}, database.ErrUnreachable},
		{&gomysql.MySQLError{Number: 1205, Message: "Lock wait timeout exceeded; try restarting transaction"}, database.ErrTimeout},
		{&gomysql.MySQLError{Number: 1969, Message: "Query execution was interrupted (max_statement_time exceeded)"}, database.ErrTimeout},
		{&gomysql.MySQLError{Number: 1227, Message: "Access denied; you need (at least one of) the SUPER privilege(s) for this operation: platform_admin"}, nil},
		{context.DeadlineExceeded, database.ErrUnreachable},
		{gomysql.ErrInvalidConn, database.ErrUnreachable},
	} {
		got := classify(tc.err, "doing", database.DefaultTimeouts, database.ScrubberFor(database.Server{Username: admin}))
		if tc.want != nil && !errors.Is(got, tc.want) {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
		if strings.Contains(got.Error(), admin) {
			t.Errorf("%v names the admin: %v", tc.err, got)
		}
	}
}

// The dispatching Connector hands each engine to its own Connector and refuses
// others clearly.
func TestEnginesDispatch(t *testing.T) {
	c := NewConnector()
	defer c.Close()
	engines := database.Engines{Kind: c}
	if _, err := engines.Connect(context.Background(), "postgres", database.Server{}); !errors.Is(err, database.ErrEngineUnsupported) || !strings.Contains(err.Error(), "mysql") {
		t.Errorf("postgres on a mysql-only manager: %v", err)
	}
	e, err := engines.Connect(context.Background(), Kind, database.Server{Name: "a", Host: "127.0.0.1", Port: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.(*MySQL); !ok {
		t.Errorf("got %T", e)
	}
	if _, err := c.Connect(context.Background(), "postgres", database.Server{}); !errors.Is(err, database.ErrEngineUnsupported) {
		t.Errorf("the mysql connector took postgres: %v", err)
	}
}

// Extra users' names fit MySQL's 32 characters, never look like a main user's,
// differ between DevDatabases and between users, and give back the user's name.
func TestExtraUserNames(t *testing.T) {
	uid := "5296e397-1b2c-4d5e-8f90-0123456789ab"
	_, main := database.NamesFor(Kind, uid)
	long := database.UserRoleFor(Kind, uid, "a-long-name-16ch")
	if len(long) != database.MySQLUserMax || !strings.HasPrefix(long, database.MySQLUserPrefix) || strings.HasPrefix(long, "orderly_") {
		t.Errorf("user %s (%d characters)", long, len(long))
	}
	if userNameOf(long) != "a-long-name-16ch" {
		t.Errorf("userNameOf(%s) = %s", long, userNameOf(long))
	}
	other := database.UserRoleFor(Kind, "5296e397-1b2c-4d5e-8f90-0123456789ac", "a-long-name-16ch")
	if other == long || long == main || database.UserRoleFor(Kind, uid, "b") == database.UserRoleFor(Kind, uid, "c") {
		t.Error("two users share a name")
	}
	if pg := database.UserRoleFor("postgres", uid, "app-ro"); pg != database.UserRole(uid, "app-ro") {
		t.Errorf("postgres user names changed: %s", pg)
	}
	db := database.Database{Name: "orderly_x", Role: main, Users: []database.User{{Name: "a-long-name-16ch", Role: long, Access: database.ReadOnly}}}
	if err := checkNames(db); err != nil {
		t.Error(err)
	}
	db.Users[0].Role = "orderly_" + long[3:]
	if checkNames(db) == nil {
		t.Error("an extra user named like a main user was accepted")
	}
}
