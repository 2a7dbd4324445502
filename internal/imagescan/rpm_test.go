package imagescan

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	rpmdb "github.com/erikvarga/go-rpmdb/pkg"

	"orderly.dev/orderly/internal/testing/testimages"
)

// TestRPMSQLiteReader reads databases that rpm itself wrote: enough packages for the
// Packages table to need interior pages, one header long enough to spill onto
// overflow pages. Every package must come back with its version; a damaged file must
// fail, never list fewer packages.
func TestRPMSQLiteReader(t *testing.T) {
	var pkgs []testimages.Pkg
	for i := range 12 {
		pkgs = append(pkgs, testimages.Pkg{Name: fmt.Sprintf("pkg-%02d", i), Version: fmt.Sprintf("1.%d-%d.el9", i, i+1)})
	}
	pkgs[5].Version = "2:1.5-6.el9"
	pkgs[7].Description = strings.Repeat("a long description spills onto overflow pages. ", 600) // ~28 KB
	data, err := testimages.RPMDatabase(pkgs)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "rpmdb.sqlite")
	if err := os.WriteFile(file, data, 0o600); err != nil {
		t.Fatal(err)
	}

	// The test covers what it means to: an interior root page and an overflow chain.
	tbl, err := openSQLite(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		t.Fatal(err)
	}
	root, err := tbl.rootPage("Packages")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := tbl.page(root)
	cells, err := tbl.cells(root)
	if err != nil {
		t.Fatal(err)
	}
	longest := 0
	for _, c := range cells {
		rec, err := tbl.row(c)
		if err != nil {
			t.Fatal(err)
		}
		longest = max(longest, len(rec[1].text))
	}
	if page[0] != 0x05 || len(cells) != len(pkgs) || longest <= tbl.usable {
		t.Fatalf("root page type %#x, %d rows, longest blob %d bytes (page %d): the database does not exercise interior and overflow pages",
			page[0], len(cells), longest, tbl.usable)
	}

	db, err := rpmdb.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	list, err := db.ListPackages()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range list {
		v := p.Version + "-" + p.Release
		if p.EpochNum() > 0 {
			v = fmt.Sprintf("%d:%s", p.EpochNum(), v)
		}
		got[p.Name] = v
	}
	for _, p := range pkgs {
		if got[p.Name] != p.Version {
			t.Errorf("%s: version %q, want %q", p.Name, got[p.Name], p.Version)
		}
	}
	if len(got) != len(pkgs) {
		t.Errorf("%d packages, want %d", len(got), len(pkgs))
	}

	t.Run("damaged files fail", func(t *testing.T) {
		// A leaf page's cell pointer sent past the page, and an overflow chain cut.
		for name, damage := range map[string]func([]byte){
			"cell outside its page": func(b []byte) {
				p := cells[len(cells)-1].page
				hdr := int(p-1) * tbl.pageSize
				binary.BigEndian.PutUint16(b[hdr+8:], uint16(tbl.pageSize-1))
			},
			"overflow chain cut short": func(b []byte) {
				for _, c := range cells {
					pg := b[int(c.page-1)*tbl.pageSize : int(c.page)*tbl.pageSize]
					size, n := sqliteVarint(pg[c.off:])
					if int(size) > tbl.usable {
						_, m := sqliteVarint(pg[c.off+n:])
						binary.BigEndian.PutUint32(pg[c.off+n+m+tbl.localBytes(int(size)):], 0)
						return
					}
				}
				t.Fatal("no overflowing row")
			},
			"truncated file": nil,
		} {
			t.Run(name, func(t *testing.T) {
				b := bytes.Clone(data)
				if damage == nil {
					b = b[:len(b)/2]
				} else {
					damage(b)
				}
				bad := filepath.Join(t.TempDir(), "rpmdb.sqlite")
				if err := os.WriteFile(bad, b, 0o600); err != nil {
					t.Fatal(err)
				}
				db, err := rpmdb.Open(bad)
				if err == nil {
					var list []*rpmdb.PackageInfo
					list, err = db.ListPackages()
					if err == nil {
						t.Fatalf("a damaged database listed %d packages without an error", len(list))
					}
				}
				t.Log(err)
			})
		}
	})
}
