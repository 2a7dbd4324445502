package imagescan

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"orderly.dev/orderly/internal/testing/testimages"
)

// scanContents runs what Scan runs after the pull (checks, extraction, matching) on an
// image built in memory; the registry path is covered by the integration tests.
func scanContents(s *Scanner, c testimages.Contents) (*Report, error) {
	img, err := c.Image("")
	if err != nil {
		return nil, err
	}
	if err := s.checkImage("test", img); err != nil {
		return nil, err
	}
	db, err := s.acquireDB()
	if err != nil {
		return nil, err
	}
	defer db.release()
	pkgs, osName, err := s.extract(context.Background(), "test", img)
	if err != nil {
		return nil, err
	}
	rep := &Report{Packages: len(pkgs), OS: osName, DBVersion: db.version}
	f, err := s.match(db, pkgs, rep)
	if err != nil {
		return nil, err
	}
	rep.setFindings(f, s.opts.MaxFindings)
	return rep, nil
}

// testVulns is a small OSV database for the packages the tests install.
var testVulns = []testimages.Vuln{
	{ID: "DEBIAN-CVE-2026-0001", Aliases: []string{"CVE-2026-0001"}, Ecosystem: "Debian:12", Package: "openssl", Fixed: "3.0.15-1~deb12u1", Severity: "CVSS:3.1/AV:N/AC:L/PR:N/UI:N/S:U/C:H/I:H/A:H"},
	{ID: "DEBIAN-CVE-2026-0002", Ecosystem: "Debian:12", Package: "zlib", Fixed: "1:1.2.13.dfsg-1", Severity: "LOW"},
	{ID: "DEBIAN-CVE-2026-0005", Ecosystem: "Debian:11", Package: "curl", Fixed: "7.88.1-10"},
	{ID: "ALPINE-CVE-2026-0003", Ecosystem: "Alpine:v3.20", Package: "busybox", Fixed: "1.36.1-r30", Severity: "HIGH"},
	{ID: "ALSA-2026:0006", Aliases: []string{"CVE-2026-0006"}, Ecosystem: "AlmaLinux:9", Package: "openssl-libs", Fixed: "1:3.0.7-27.el9", Severity: "HIGH"},
	{ID: "ALSA-2026:0006", Aliases: []string{"CVE-2026-0006"}, Ecosystem: "AlmaLinux:9", Package: "openssl", Fixed: "1:3.0.7-27.el9", Severity: "HIGH"},
	{ID: "GO-2026-0004", Aliases: []string{"CVE-2026-0004"}, Ecosystem: "Go", Package: "golang.org/x/text", Introduced: "0.0.0", Fixed: "0.3.8", Severity: "MODERATE"},
}

