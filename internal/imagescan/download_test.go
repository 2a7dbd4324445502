package imagescan

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"

	"orderly.dev/orderly/internal/testing/testimages"
)

// osvServer serves <Ecosystem>/all.zip archives with ETags, as osv.dev's bucket does.
type osvServer struct {
	mu       sync.Mutex
	archives map[string][]byte
	// noETag: answer every request with the whole archive, as a plain file server might.
	noETag bool
}

func (o *osvServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	o.mu.Lock()
	defer o.mu.Unlock()
	eco, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/"), "/all.zip")
	b, found := o.archives[eco]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	if o.noETag {
		_, _ = w.Write(b)
		return
	}
	etag := fmt.Sprintf(`"%d"`, len(b))
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	w.Header().Set("ETag", etag)
	_, _ = w.Write(b)
}

func debianArchive(t *testing.T, vulns ...testimages.Vuln) []byte {
	t.Helper()
	dir := t.TempDir()
	if err := testimages.WriteOSV(dir, vulns...); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(dir, "Debian", "all.zip"))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestDownloadDB(t *testing.T) {
	srv := &osvServer{archives: map[string][]byte{"Debian": debianArchive(t, testVulns[0])}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	ctx := context.Background()
	dir := t.TempDir()

	changed, err := DownloadDB(ctx, ts.Client(), ts.URL, dir, "Debian")
	if err != nil || !changed {
		t.Fatalf("first download: changed %v, %v", changed, err)
	}
	s := newTestScanner(t, Options{DBDir: dir})
	v1 := s.DBVersion()
	if _, ecos, err := s.DBStatus(); err != nil || !reflect.DeepEqual(ecos, []string{"Debian"}) {
		t.Fatalf("loaded %v, %v", ecos, err)
	}
	if changed, err := DownloadDB(ctx, ts.Client(), ts.URL, dir, "Debian"); err != nil || changed {
		t.Fatalf("unchanged archive: changed %v, %v", changed, err)
	}
	// A server without ETags that sends the same bytes again changes nothing.
	srv.mu.Lock()
	srv.noETag = true
	srv.mu.Unlock()
	if changed, err := DownloadDB(ctx, ts.Client(), ts.URL, dir, "Debian"); err != nil || changed {
		t.Fatalf("the same bytes again: changed %v, %v", changed, err)
	}
	if changed, err := s.ReloadDB(); err != nil || changed || s.DBVersion() != v1 {
		t.Fatalf("the same bytes again changed the database's version: %v, %v", changed, err)
	}

	srv.mu.Lock()
	srv.archives["Debian"] = debianArchive(t, testVulns[0], testVulns[1])
	srv.mu.Unlock()
	if changed, err := DownloadDB(ctx, ts.Client(), ts.URL, dir, "Debian"); err != nil || !changed {
		t.Fatalf("changed archive: changed %v, %v", changed, err)
	}
	if changed, err := s.ReloadDB(); err != nil || !changed || s.DBVersion() == v1 {
		t.Fatalf("reload after the download: changed %v, %v", changed, err)
	}
	v2 := s.DBVersion()

	// A broken download and a missing ecosystem fail and leave what was there.
	srv.mu.Lock()
	srv.archives["Debian"] = []byte("<html>maintenance</html>")
	srv.mu.Unlock()
	changed, err = DownloadDB(ctx, ts.Client(), ts.URL, dir, "Debian", "Nope")
	if ReasonOf(err) != ReasonDatabaseMissing || changed {
		t.Fatalf("broken download: changed %v, %v; want DatabaseMissing", changed, err)
	}
	if changed, err := s.ReloadDB(); err != nil || changed || s.DBVersion() != v2 {
		t.Fatalf("after the failed download the archive changed: %v, %v", changed, err)
	}
	if _, err := DownloadDB(ctx, ts.Client(), ts.URL, dir, "../etc"); err == nil {
		t.Fatal("an ecosystem name with a slash was accepted")
	}
}

func TestDatabaseFlatLayout(t *testing.T) {
	// A ConfigMap volume: <Ecosystem>.zip files that are links into a dot directory.
	dir := t.TempDir()
	data := filepath.Join(dir, "..2026_12_04")
	if err := os.Mkdir(data, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(data, "Debian.zip"), debianArchive(t, testVulns[0]), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join("..2026_12_04", "Debian.zip"), filepath.Join(dir, "Debian.zip")); err != nil {
		t.Fatal(err)
	}
	s := newTestScanner(t, Options{DBDir: dir})
	if _, ecos, err := s.DBStatus(); err != nil || !reflect.DeepEqual(ecos, []string{"Debian"}) {
		t.Fatalf("loaded %v, %v", ecos, err)
	}
	rep, err := scanContents(s, testimages.Contents{Dpkg: []testimages.Pkg{{Name: "openssl", Version: "3.0.11-1~deb12u2"}}})
	if err != nil || len(rep.Findings) != 1 {
		t.Fatalf("%+v, %v", rep, err)
	}
}
