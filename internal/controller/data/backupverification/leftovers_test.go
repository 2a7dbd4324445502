package backupverification

import (
	"context"
	"slices"
	"strings"
	"testing"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
)

func TestRunOf(t *testing.T) {
	bv := &datav1alpha1.BackupVerification{}
	bv.UID = "0b7c6a1e-2f3d-4c5b-9a8e-7d6c5b4a3f21"
	prefix := runPrefix(bv)
	if want := "orderly_0b7c6a1e2f3d4c5b9a8e7d6c5b4a3f21bv"; prefix != want {
		t.Fatalf("prefix %q, want %q", prefix, want)
	}
	tests := []struct {
		name   string
		want   int64
		wantOK bool
	}{
		{prefix + "1", 1, true},
		{prefix + "120", 120, true},
		{throwaway(bv, 7).Name, 7, true},
		{prefix, 0, false},
		{prefix + "0", 0, false},
		{prefix + "07", 0, false},
		{prefix + "1x", 0, false},
		{prefix + "1_reader", 0, false},
		{"orderly_0b7c6a1e2f3d4c5b9a8e7d6c5b4a3f21", 0, false}, // a DevDatabase's name
	}
	for _, tt := range tests {
		n, ok := runOf(prefix, tt.name)
		if n != tt.want || ok != tt.wantOK {
			t.Errorf("runOf(%q) = %d, %v; want %d, %v", tt.name, n, ok, tt.want, tt.wantOK)
		}
	}
}

// ownedOnly is an engine whose listing is fixed; it can do nothing else.
type ownedOnly struct {
	database.Engine
	owned database.Owned
}

func (e ownedOnly) Owned(_ context.Context, prefix string) (database.Owned, error) {
	var out database.Owned
	for _, n := range e.owned.Databases {
		if strings.HasPrefix(n, prefix) {
			out.Databases = append(out.Databases, n)
		}
	}
	for _, n := range e.owned.Roles {
		if strings.HasPrefix(n, prefix) {
			out.Roles = append(out.Roles, n)
		}
	}
	return out, nil
}

// A run is found from its database or its role (a run interrupted before its
// database was made has only the role), once, and only the runs of this object.
func TestLeftoverRuns(t *testing.T) {
	bv, other := &datav1alpha1.BackupVerification{}, &datav1alpha1.BackupVerification{}
	bv.UID, other.UID = "0b7c6a1e-2f3d-4c5b-9a8e-7d6c5b4a3f21", "1b7c6a1e-2f3d-4c5b-9a8e-7d6c5b4a3f21"
	e := ownedOnly{owned: database.Owned{
		Databases: []string{throwaway(bv, 3).Name, throwaway(other, 1).Name, "orderly_0b7c6a1e2f3d4c5b9a8e7d6c5b4a3f21"},
		Roles:     []string{throwaway(bv, 3).Role, throwaway(bv, 12).Role, throwaway(other, 2).Role},
	}}
	runs, err := leftoverRuns(context.Background(), e, bv)
	if err != nil {
		t.Fatal(err)
	}
	if want := []int64{3, 12}; !slices.Equal(runs, want) {
		t.Errorf("runs %v, want %v", runs, want)
	}
}