func newTestScanner(t *testing.T, opts Options, vulns ...testimages.Vuln) *Scanner {
	t.Helper()
	if opts.DBDir == "" {
		opts.DBDir = t.TempDir()
		if err := testimages.WriteOSV(opts.DBDir, vulns...); err != nil {
			t.Fatal(err)
		}
	}
	s, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestScanContents(t *testing.T) {
	s := newTestScanner(t, Options{}, testVulns...)
	tests := []struct {
		name         string
		contents     testimages.Contents
		wantFindings []Finding
		wantOS       string
		wantPackages int
		wantCounts   map[Severity]int
	}{{
		name: "debian: the vulnerable package is found; one at its fixed version and one of another release are not",
		contents: testimages.Contents{Dpkg: []testimages.Pkg{
			{Name: "openssl", Version: "3.0.11-1~deb12u2"}, {Name: "zlib", Version: "1:1.2.13.dfsg-1"}, {Name: "curl", Version: "7.88.1-9"},
		}},
		wantFindings: []Finding{{ID: "DEBIAN-CVE-2026-0001", Aliases: []string{"CVE-2026-0001"}, Package: "openssl", Ecosystem: "Debian:12",
			Installed: "3.0.11-1~deb12u2", Fixed: "3.0.15-1~deb12u1", Severity: SeverityCritical}},
		wantOS:       "debian 12",
		wantPackages: 3,
		wantCounts:   map[Severity]int{SeverityCritical: 1},
	}, {
		name:     "alpine apk",
		contents: testimages.Contents{Apk: []testimages.Pkg{{Name: "busybox", Version: "1.36.1-r29"}, {Name: "musl", Version: "1.2.5-r0"}}},
		wantFindings: []Finding{{ID: "ALPINE-CVE-2026-0003", Package: "busybox", Ecosystem: "Alpine:v3.20",
			Installed: "1.36.1-r29", Fixed: "1.36.1-r30", Severity: SeverityHigh}},
		wantOS:       "alpine 3.20.3",
		wantPackages: 2,
		wantCounts:   map[Severity]int{SeverityHigh: 1},
	}, {
		// A real RPM database, written by rpm: openssl at its fix is not reported,
		// which needs the epoch (1:) in the installed version.
		name: "almalinux rpm",
		contents: testimages.Contents{Rpm: []testimages.Pkg{
			{Name: "openssl-libs", Version: "1:3.0.7-24.el9"}, {Name: "openssl", Version: "1:3.0.7-27.el9"}, {Name: "bash", Version: "5.1.8-9.el9"},
		}},
		wantFindings: []Finding{{ID: "ALSA-2026:0006", Aliases: []string{"CVE-2026-0006"}, Package: "openssl-libs", Ecosystem: "AlmaLinux:9",
			Installed: "1:3.0.7-24.el9", Fixed: "1:3.0.7-27.el9", Severity: SeverityHigh}},
		wantOS:       "almalinux 9.4",
		wantPackages: 3,
		wantCounts:   map[Severity]int{SeverityHigh: 1},
	}, {
		name:     "go binary module",
		contents: testimages.Contents{GoModules: []testimages.Pkg{{Name: "golang.org/x/text", Version: "v0.3.7"}}},
		wantFindings: []Finding{{ID: "GO-2026-0004", Aliases: []string{"CVE-2026-0004"}, Package: "golang.org/x/text", Ecosystem: "Go",
			Installed: "0.3.7", Fixed: "0.3.8", Severity: SeverityMedium}},
		// the toolchain (stdlib), the module and the program itself
		wantPackages: 3,
		wantCounts:   map[Severity]int{SeverityMedium: 1},
	}, {
		name:         "clean image",
		contents:     testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.15-1~deb12u1"}, {Name: "bash", Version: "5.2.15-2+b2"}}},
		wantOS:       "debian 12",
		wantPackages: 2,
		wantCounts:   map[Severity]int{},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := scanContents(s, tt.contents)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(rep.Findings, tt.wantFindings) {
				t.Errorf("findings:\n got %+v\nwant %+v", rep.Findings, tt.wantFindings)
			}
			if rep.OS != tt.wantOS || rep.Packages != tt.wantPackages {
				t.Errorf("OS %q, %d packages; want %q, %d", rep.OS, rep.Packages, tt.wantOS, tt.wantPackages)
			}
			if !reflect.DeepEqual(rep.Counts, tt.wantCounts) {
				t.Errorf("counts %v, want %v", rep.Counts, tt.wantCounts)
			}
		})
	}
}

func TestScanBoundsFindingsWorstFirst(t *testing.T) {
	s := newTestScanner(t, Options{MaxFindings: 2},
		testimages.Vuln{ID: "DEBIAN-CVE-2026-0010", Ecosystem: "Debian:12", Package: "a", Fixed: "2", Severity: "LOW"},
		testimages.Vuln{ID: "DEBIAN-CVE-2026-0011", Ecosystem: "Debian:12", Package: "b", Fixed: "2", Severity: "CRITICAL"},
		testimages.Vuln{ID: "DEBIAN-CVE-2026-0012", Ecosystem: "Debian:12", Package: "c", Fixed: "2", Severity: "HIGH"},
		testimages.Vuln{ID: "DEBIAN-CVE-2026-0013", Ecosystem: "Debian:12", Package: "c", Fixed: "2"},
	)
	rep, err := scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "a", Version: "1"}, {Name: "b", Version: "1"}, {Name: "c", Version: "1"}}})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range rep.Findings {
		got = append(got, f.ID)
	}
	if want := []string{"DEBIAN-CVE-2026-0011", "DEBIAN-CVE-2026-0012"}; !reflect.DeepEqual(got, want) {
		t.Errorf("kept %v, want %v", got, want)
	}
	want := map[Severity]int{SeverityCritical: 1, SeverityHigh: 1, SeverityLow: 1, SeverityUnknown: 1}
	if !reflect.DeepEqual(rep.Counts, want) {
		t.Errorf("counts %v, want %v (over all findings)", rep.Counts, want)
	}
}

