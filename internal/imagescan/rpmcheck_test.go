package imagescan

import (
	"encoding/binary"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// What go-rpmdb would follow off the file, or loop on, is refused before it reads the
// file; a 12-byte header made it allocate 29 GB (found by FuzzRPMDatabase).
func TestCheckRPMFile(t *testing.T) {
	hugeBlob := ndbFile(fakeHeader(64))
	binary.LittleEndian.PutUint32(hugeBlob[4096+12:], 0xfffffff0) // the blob's length
	for name, tt := range map[string]struct {
		data    []byte
		wantErr string
	}{
		"Berkeley DB":                   {bdbFile(fakeHeader(64), ""), ""},
		"item past the page":            {bdbFile(fakeHeader(64), "index"), "past the page"},
		"overflow chain loops":          {bdbFile(fakeHeader(64), "loop"), "loops"},
		"chain to another kind of page": {bdbFile(fakeHeader(64), "type"), "no overflow page"},
		"content past the page":         {bdbFile(fakeHeader(64), "free"), "runs past the page"},
		"header does not fit its blob":  {bdbFile([]byte("not a header"), ""), "does not fit"},
		"NDB":                           {ndbFile(fakeHeader(64)), ""},
		"NDB blob past the file":        {hugeBlob, "runs past the file"},
		"NDB header too large":          {ndbFile([]byte("not a header, but 16-aligned!!!!")), "does not fit"},
		"SQLite (read by Orderly)":      {sqliteFile(1024, nil, 0), ""},
		"neither":                       {make([]byte, 600), "not an RPM database"},
	} {
		t.Run(name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "db")
			if err := os.WriteFile(path, tt.data, 0o600); err != nil {
				t.Fatal(err)
			}
			err := checkRPMFile(path)
			if tt.wantErr == "" && err != nil || tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)) {
				t.Fatalf("checkRPMFile = %v, want %q", err, tt.wantErr)
			}
		})
	}
	if err := checkHeaderBlob([]byte("not a header")); err == nil || !strings.Contains(err.Error(), "does not fit") {
		t.Errorf("checkHeaderBlob of 12 bytes claiming 0x6e6f7420 entries: %v", err)
	}
}
