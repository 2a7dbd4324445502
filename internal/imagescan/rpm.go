package imagescan

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"slices"

	rpmdb "github.com/erikvarga/go-rpmdb/pkg"
	"github.com/google/osv-scalibr/extractor"
	"github.com/google/osv-scalibr/extractor/filesystem"
	"github.com/google/osv-scalibr/extractor/filesystem/os/osrelease"
	rpmmeta "github.com/google/osv-scalibr/extractor/filesystem/os/rpm/metadata"
	"github.com/google/osv-scalibr/inventory"
	"github.com/google/osv-scalibr/plugin"
	"github.com/google/osv-scalibr/purl"
)

// rpmExtractor lists the packages of an RPM database: SQLite (rpmdb.sqlite, RHEL 9
// and later), Berkeley DB (Packages) or NDB (Packages.db), read by go-rpmdb. It is
// Orderly's own rather than osv-scalibr's os/rpm, which links a whole SQLite engine
// (modernc.org/sqlite: 5.7 MB more binary and about 4 MB more resident memory in every
// manager): go-rpmdb reads rpmdb.sqlite through database/sql, and rpmSQLiteDriver
// answers its one query from the file format (sqlitetable.go).
type rpmExtractor struct{}

const rpmExtractorName = "os/rpm"

var (
	rpmDirs  = []string{"var/lib/rpm/", "usr/lib/sysimage/rpm/", "usr/share/rpm/"}
	rpmFiles = []string{"Packages", "Packages.db", "rpmdb.sqlite"}
)

func (rpmExtractor) Name() string                       { return rpmExtractorName }
func (rpmExtractor) Version() int                       { return 0 }
func (rpmExtractor) Requirements() *plugin.Capabilities { return &plugin.Capabilities{} }

func (rpmExtractor) FileRequired(api filesystem.FileAPI) bool {
	dir, file := path.Split(filepath.ToSlash(api.Path()))
	return slices.Contains(rpmDirs, dir) && slices.Contains(rpmFiles, file)
}

// Extract reads the database at input.Root/input.Path (the scanner keeps the files on
// disk: Berkeley DB and SQLite are read by offset, not as a stream).
func (rpmExtractor) Extract(ctx context.Context, input *filesystem.ScanInput) (inventory.Inventory, error) {
	if input.Root == "" {
		return inventory.Inventory{}, errors.New("the RPM database must be a file on disk")
	}
	path := filepath.Join(input.Root, filepath.FromSlash(input.Path))
	// The file is the image author's: checked before go-rpmdb trusts it (rpmcheck.go).
	if err := checkRPMFile(path); err != nil {
		return inventory.Inventory{}, fmt.Errorf("reading the RPM database %s: %w", input.Path, err)
	}
	db, err := rpmdb.Open(path)
	if err != nil {
		return inventory.Inventory{}, fmt.Errorf("opening the RPM database %s: %w", input.Path, err)
	}
	defer db.Close()
	list, err := listPackages(ctx, db)
	if err != nil {
		return inventory.Inventory{}, fmt.Errorf("reading the RPM database %s: %w", input.Path, err)
	}
	osRelease, _ := osrelease.GetOSRelease(input.FS) // without it the ecosystem is unknown: unmatched, counted
	var pkgs []*extractor.Package
	for _, p := range list {
		pkgs = append(pkgs, &extractor.Package{
			Name:     p.Name,
			Version:  p.Version + "-" + p.Release,
			PURLType: purl.TypeRPM,
			Location: extractor.LocationFromPath(input.Path),
			Licenses: []string{p.License},
			Metadata: &rpmmeta.Metadata{
				PackageName: p.Name, SourceRPM: p.SourceRpm, Epoch: p.EpochNum(), Vendor: p.Vendor, Architecture: p.Arch,
				OSName: osRelease["NAME"], OSPrettyName: osRelease["PRETTY_NAME"], OSID: osRelease["ID"],
				OSVersionID: osRelease["VERSION_ID"], OSBuildID: osRelease["BUILD_ID"], OSCPEName: osRelease["CPE_NAME"],
			},
		})
	}
	return inventory.Inventory{Packages: pkgs}, nil
}

