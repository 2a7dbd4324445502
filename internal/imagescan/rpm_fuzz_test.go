package imagescan

import (
	"bytes"
	"context"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/osv-scalibr/extractor/filesystem"
	scalibrfs "github.com/google/osv-scalibr/fs"
	"github.com/google/osv-scalibr/inventory"

	"orderly.dev/orderly/internal/testing/testimages"
)

// rpmHeaderBlobs are the package headers of a database rpm itself wrote, when rpm is
// installed (the seeds are then real headers); none otherwise.
func rpmHeaderBlobs(f *testing.F) [][]byte {
	if _, err := exec.LookPath("rpmbuild"); err != nil {
		return nil
	}
	data, err := testimages.RPMDatabase([]testimages.Pkg{{Name: "pkg", Version: "2:1.5-6.el9"}})
	if err != nil {
		f.Logf("no RPM database for the seeds: %v", err)
		return nil
	}
	tbl, err := openSQLite(bytes.NewReader(data), int64(len(data)))
	if err != nil {
		f.Fatal(err)
	}
	rows, err := rpmSQLiteStmt{&rpmSQLiteConn{t: tbl}}.Query(nil)
	if err != nil {
		f.Fatal(err)
	}
	return rows.(*rpmSQLiteRows).blobs
}

// ndbFile is an NDB database (Packages.db, SUSE) with one slot pointing at one blob.
func ndbFile(blob []byte) []byte {
	le := binary.LittleEndian
	var b bytes.Buffer
	for _, v := range []uint32{'R' | 'p'<<8 | 'm'<<16 | 'P'<<24, 0, 1, 1, 0, 0, 0, 0} {
		_ = binary.Write(&b, le, v)
	}
	slots := make([]byte, 4096)
	for i := 0; i < len(slots); i += 16 {
		le.PutUint32(slots[i:], 'S'|'l'<<8|'o'<<16|'t'<<24) // free slots too
	}
	le.PutUint32(slots[4:], 1)
	le.PutUint32(slots[8:], 4096/16) // blocks are 16 bytes: the one after the slot page
	le.PutUint32(slots[12:], uint32(len(blob)/16+2))
	b.Write(slots[:4096-32])
	for _, v := range []uint32{'B' | 'l'<<8 | 'b'<<16 | 'S'<<24, 1, 0, uint32(len(blob))} {
		_ = binary.Write(&b, le, v)
	}
	b.Write(blob)
	b.Write(make([]byte, 16))
	return b.Bytes()
}

// bdbFile is a Berkeley DB hash database (Packages, older RHEL) of 4096-byte pages:
// the metadata page, a hash page with one off-page item, and the overflow page that
// holds blob. damage spoils it the way a crafted file can: "index" (the item's offset
// past the page), "loop" (the overflow chain leads back to itself), "type" (the chain
// leads to a page that is no overflow page), "free" (the last page's content runs
// past it).
func bdbFile(blob []byte, damage string) []byte {
	const ps = 4096
	le := binary.LittleEndian
	file := make([]byte, 3*ps)
	meta := file[:ps]
	le.PutUint32(meta[12:], 0x061561) // hash magic
	le.PutUint32(meta[16:], 9)        // version
	le.PutUint32(meta[20:], ps)
	meta[25] = 8               // hash metadata page
	le.PutUint32(meta[32:], 2) // last page
	hash := file[ps : 2*ps]
	le.PutUint32(hash[8:], 1)
	le.PutUint16(hash[20:], 2) // one key and value
	hash[25] = 13              // hash page
	item := uint16(4000)
	if damage == "index" {
		item = 5000
	}
	le.PutUint16(hash[26:], 3900) // the key
	le.PutUint16(hash[28:], item) // the value: an off-page item
	hash[4000] = 3
	le.PutUint32(hash[4004:], 2)
	le.PutUint32(hash[4008:], uint32(len(blob)))
	over := file[2*ps:]
	le.PutUint32(over[8:], 2)
	le.PutUint16(over[22:], uint16(len(blob)))
	over[25] = 7 // overflow page
	copy(over[26:], blob)
	switch damage {
	case "loop":
		le.PutUint32(over[16:], 2)
	case "type":
		over[25] = 13
	case "free":
		le.PutUint16(over[22:], 5000)
	}
	return file
}

// FuzzRPMDatabase reads any bytes as an image's RPM database, in each of the three
// places and forms the scanner looks for (rpmdb.sqlite, Packages.db, Packages), with
// Orderly's extractor: go-rpmdb's readers and Orderly's SQLite reader on what an
// image's author wrote. Properties: no panic (a panic here would stop the manager);
// a refusal is an error with a message; every package read has a name.
func FuzzRPMDatabase(f *testing.F) {
	blobs := rpmHeaderBlobs(f)
	for _, b := range blobs {
		f.Add(sqliteFile(16384, [][]byte{b}, 0), uint8(0))
		f.Add(ndbFile(b), uint8(1))
	}
	f.Add(ndbFile([]byte("not a header, but 16-aligned!!!!")), uint8(1))
	f.Add(ndbFile(fakeHeader(64)), uint8(1))
	for _, damage := range []string{"", "index", "loop", "type", "free"} {
		f.Add(bdbFile(fakeHeader(64), damage), uint8(2))
	}
	// A 12-byte header claiming 0x6e6f7420 index entries: go-rpmdb allocated 29 GB
	// for it, and the manager died.
	f.Add(sqliteFile(1024, [][]byte{[]byte("not a header")}, 0), uint8(0))
	files := []string{"var/lib/rpm/rpmdb.sqlite", "usr/lib/sysimage/rpm/Packages.db", "var/lib/rpm/Packages"}
	f.Fuzz(func(t *testing.T, data []byte, form uint8) {
		root := t.TempDir()
		path := files[int(form)%len(files)]
		if err := os.MkdirAll(filepath.Join(root, filepath.Dir(path)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, path), data, 0o600); err != nil {
			t.Fatal(err)
		}
		type result struct {
			inv inventory.Inventory
			err error
		}
		done := make(chan result, 1)
		go func() {
			inv, err := rpmExtractor{}.Extract(context.Background(), &filesystem.ScanInput{FS: scalibrfs.DirFS(root), Path: path, Root: root})
			done <- result{inv, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("reading the %s did not end within 30s", path)
		}
		inv, err := r.inv, r.err
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		for _, p := range inv.Packages {
			if p.Name == "" {
				t.Fatalf("a package without a name: %+v", p)
			}
		}
	})
}
