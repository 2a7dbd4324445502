package images

import (
	"archive/zip"
	"bytes"
	"debug/buildinfo"
	"encoding/json"
	"path/filepath"
	"testing"
)

func TestBuildGoBinaryListsTheModules(t *testing.T) {
	bin, err := BuildGoBinary([]Pkg{{Name: "golang.org/x/text", Version: "v0.3.7"}, {Name: "github.com/Example/Caps", Version: "1.2.3"}})
	if err != nil {
		t.Fatal(err)
	}
	bi, err := buildinfo.Read(bytes.NewReader(bin))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, d := range bi.Deps {
		got[d.Path] = d.Version
	}
	if got["golang.org/x/text"] != "v0.3.7" || got["github.com/Example/Caps"] != "v1.2.3" {
		t.Fatalf("build info lists %v", got)
	}
}

func TestWriteOSV(t *testing.T) {
	dir := t.TempDir()
	if err := WriteOSV(dir,
		Vuln{ID: "X-1", Ecosystem: "Debian:12", Package: "a", Fixed: "2", Severity: "HIGH"},
		Vuln{ID: "X-1", Ecosystem: "Debian:11", Package: "a", Fixed: "3"},
		Vuln{ID: "GO-1", Ecosystem: "Go", Package: "m", Severity: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"},
	); err != nil {
		t.Fatal(err)
	}
	zr, err := zip.OpenReader(filepath.Join(dir, "Debian", "all.zip"))
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	if len(zr.File) != 1 || zr.File[0].Name != "X-1.json" {
		t.Fatalf("Debian archive holds %d files", len(zr.File))
	}
	rc, err := zr.File[0].Open()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var rec struct {
		ID       string `json:"id"`
		Affected []struct {
			Package struct{ Ecosystem, Name string }
		} `json:"affected"`
		DatabaseSpecific map[string]string `json:"database_specific"`
	}
	if err := json.NewDecoder(rc).Decode(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.ID != "X-1" || len(rec.Affected) != 2 || rec.DatabaseSpecific["severity"] != "HIGH" {
		t.Fatalf("record %+v", rec)
	}
	if err := WriteOSV(dir, Vuln{ID: "X-2"}); err == nil {
		t.Fatal("a record without ecosystem and package was written")
	}
}
