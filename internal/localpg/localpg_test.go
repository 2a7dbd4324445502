package localpg

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func TestFindBinDirFromEnv(t *testing.T) {
	empty := t.TempDir()
	withInitdb := t.TempDir()
	if err := os.WriteFile(filepath.Join(withInitdb, "initdb"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		dir     string
		wantDir string
		wantErr error
	}{
		{name: "no initdb", dir: empty, wantErr: ErrNotInstalled},
		{name: "initdb", dir: withInitdb, wantDir: withInitdb},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv(BinDirEnv, tc.dir)
			got, err := FindBinDir()
			if !errors.Is(err, tc.wantErr) || got != tc.wantDir {
				t.Fatalf("FindBinDir() = %q, %v; want %q, %v", got, err, tc.wantDir, tc.wantErr)
			}
		})
	}
}

func TestMajorOf(t *testing.T) {
	if got := majorOf("/usr/lib/postgresql/15/bin/initdb"); got != 15 {
		t.Fatalf("majorOf = %d, want 15", got)
	}
}

func TestReachable(t *testing.T) {
	closed := filepath.Join(t.TempDir(), "closed") // t.TempDir's parent is 0700
	if err := os.MkdirAll(filepath.Join(closed, "data"), 0o700); err != nil {
		t.Fatal(err)
	}
	const nobody = 65534
	if err := reachable(filepath.Join(closed, "data"), nobody); err == nil {
		t.Fatal("a directory below a 0700 directory of another user counts as reachable")
	}
	open, err := os.MkdirTemp("", "orderly-localpg-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(open) })
	if err := reachable(open, nobody); err != nil {
		t.Fatalf("a directory right under /tmp counts as unreachable: %v", err)
	}
}
