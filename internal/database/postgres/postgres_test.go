package postgres

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"orderly.dev/orderly/internal/database"
)

func TestJudge(t *testing.T) {
	const uid = "0a1b2c3d-0000-4000-8000-00000000abcd"
	name, role := database.Names(uid)
	db := database.Database{Name: name, Role: role, OwnerUID: uid}
	marked := roleState{exists: true, comment: Marker(uid)}
	creating := roleState{exists: true, comment: creatingMarker(uid)}
	unmarked := roleState{exists: true}
	for _, tc := range []struct {
		name string
		db   databaseState
		role roleState
		want ownership
	}{
		{name: "admin-owned and marked", db: databaseState{exists: true, owner: "admin", comment: Marker(uid)}, role: marked, want: ours},
		{name: "admin-owned, marked, role gone", db: databaseState{exists: true, owner: "admin", comment: Marker(uid)}, want: ours},
		{name: "unmarked while Orderly creates it", db: databaseState{exists: true, owner: "admin"}, role: creating, want: unprepared},
		{name: "unmarked, nobody creating it: someone else's", db: databaseState{exists: true, owner: "admin"}, role: marked, want: notOurs},
		{name: "marked for another DevDatabase", db: databaseState{exists: true, owner: "admin", comment: Marker("other")}, role: marked, want: notOurs},
		{name: "retained", db: databaseState{exists: true, owner: "admin", comment: retainedPrefix + uid}, want: released},
		{name: "made by an earlier version", db: databaseState{exists: true, owner: role, comment: Marker(uid)}, role: marked, want: legacy},
		// The role owned it and could write any comment: the comment is no evidence.
		{name: "earlier version, comment rewritten by the role", db: databaseState{exists: true, owner: role, comment: "mine now"}, role: marked, want: legacy},
		{name: "earlier version, posing as retained", db: databaseState{exists: true, owner: role, comment: retainedPrefix + uid}, role: marked, want: legacy},
		{name: "owned by an unmarked role of that name", db: databaseState{exists: true, owner: role, comment: Marker(uid)}, role: unmarked, want: notOurs},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := judge(tc.db, tc.role, db); got != tc.want {
				t.Errorf("judge = %d, want %d", got, tc.want)
			}
		})
	}
}

// The verifier is what PostgreSQL computes from the password (RFC 7677), and does
// not contain it.
func TestSCRAMVerifier(t *testing.T) {
	password := database.Password()
	v, err := scramVerifier(password)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(v, password) {
		t.Fatal("the verifier contains the password")
	}
	head, keys, ok := strings.Cut(v, "$")
	if !ok || head != "SCRAM-SHA-256" {
		t.Fatalf("verifier %q", v)
	}
	params, pair, _ := strings.Cut(keys, "$")
	it, salt, _ := strings.Cut(params, ":")
	stored, server, _ := strings.Cut(pair, ":")
	iter, err := strconv.Atoi(it)
	if err != nil || iter != 4096 {
		t.Fatalf("iterations %q", it)
	}
	rawSalt, _ := base64.StdEncoding.DecodeString(salt)
	salted, _ := pbkdf2.Key(sha256.New, password, rawSalt, iter, 32)
	h := hmac.New(sha256.New, salted)
	h.Write([]byte("Client Key"))
	wantStored := sha256.Sum256(h.Sum(nil))
	h = hmac.New(sha256.New, salted)
	h.Write([]byte("Server Key"))
	if stored != base64.StdEncoding.EncodeToString(wantStored[:]) || server != base64.StdEncoding.EncodeToString(h.Sum(nil)) {
		t.Errorf("verifier %q does not match the password", v)
	}
	if again, _ := scramVerifier(password); again == v {
		t.Error("two verifiers share a salt")
	}
}

func TestSameValidity(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	later := at.Add(time.Hour)
	inMs := at.Add(300 * time.Millisecond)
	for _, tc := range []struct {
		have *time.Time
		want time.Time
		same bool
	}{
		{nil, time.Time{}, true},
		{nil, at, false},
		{&at, at, true},
		{&inMs, at, true},
		{&at, later, false},
		{&at, time.Time{}, false},
	} {
		if got := sameValidity(tc.have, tc.want); got != tc.same {
			t.Errorf("sameValidity(%v, %v) = %v", tc.have, tc.want, got)
		}
	}
	if validUntil(time.Time{}) != "infinity" || validUntil(at) != "2026-01-02T03:04:05Z" {
		t.Errorf("validUntil: %s, %s", validUntil(time.Time{}), validUntil(at))
	}
}

func TestConnStringUsesTheEffectiveSSLMode(t *testing.T) {
	for _, tc := range []struct {
		server database.Server
		want   string
	}{
		{database.Server{Host: "h", Port: 5432}, "sslmode='prefer'"},
		{database.Server{Host: "h", Port: 5432, SSLMode: "disable"}, "sslmode='disable'"},
		{database.Server{Host: "h", Port: 5432, CACert: []byte("x")}, "sslmode='verify-full'"},
	} {
		if got := ConnString(tc.server, "postgres"); !strings.Contains(got, tc.want) {
			t.Errorf("%s: want %s", got, tc.want)
		}
	}
}

// The postgres connector refuses another engine with ErrEngineUnsupported, as the
// mysql one does (it used to return an error of its own that callers could not tell).
func TestConnectRefusesOtherEngines(t *testing.T) {
	c := NewConnector()
	defer c.Close()
	if _, err := c.Connect(context.Background(), "mysql", database.Server{}); !errors.Is(err, database.ErrEngineUnsupported) {
		t.Errorf("the postgres connector took mysql: %v", err)
	}
	for _, kind := range []string{"", Kind} {
		e, err := c.Connect(context.Background(), kind, database.Server{Name: "a", Host: "127.0.0.1", Port: 1})
		if err != nil {
			t.Fatalf("engine %q: %v", kind, err)
		}
		if _, ok := e.(*Postgres); !ok {
			t.Errorf("engine %q: got %T", kind, e)
		}
	}
}
