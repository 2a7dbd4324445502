package postgres

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/testing/testtls"
)

// A CA that is not PEM stops the connection before anything is sent, with an error
// that says what is wrong with which key.
func TestOpenRefusesACAThatIsNotPEM(t *testing.T) {
	s := database.Server{Host: "127.0.0.1", Port: 1, Username: "admin", Password: "s3cret", CACert: []byte("not a certificate")}
	for _, sess := range []Session{{}, {KeepSearchPath: true, ReadOnly: true}} {
		_, err := Open(context.Background(), s, sess)
		if !errors.Is(err, database.ErrCredentials) || !strings.Contains(err.Error(), "ca.crt holds no PEM certificate") {
			t.Errorf("Open with %+v: %v, want ErrCredentials naming the key", sess, err)
		}
		if err != nil && strings.Contains(err.Error(), "s3cret") {
			t.Errorf("the error shows the password: %v", err)
		}
	}
	c := NewConnector()
	defer c.Close()
	if _, err := c.Connect(context.Background(), Kind, s); !errors.Is(err, database.ErrCredentials) {
		t.Errorf("Connect: %v, want ErrCredentials", err)
	}
}

// Every connection gets its timeouts at connection start; Orderly's own sessions
// pin the search_path, the tenant's SQL keeps its database's.
func TestConfigSetsUpTheSession(t *testing.T) {
	ca, err := testtls.OtherCA()
	if err != nil {
		t.Fatal(err)
	}
	s := database.Server{Host: "db.example", Port: 5432, Username: "admin", Password: "s3cret"}
	withCA := s
	withCA.CACert = ca
	for _, tc := range []struct {
		name        string
		server      database.Server
		sess        Session
		want        map[string]string
		wantAbsent  []string
		wantConnect time.Duration
		wantSimple  bool
	}{
		{name: "an admin session", server: s, sess: Session{},
			want: map[string]string{"search_path": "pg_catalog, pg_temp", "statement_timeout": "30000", "lock_timeout": "5000",
				"idle_in_transaction_session_timeout": "30000", "application_name": "orderly"},
			wantAbsent: []string{"default_transaction_read_only"}, wantConnect: 5 * time.Second},
		{name: "a clone's statement timeout", server: s, sess: Session{Timeouts: database.Timeouts{Statement: time.Second}, Statement: time.Minute},
			want:        map[string]string{"statement_timeout": "60000", "idle_in_transaction_session_timeout": "1000"},
			wantConnect: 5 * time.Second},
		{name: "the tenant's checks", server: withCA,
			sess: Session{Database: "orderly_x", Timeouts: database.Timeouts{Statement: 30 * time.Second, Connect: 10 * time.Second},
				KeepSearchPath: true, ReadOnly: true, SimpleProtocol: true, Application: "orderly-backupverification"},
			want:       map[string]string{"default_transaction_read_only": "on", "application_name": "orderly-backupverification", "statement_timeout": "30000"},
			wantAbsent: []string{"search_path"}, wantConnect: 10 * time.Second, wantSimple: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg, err := Config(tc.server, tc.sess)
			if err != nil {
				t.Fatal(err)
			}
			for k, v := range tc.want {
				if got := cfg.RuntimeParams[k]; got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			for _, k := range tc.wantAbsent {
				if v, ok := cfg.RuntimeParams[k]; ok {
					t.Errorf("%s = %q, want it unset", k, v)
				}
			}
			if cfg.ConnectTimeout != tc.wantConnect {
				t.Errorf("connect timeout %s, want %s", cfg.ConnectTimeout, tc.wantConnect)
			}
			if simple := cfg.DefaultQueryExecMode == pgx.QueryExecModeSimpleProtocol; simple != tc.wantSimple {
				t.Errorf("simple protocol %v, want %v", simple, tc.wantSimple)
			}
			if want := tc.sess.Database; want != "" && cfg.Database != want {
				t.Errorf("database %s, want %s", cfg.Database, want)
			}
			if len(tc.server.CACert) > 0 && (cfg.TLSConfig == nil || cfg.TLSConfig.RootCAs == nil || len(cfg.Fallbacks) > 0) {
				t.Errorf("with a CA: TLS %+v, %d plaintext fallbacks", cfg.TLSConfig, len(cfg.Fallbacks))
			}
		})
	}
}
