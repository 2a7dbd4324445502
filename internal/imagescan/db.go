package imagescan

import (
	"archive/zip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
)

// versionFile, when present in the database directory, is mixed into DBVersion (and
// shown in it), so a bundle can carry its own name ("osv-2026-12-04").
const versionFile = "VERSION"

// maxRecordBytes bounds one OSV record; real ones are a few kilobytes.
const maxRecordBytes = 8 << 20

// osvRecord is the part of an OSV record (https://ossf.github.io/osv-schema/) the
// scanner reads. Unknown fields are ignored, so newer schema versions load.
type osvRecord struct {
	ID               string          `json:"id"`
	Aliases          []string        `json:"aliases"`
	Withdrawn        string          `json:"withdrawn"`
	Severity         []osvSeverity   `json:"severity"`
	Affected         []osvAffected   `json:"affected"`
	DatabaseSpecific json.RawMessage `json:"database_specific"`
}

type osvSeverity struct {
	Type  string `json:"type"`
	Score string `json:"score"`
}

type osvAffected struct {
	Package struct {
		Ecosystem string `json:"ecosystem"`
		Name      string `json:"name"`
	} `json:"package"`
	Severity          []osvSeverity   `json:"severity"`
	Ranges            []osvRange      `json:"ranges"`
	Versions          []string        `json:"versions"`
	EcosystemSpecific json.RawMessage `json:"ecosystem_specific"`
	DatabaseSpecific  json.RawMessage `json:"database_specific"`
}

type osvRange struct {
	Type   string     `json:"type"`
	Repo   string     `json:"repo"`
	Events []osvEvent `json:"events"`
}

type osvEvent struct {
	Introduced   string `json:"introduced,omitempty"`
	Fixed        string `json:"fixed,omitempty"`
	LastAffected string `json:"last_affected,omitempty"`
	Limit        string `json:"limit,omitempty"`
}

// ecosystemDB is one ecosystem's all.zip: the archive stays open and only an index
// from affected package name to records is kept in memory, so a full OS feed (tens
// of thousands of records) costs megabytes, not the gigabyte its parsed records
// would. Records are decoded when a scan asks for a package they name.
type ecosystemDB struct {
	name    string
	path    string
	zr      *zip.ReadCloser
	byName  map[string][]int // affected package name -> index in zr.File
	records int

	mu     sync.Mutex
	cache  map[int]*osvRecord
	closed bool
}

// maxCachedRecords bounds the decoded records kept per ecosystem.
const maxCachedRecords = 20000

func (e *ecosystemDB) record(i int) (*osvRecord, error) {
	e.mu.Lock()
	if r, ok := e.cache[i]; ok {
		e.mu.Unlock()
		return r, nil
	}
	e.mu.Unlock()
	r, err := readRecord(e.zr.File[i])
	if err != nil {
		return nil, &Error{Reason: ReasonDatabaseMissing, Err: fmt.Errorf("OSV database %s: %w", e.path, err)}
	}
	e.mu.Lock()
	if len(e.cache) < maxCachedRecords {
		e.cache[i] = r
	}
	e.mu.Unlock()
	return r, nil
}

func readRecord(f *zip.File) (*osvRecord, error) {
	rc, err := f.Open()
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", f.Name, err)
	}
	defer rc.Close()
	b, err := io.ReadAll(io.LimitReader(rc, maxRecordBytes+1))
	if err != nil {
		return nil, fmt.Errorf("record %s: %w", f.Name, err)
	}
	if len(b) > maxRecordBytes {
		return nil, fmt.Errorf("record %s is bigger than %d bytes", f.Name, maxRecordBytes)
	}
	r := &osvRecord{}
	if err := json.Unmarshal(b, r); err != nil {
		return nil, fmt.Errorf("record %s is not valid OSV JSON: %w", f.Name, err)
	}
	return r, nil
}

// database is one loaded version of the OSV file set. Scans hold a reference while
// they read it; a reload retires it and the last scan out closes its archives.
type database struct {
	version    string
	dir        string
	ecosystems map[string]*ecosystemDB
	refs       atomic.Int64 // scans in flight, plus one while it is current
}

func (d *database) acquire() { d.refs.Add(1) }

func (d *database) release() {
	if d.refs.Add(-1) == 0 {
		for _, e := range d.ecosystems {
			e.mu.Lock()
			if !e.closed {
				e.closed = true
				_ = e.zr.Close()
			}
			e.mu.Unlock()
		}
	}
}

