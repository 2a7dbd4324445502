package postgres

import (
	"slices"
	"strings"
	"testing"

	"orderly.dev/orderly/internal/database"
)

func TestUserMarkers(t *testing.T) {
	const uid = "u-1"
	tests := []struct {
		comment    string
		wantName   string
		wantAccess database.Access
	}{
		{comment: userMarker(uid, "reader"), wantName: "reader"},
		{comment: userMarkerWith(uid, "reader", database.ReadOnly), wantName: "reader", wantAccess: database.ReadOnly},
		{comment: userMarkerWith(uid, "app-w", database.ReadWrite), wantName: "app-w", wantAccess: database.ReadWrite},
		// The main role's marker, another owner's user, a forged access: not a user of uid.
		{comment: Marker(uid)},
		{comment: userMarker("u-2", "reader")},
		{comment: userMarker(uid, "reader") + accessSep + "Superuser"},
		{comment: ""},
	}
	for _, tt := range tests {
		name, access := userOf(tt.comment, uid)
		if name != tt.wantName || access != tt.wantAccess {
			t.Errorf("userOf(%q) = %q, %q; want %q, %q", tt.comment, name, access, tt.wantName, tt.wantAccess)
		}
	}
}

func TestGrantStatements(t *testing.T) {
	ro := grantStatements("orderly_x_r", database.ReadOnly, []string{"public"})
	rw := grantStatements("orderly_x_w", database.ReadWrite, []string{"public", "app"})
	for _, s := range ro {
		if strings.Contains(s, "INSERT") || strings.Contains(s, "SEQUENCES") {
			t.Errorf("ReadOnly gets %q", s)
		}
	}
	if !slices.Contains(ro, `ALTER DEFAULT PRIVILEGES GRANT SELECT ON TABLES TO "orderly_x_r"`) {
		t.Errorf("ReadOnly lacks future tables: %q", ro)
	}
	if !slices.Contains(rw, `GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA "app" TO "orderly_x_w"`) ||
		!slices.Contains(rw, `ALTER DEFAULT PRIVILEGES GRANT USAGE, SELECT, UPDATE ON SEQUENCES TO "orderly_x_w"`) {
		t.Errorf("ReadWrite: %q", rw)
	}
	for _, s := range append(ro, rw...) {
		for _, ddl := range []string{"CREATE", "TRUNCATE", "REFERENCES", "TRIGGER", "GRANT ALL"} {
			if strings.Contains(s, ddl) {
				t.Errorf("a user gets %s: %q", ddl, s)
			}
		}
	}
}

func TestLineAt(t *testing.T) {
	sql := "CREATE TABLE t (id int);\nINSERT INTO t VALUES (1);\nCREATE ROLE x;"
	for pos, want := range map[int]int{0: 0, 1: 1, 25: 1, 26: 2, 53: 3, 1000: 0} {
		if got := lineAt(sql, pos); got != want {
			t.Errorf("lineAt(%d) = %d, want %d", pos, got, want)
		}
	}
}