// listPackages lists db's packages. go-rpmdb parses the headers in this goroutine:
// a header it cannot parse that makes it panic fails this database, not the manager.
func listPackages(ctx context.Context, db *rpmdb.RpmDB) (list []*rpmdb.PackageInfo, err error) {
	defer func() {
		if p := recover(); p != nil {
			list, err = nil, fmt.Errorf("a package header could not be parsed: %v", p)
		}
	}()
	return db.ListPackagesWithContext(ctx)
}

// rpmSQLiteDriverName is the database/sql driver name go-rpmdb falls back to when no
// "sqlite" driver is linked.
const rpmSQLiteDriverName = "sqlite3"

// rpmPackagesQuery is the only query go-rpmdb sends.
const rpmPackagesQuery = "SELECT blob FROM Packages"

func init() {
	if !slices.Contains(sql.Drivers(), rpmSQLiteDriverName) {
		sql.Register(rpmSQLiteDriverName, rpmSQLiteDriver{})
	}
}

// rpmSQLiteDriver is a database/sql driver for one query on one file: the blobs of
// the Packages table of an RPM database, read-only.
type rpmSQLiteDriver struct{}

func (rpmSQLiteDriver) Open(name string) (driver.Conn, error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, err
	}
	info, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	t, err := openSQLite(f, info.Size())
	if err != nil {
		_ = f.Close()
		return nil, err
	}
	return &rpmSQLiteConn{f: f, t: t}, nil
}

type rpmSQLiteConn struct {
	f *os.File
	t *sqliteTable
}

func (c *rpmSQLiteConn) Prepare(query string) (driver.Stmt, error) {
	if query != rpmPackagesQuery {
		return nil, fmt.Errorf("the RPM database reader answers only %q, not %q", rpmPackagesQuery, query)
	}
	return rpmSQLiteStmt{c}, nil
}

func (c *rpmSQLiteConn) Close() error { return c.f.Close() }
func (c *rpmSQLiteConn) Begin() (driver.Tx, error) {
	return nil, errors.New("the RPM database is read-only")
}

type rpmSQLiteStmt struct{ c *rpmSQLiteConn }

func (rpmSQLiteStmt) Close() error  { return nil }
func (rpmSQLiteStmt) NumInput() int { return 0 }
func (rpmSQLiteStmt) Exec([]driver.Value) (driver.Result, error) {
	return nil, errors.New("the RPM database is read-only")
}

// Query reads every row before it answers: go-rpmdb does not look at the error that
// ends an iteration, so a corrupt row, or one without a blob, must fail the query
// itself, not shorten the package list. The blobs are kept for Next (go-rpmdb holds
// every package in memory anyway).
func (s rpmSQLiteStmt) Query([]driver.Value) (driver.Rows, error) {
	root, err := s.c.t.rootPage("Packages")
	if err != nil {
		return nil, err
	}
	cells, err := s.c.t.cells(root)
	if err != nil {
		return nil, err
	}
	blobs := make([][]byte, 0, len(cells))
	for _, c := range cells {
		// The table is hnum INTEGER PRIMARY KEY, blob BLOB: hnum is the rowid,
		// stored as NULL in the record.
		rec, err := s.c.t.row(c)
		if err != nil {
			return nil, err
		}
		if len(rec) < 2 || rec[1].text == nil {
			return nil, errors.New("an RPM Packages row without a blob")
		}
		if err := checkHeaderBlob(rec[1].text); err != nil {
			return nil, err
		}
		blobs = append(blobs, rec[1].text)
	}
	return &rpmSQLiteRows{blobs: blobs}, nil
}

type rpmSQLiteRows struct{ blobs [][]byte }

func (r *rpmSQLiteRows) Columns() []string { return []string{"blob"} }
func (r *rpmSQLiteRows) Close() error      { return nil }

// Next gives the blob column of the next row.
func (r *rpmSQLiteRows) Next(dest []driver.Value) error {
	if len(r.blobs) == 0 {
		return io.EOF
	}
	dest[0] = r.blobs[0]
	r.blobs = r.blobs[1:]
	return nil
}