func TestScanFailsRatherThanLookingClean(t *testing.T) {
	t.Run("no archive for the image's ecosystem", func(t *testing.T) {
		s := newTestScanner(t, Options{}, testimages.Vuln{ID: "GO-1", Ecosystem: "Go", Package: "x", Fixed: "1.0.0"})
		_, err := scanContents(s, testimages.Contents{Apk: []testimages.Pkg{{Name: "busybox", Version: "1.36.1-r29"}}})
		if ReasonOf(err) != ReasonDatabaseMissing {
			t.Fatalf("got %v, want DatabaseMissing", err)
		}
	})
	t.Run("too large", func(t *testing.T) {
		s := newTestScanner(t, Options{MaxImageBytes: 10}, testVulns...)
		_, err := scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "bash", Version: "5"}}})
		if ReasonOf(err) != ReasonTooLarge {
			t.Fatalf("got %v, want TooLarge", err)
		}
	})
	t.Run("unpacks too large", func(t *testing.T) {
		s := newTestScanner(t, Options{MaxUnpackedBytes: 4096}, testVulns...)
		_, err := scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "bash", Version: "5"}}, Files: map[string][]byte{"/big": make([]byte, 64<<10)}})
		if ReasonOf(err) != ReasonTooLarge {
			t.Fatalf("got %v, want TooLarge", err)
		}
	})
}

