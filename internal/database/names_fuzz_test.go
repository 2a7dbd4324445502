package database

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

var sqlName = regexp.MustCompile(`^[a-z0-9_]+$`)

// FuzzNames derives the names of a DevDatabase's database, role and users from any
// UID (the API server's, a UUID) and user name (spec.users[].name: [a-z0-9-], at most
// 16). Properties: every name is plain [a-z0-9_] (quoted anyway, but never needing
// it) within the engine's limit (63 for PostgreSQL, 64 and 32 for MySQL), two user
// names never share a role, and a user's role is never the main role. ValidPassword
// accepts exactly what Password makes: 26 to 64 base32 characters.
func FuzzNames(f *testing.F) {
	f.Add(uint64(0x3f0c7d2e1b2a4c5d), uint64(0x8e9f0a1b2c3d4e5f), "reader", "writer", "ABCDEFGHIJKLMNOPQRSTUVWXYZ")
	f.Add(uint64(1), uint64(2), "a-b", "a_b", "abc")
	f.Fuzz(func(t *testing.T, hi, lo uint64, name1, name2, password string) {
		uid := fmt.Sprintf("%08x-%04x-%04x-%04x-%012x", hi>>32, (hi>>16)&0xffff, hi&0xffff, lo>>48, lo&0xffffffffffff)
		for _, kind := range []string{string(datav1alpha1.EnginePostgres), string(datav1alpha1.EngineMySQL)} {
			db, role := NamesFor(kind, uid)
			limit := 63
			if kind == string(datav1alpha1.EngineMySQL) {
				limit = 64
			}
			for _, n := range []string{db, role} {
				if !sqlName.MatchString(n) || len(n) > limit {
					t.Fatalf("%s name %q of %s is not [a-z0-9_]{1,%d}", kind, n, uid, limit)
				}
			}
			valid := func(n string) bool {
				return len(n) > 0 && len(n) <= 16 && strings.Trim(n, "abcdefghijklmnopqrstuvwxyz0123456789-") == ""
			}
			if !valid(name1) || !valid(name2) {
				continue
			}
			r1, r2 := UserRoleFor(kind, uid, name1), UserRoleFor(kind, uid, name2)
			userLimit := 63
			if kind == string(datav1alpha1.EngineMySQL) {
				userLimit = MySQLUserMax
			}
			for _, r := range []string{r1, r2} {
				if !sqlName.MatchString(r) || len(r) > userLimit || r == role {
					t.Fatalf("%s role %q of user of %s is not a distinct [a-z0-9_]{1,%d}", kind, r, uid, userLimit)
				}
			}
			if (r1 == r2) != (name1 == name2) {
				t.Fatalf("%s users %q and %q have roles %q and %q", kind, name1, name2, r1, r2)
			}
		}
		want := len(password) >= 26 && len(password) <= 64 && strings.Trim(password, "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567") == ""
		if ValidPassword(password) != want {
			t.Fatalf("ValidPassword(%q) = %v", password, !want)
		}
		if p := Password(); !ValidPassword(p) {
			t.Fatalf("ValidPassword(Password()) is false for %q", p)
		}
	})
}
