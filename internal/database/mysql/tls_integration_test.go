//go:build integration

package mysql

import (
	"context"
	"testing"

	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/testing/testmysql"
	"orderly.dev/orderly/internal/testing/testtls"
)

// On a server that requires TLS (require_secure_transport), Orderly connects with
// the DatabaseServer's CA (verify-full: the chain and the host name), as the admin
// and as a database's user for its init SQL; without TLS, or with a CA that did
// not sign the server's certificate, it does not connect.
func TestTLSWithTheServersCA(t *testing.T) {
	ctx := context.Background()
	srv, err := testmysql.Start(testmysql.WithTLS())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(srv.Close)
	otherCA, err := testtls.OtherCA()
	if err != nil {
		t.Fatal(err)
	}
	base := database.Server{Engine: Kind, Host: srv.Host, Port: srv.Port, Username: srv.Username, Password: srv.Password}
	for name, s := range map[string]database.Server{
		"no TLS":     func() database.Server { s := base; s.SSLMode = "disable"; return s }(),
		"another CA": func() database.Server { s := base; s.CACert = otherCA; return s }(),
	} {
		c := NewConnector()
		e := connectWith(t, c, s)
		if _, err := e.Info(ctx); err == nil {
			t.Errorf("%s: Orderly connected", name)
		}
		c.Close()
	}

	c := NewConnector()
	t.Cleanup(c.Close)
	s := base
	s.CACert = srv.CACert
	if s.EffectiveSSLMode() != "verify-full" {
		t.Fatalf("sslMode with a CA is %s", s.EffectiveSSLMode())
	}
	e := connectWith(t, c, s)
	db := newDB("a6a6a6a6-0000-4000-8000-000000000001")
	if _, err := e.Ensure(ctx, db); err != nil {
		t.Fatal(err)
	}
	if err := e.Init(ctx, db, "CREATE TABLE t (id INT)", func(string) error { return nil }); err != nil {
		t.Fatalf("init SQL over TLS: %v", err)
	}
	if _, err := e.Drop(ctx, db, false); err != nil {
		t.Fatal(err)
	}
}