func TestDatabase(t *testing.T) {
	dir := t.TempDir()
	s := newTestScanner(t, Options{DBDir: dir})
	if v, _, err := s.DBStatus(); v != "" || ReasonOf(err) != ReasonDatabaseMissing {
		t.Fatalf("empty directory: version %q, error %v; want none and DatabaseMissing", v, err)
	}
	if _, err := scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "bash", Version: "5"}}}); ReasonOf(err) != ReasonDatabaseMissing {
		t.Fatalf("scan without a database: %v, want DatabaseMissing", err)
	}

	if err := testimages.WriteOSV(dir, testVulns[0]); err != nil {
		t.Fatal(err)
	}
	changed, err := s.ReloadDB()
	if err != nil || !changed {
		t.Fatalf("reload after the database arrived: changed %v, %v", changed, err)
	}
	v1 := s.DBVersion()
	if changed, err := s.ReloadDB(); err != nil || changed || s.DBVersion() != v1 {
		t.Fatalf("reload of the same files: changed %v, %v, version %q -> %q", changed, err, v1, s.DBVersion())
	}
	rep, err := scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "zlib", Version: "1:1.2.12"}}})
	if err != nil || len(rep.Findings) != 0 || rep.DBVersion != v1 {
		t.Fatalf("before the zlib record: %+v, %v", rep, err)
	}

	if err := testimages.WriteOSV(dir, testVulns[0], testVulns[1]); err != nil {
		t.Fatal(err)
	}
	if changed, err := s.ReloadDB(); err != nil || !changed || s.DBVersion() == v1 {
		t.Fatalf("reload of a changed archive: changed %v, %v, version %q (was %q)", changed, err, s.DBVersion(), v1)
	}
	v2 := s.DBVersion()
	rep, err = scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "zlib", Version: "1:1.2.12"}}})
	if err != nil || len(rep.Findings) != 1 || rep.DBVersion != v2 {
		t.Fatalf("after the zlib record: %+v, %v", rep, err)
	}

	if err := os.WriteFile(filepath.Join(dir, "VERSION"), []byte("osv-2026-12-04\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReloadDB(); err != nil {
		t.Fatal(err)
	}
	v3 := s.DBVersion()
	if v3 == v2 || v3[:len("osv-2026-12-04-")] != "osv-2026-12-04-" {
		t.Fatalf("with a VERSION file the version is %q (was %q)", v3, v2)
	}

	// A corrupt archive is refused; the loaded database stays in use (archives are
	// replaced by rename, as a ConfigMap volume or a download does).
	if err := os.WriteFile(filepath.Join(dir, "Debian", "new.zip"), []byte("not a zip"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(filepath.Join(dir, "Debian", "new.zip"), filepath.Join(dir, "Debian", "all.zip")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.ReloadDB(); ReasonOf(err) != ReasonDatabaseMissing {
		t.Fatalf("corrupt archive: %v, want DatabaseMissing", err)
	}
	if v, _, err := s.DBStatus(); v != v3 || ReasonOf(err) != ReasonDatabaseMissing {
		t.Fatalf("after a failed reload: version %q, %v; want %q kept and the error", v, err, v3)
	}
	if rep, err := scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "zlib", Version: "1:1.2.12"}}}); err != nil || len(rep.Findings) != 1 {
		t.Fatalf("scan on the kept database: %+v, %v", rep, err)
	}
	fresh := newTestScanner(t, Options{DBDir: dir})
	if _, err := scanContents(fresh, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "zlib", Version: "1"}}}); ReasonOf(err) != ReasonDatabaseMissing {
		t.Fatalf("a scanner that never loaded a good database: %v, want DatabaseMissing", err)
	}

	// An archive overwritten in place under a loaded database: scans fail, they do
	// not come out clean.
	inPlace := newTestScanner(t, Options{}, testVulns...)
	if err := os.WriteFile(filepath.Join(inPlace.opts.DBDir, "Debian", "all.zip"), []byte("truncated"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := scanContents(inPlace, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.11-1~deb12u2"}}}); ReasonOf(err) != ReasonDatabaseMissing {
		t.Fatalf("archive overwritten in place: %v, want DatabaseMissing", err)
	}

	// A record that is not JSON is refused too.
	bad := t.TempDir()
	if err := testimages.WriteOSV(bad, testVulns[0]); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(bad, "Debian", "all.zip"), zipWith(t, "X.json", "{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := newTestScanner(t, Options{DBDir: bad}).DBStatus(); ReasonOf(err) != ReasonDatabaseMissing {
		t.Fatalf("record that is not JSON: %v, want DatabaseMissing", err)
	}
}

func TestDatabaseScalibrLayout(t *testing.T) {
	dir := t.TempDir()
	if err := testimages.WriteOSV(filepath.Join(dir, "osv-scalibr"), testVulns...); err != nil {
		t.Fatal(err)
	}
	s := newTestScanner(t, Options{DBDir: dir})
	if _, ecos, err := s.DBStatus(); err != nil || !reflect.DeepEqual(ecos, []string{"AlmaLinux", "Alpine", "Debian", "Go"}) {
		t.Fatalf("ecosystems %v, %v", ecos, err)
	}
}

func TestCheckImageRefusesArtifacts(t *testing.T) {
	s := newTestScanner(t, Options{}, testVulns...)
	img, err := testimages.ArtifactImage([]byte("hello"))
	if err != nil {
		t.Fatal(err)
	}
	err = s.checkImage("artifact", img)
	var e *Error
	if !errors.As(err, &e) || e.Reason != ReasonUnsupportedMediaType {
		t.Fatalf("got %v, want UnsupportedMediaType", err)
	}
}

func TestConcurrentScansAndReloads(t *testing.T) {
	dir := t.TempDir()
	if err := testimages.WriteOSV(dir, testVulns...); err != nil {
		t.Fatal(err)
	}
	s := newTestScanner(t, Options{DBDir: dir})
	c := testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.11-1~deb12u2"}}}
	errs := make(chan error, 8)
	for i := 0; i < 4; i++ {
		go func() {
			for j := 0; j < 5; j++ {
				rep, err := scanContents(s, c)
				if err == nil && len(rep.Findings) != 1 {
					err = errors.New("the openssl finding is missing")
				}
				if err != nil {
					errs <- err
					return
				}
			}
			errs <- nil
		}()
	}
	for i := 0; i < 5; i++ {
		extra := testimages.Vuln{ID: "DEBIAN-CVE-2026-09" + string(rune('0'+i)), Ecosystem: "Debian:12", Package: "bash", Fixed: "9"}
		if err := testimages.WriteOSV(dir, append(testVulns[:3:3], extra)...); err != nil {
			t.Fatal(err)
		}
		if _, err := s.ReloadDB(); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 4; i++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