// ecosystemNames lists the loaded ecosystems, sorted.
func (d *database) ecosystemNames() []string {
	names := make([]string, 0, len(d.ecosystems))
	for n := range d.ecosystems {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// dbFile is one ecosystem archive found in the database directory.
type dbFile struct {
	ecosystem, path string
	size            int64
	mtime           int64
}

// dbBase is where the ecosystem directories are: DBDir itself, or DBDir/osv-scalibr
// when that exists (the cache layout of osv-scalibr's own local matcher).
func dbBase(dir string) string {
	if st, err := os.Stat(filepath.Join(dir, "osv-scalibr")); err == nil && st.IsDir() {
		return filepath.Join(dir, "osv-scalibr")
	}
	return dir
}

// listDB finds <base>/<Ecosystem>/all.zip (or <base>/<Ecosystem>.zip) files and computes the version from their
// names, sizes and modification times (and the VERSION file, when present).
func listDB(dir string) (files []dbFile, version string, err error) {
	if dir == "" {
		return nil, "", newError(ReasonDatabaseMissing, "no OSV database directory is configured")
	}
	base := dbBase(dir)
	entries, err := os.ReadDir(base)
	if err != nil {
		return nil, "", newError(ReasonDatabaseMissing, "reading the OSV database directory %s: %w", base, err)
	}
	h := sha256.New()
	label := ""
	if b, err := os.ReadFile(filepath.Join(dir, versionFile)); err == nil {
		label = strings.TrimSpace(string(b))
		if len(label) > 63 {
			label = label[:63]
		}
		fmt.Fprintf(h, "VERSION %q\n", label)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		// Dot names are a ConfigMap volume's own (..data, ..2026_12_04...) and
		// downloads in progress.
		if strings.HasPrefix(e.Name(), ".") {
			continue
		}
		// Stat follows symbolic links: a ConfigMap volume's files are links.
		est, err := os.Stat(filepath.Join(base, e.Name()))
		if err != nil {
			continue
		}
		var eco, p string
		switch {
		case est.IsDir():
			eco, p = e.Name(), filepath.Join(base, e.Name(), "all.zip")
		case strings.HasSuffix(e.Name(), ".zip"):
			eco, p = strings.TrimSuffix(e.Name(), ".zip"), filepath.Join(base, e.Name())
		default:
			continue
		}
		st, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, "", newError(ReasonDatabaseMissing, "reading %s: %w", p, err)
		}
		if seen[eco] {
			return nil, "", newError(ReasonDatabaseMissing, "the OSV database directory %s has two archives for %s (%s/all.zip and %s.zip): keep one", base, eco, eco, eco)
		}
		seen[eco] = true
		files = append(files, dbFile{ecosystem: eco, path: p, size: st.Size(), mtime: st.ModTime().UnixNano()})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].ecosystem < files[j].ecosystem })
	for _, f := range files {
		fmt.Fprintf(h, "%s %d %d\n", f.ecosystem, f.size, f.mtime)
	}
	if len(files) == 0 {
		return nil, "", newError(ReasonDatabaseMissing,
			"the OSV database directory %s holds no <Ecosystem>/all.zip archive (e.g. Debian/all.zip from https://osv-vulnerabilities.storage.googleapis.com/Debian/all.zip)", base)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	if label != "" {
		return files, label + "-" + sum, nil
	}
	return files, "sha256-" + sum, nil
}

// loadDB opens every archive and indexes its records by affected package name.
func loadDB(dir string, files []dbFile, version string) (*database, error) {
	d := &database{version: version, dir: dir, ecosystems: map[string]*ecosystemDB{}}
	closeAll := func() {
		for _, e := range d.ecosystems {
			_ = e.zr.Close()
		}
	}
	for _, f := range files {
		zr, err := zip.OpenReader(f.path)
		if err != nil {
			closeAll()
			return nil, newError(ReasonDatabaseMissing, "OSV database %s is not a readable zip archive: %w", f.path, err)
		}
		e := &ecosystemDB{name: f.ecosystem, path: f.path, zr: zr, byName: map[string][]int{}, cache: map[int]*osvRecord{}}
		d.ecosystems[f.ecosystem] = e
		for i, zf := range zr.File {
			if !strings.HasSuffix(zf.Name, ".json") {
				continue
			}
			r, err := readRecord(zf)
			if err != nil {
				closeAll()
				return nil, newError(ReasonDatabaseMissing, "OSV database %s: %w", f.path, err)
			}
			e.records++
			seen := map[string]bool{}
			for _, a := range r.Affected {
				if n := a.Package.Name; n != "" && !seen[n] {
					seen[n] = true
					e.byName[n] = append(e.byName[n], i)
				}
			}
		}
	}
	d.refs.Store(1)
	return d, nil
}
