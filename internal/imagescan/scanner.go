package imagescan

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/types"
	cpb "github.com/google/osv-scalibr/binary/proto/config_go_proto"
	"github.com/google/osv-scalibr/extractor"
	"github.com/google/osv-scalibr/extractor/filesystem"
	"github.com/google/osv-scalibr/extractor/filesystem/language/golang/gobinary"
	"github.com/google/osv-scalibr/extractor/filesystem/language/java/archive"
	"github.com/google/osv-scalibr/extractor/filesystem/language/javascript/packagejson"
	"github.com/google/osv-scalibr/extractor/filesystem/language/python/wheelegg"
	"github.com/google/osv-scalibr/extractor/filesystem/os/apk"
	"github.com/google/osv-scalibr/extractor/filesystem/os/dpkg"
	"github.com/google/osv-scalibr/extractor/filesystem/os/osrelease"
	scalibrfs "github.com/google/osv-scalibr/fs"
	scalibrversion "github.com/google/osv-scalibr/version"
)

// ScannerName names the scanner in reports.
const ScannerName = "osv-scalibr"

// Defaults of Options.
const (
	DefaultMaxFindings   = 20
	DefaultMaxImageBytes = int64(2) << 30
)

// goBuildInfoMagic starts the build information in every Go binary (debug/buildinfo).
var goBuildInfoMagic = []byte("\xff Go buildinf:")

// maxExtractedFileBytes bounds one file handed to an extractor (a Go binary, a jar).
const maxExtractedFileBytes = 256 << 20

// Options configure a Scanner.
type Options struct {
	// DBDir holds the offline OSV database: <DBDir>/<Ecosystem>/all.zip, the files
	// osv.dev exports (e.g. Debian/all.zip, Alpine/all.zip, Go/all.zip).
	// <DBDir>/osv-scalibr/<Ecosystem>/all.zip (osv-scalibr's own cache layout) is read
	// when that directory exists. An optional <DBDir>/VERSION names the bundle.
	DBDir string
	// Insecure lists registry hosts (host:port) reached over plain HTTP.
	Insecure []string
	// Transport is used for every registry request; nil means remote.DefaultTransport.
	Transport http.RoundTripper
	// MaxFindings bounds Report.Findings (default 20).
	MaxFindings int
	// MaxImageBytes refuses images whose compressed layers add up to more (TooLarge;
	// default 2 GiB).
	MaxImageBytes int64
	// MaxUnpackedBytes bounds the bytes read from the unpacked layers (default four
	// times MaxImageBytes), against layers that unpack to far more than they weigh.
	MaxUnpackedBytes int64
	// Architecture picks the image inside a multi-platform index (linux/<arch>);
	// default runtime.GOARCH.
	Architecture string
	// TempDir is where package files are unpacked during a scan (default os.TempDir()).
	TempDir string
}

// Scanner resolves and scans images. It is safe for concurrent use.
type Scanner struct {
	opts     Options
	insecure map[string]bool

	mu    sync.RWMutex
	db    *database
	dbErr error
}

// New makes a Scanner and loads the database. A missing or unreadable database is not
// an error here: it is reported by DBStatus and by every Scan (DatabaseMissing) until a
// ReloadDB finds one, so a manager can start before its database arrives.
func New(opts Options) (*Scanner, error) {
	if opts.MaxFindings == 0 {
		opts.MaxFindings = DefaultMaxFindings
	}
	if opts.MaxImageBytes == 0 {
		opts.MaxImageBytes = DefaultMaxImageBytes
	}
	if opts.MaxUnpackedBytes == 0 {
		opts.MaxUnpackedBytes = 4 * opts.MaxImageBytes
	}
	if opts.Architecture == "" {
		opts.Architecture = runtime.GOARCH
	}
	if opts.MaxFindings < 0 || opts.MaxImageBytes < 0 || opts.MaxUnpackedBytes < 0 {
		return nil, errors.New("imagescan: MaxFindings, MaxImageBytes and MaxUnpackedBytes must not be negative")
	}
	s := &Scanner{opts: opts, insecure: map[string]bool{}}
	for _, h := range opts.Insecure {
		s.insecure[h] = true
	}
	_, _ = s.ReloadDB()
	return s, nil
}

// DBVersion is the stable id of the loaded database ("" when none is loaded): the
// VERSION file's text (when present) and a hash of the archives' ecosystems, sizes
// and modification times. It changes when any archive changes.
func (s *Scanner) DBVersion() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		return ""
	}
	return s.db.version
}

// DBStatus is the loaded database's version and ecosystems, and the error of the
// last load (nil when it succeeded). After a failed reload the previous database
// stays in use and err says why the new one was not taken.
func (s *Scanner) DBStatus() (version string, ecosystems []string, err error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db != nil {
		version, ecosystems = s.db.version, s.db.ecosystemNames()
	}
	return version, ecosystems, s.dbErr
}

// ReloadDB reads the database directory again; changed is true when a different
// version was loaded. On error the previously loaded database (if any) stays in use.
func (s *Scanner) ReloadDB() (changed bool, err error) {
	files, version, err := listDB(s.opts.DBDir)
	if err == nil {
		s.mu.RLock()
		same := s.db != nil && s.db.version == version
		s.mu.RUnlock()
		if same {
			s.mu.Lock()
			s.dbErr = nil
			s.mu.Unlock()
			return false, nil
		}
	}
	var db *database
	if err == nil {
		db, err = loadDB(s.opts.DBDir, files, version)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.dbErr = err
		return false, err
	}
	old := s.db
	s.db, s.dbErr = db, nil
	if old != nil {
		old.release()
	}
	return true, nil
}

func (s *Scanner) acquireDB() (*database, error) {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.db == nil {
		if s.dbErr != nil {
			return nil, s.dbErr
		}
		return nil, newError(ReasonDatabaseMissing, "no OSV database is loaded")
	}
	s.db.acquire()
	return s.db, nil
}

// ScannerVersion is the osv-scalibr module version linked into this binary.
func ScannerVersion() string {
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, m := range bi.Deps {
			if m.Path == "github.com/google/osv-scalibr" {
				if m.Replace != nil && m.Replace.Version != "" {
					return m.Replace.Version
				}
				return m.Version
			}
		}
	}
	return "v" + scalibrversion.ScannerVersion
}

// Report is what one scan found; bounded in size.
type Report struct {
	// Digest is the digest the reference names (an index's digest for a
	// multi-platform image); Repository is the reference's repository.
	Digest, Repository string
	// ScannerVersion and DBVersion say what produced the report.
	ScannerVersion, DBVersion string
	// Packages is the number of installed packages found.
	Packages int
	// Counts are the findings per severity, over all findings (not only the kept ones).
	Counts map[Severity]int
	// Findings are the worst first, then by ID; at most Options.MaxFindings.
	Findings []Finding
	// OS is the image's distribution from its os-release ("debian 12"), when known.
	OS string
	// Ecosystems lists the ecosystems of the packages found ("Debian:12", "Go").
	Ecosystems []string
	// Unmatched counts packages no database could be consulted for because their
	// ecosystem is unknown (e.g. dpkg packages in an image without os-release).
	Unmatched int
	// Platform is the os/architecture of the image scanned.
	Platform string
	// Duration is how long the scan took.
	Duration time.Duration
}

// Finding is one vulnerability in one installed package.
type Finding struct {
	ID        string
	Aliases   []string
	Package   string
	Ecosystem string
	Installed string
	// Fixed is the first version that fixes it; "" when no fix is known.
	Fixed    string
	Severity Severity
}

func (s *Scanner) parse(ref string) (name.Reference, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, newError(ReasonNotFound, "%q is not a valid image reference: %w", ref, err)
	}
	if s.insecure[r.Context().RegistryStr()] {
		if r, err = name.ParseReference(ref, name.Insecure); err != nil {
			return nil, newError(ReasonNotFound, "%q is not a valid image reference: %w", ref, err)
		}
	}
	return r, nil
}

func (s *Scanner) remoteOptions(ctx context.Context, kc authn.Keychain) []remote.Option {
	t := s.opts.Transport
	if t == nil {
		t = remote.DefaultTransport
	}
	opts := []remote.Option{
		remote.WithContext(ctx),
		remote.WithTransport(t),
		remote.WithUserAgent("orderly-imagescan"),
		remote.WithRetryBackoff(remote.Backoff{Duration: 200 * time.Millisecond, Factor: 2, Jitter: 0.1, Steps: 3}),
	}
	if kc != nil {
		opts = append(opts, remote.WithAuthFromKeychain(kc))
	} else {
		// Never the manager's own Docker config: other tenants' credentials must
		// not open images to someone who did not present them.
		opts = append(opts, remote.WithAuth(authn.Anonymous))
	}
	return opts
}

// Resolve returns the digest a tag or digest reference names, through the OCI
// distribution API (HEAD, then GET when the registry does not answer HEAD with a
// digest). For a multi-platform image it is the index's digest: the kubelet pulls
// by that one.
func (s *Scanner) Resolve(ctx context.Context, ref string, kc authn.Keychain) (string, error) {
	r, err := s.parse(ref)
	if err != nil {
		return "", err
	}
	opts := s.remoteOptions(ctx, kc)
	d, err := remote.Head(r, opts...)
	if err == nil && d.Digest.Hex != "" {
		return d.Digest.String(), nil
	}
	if err != nil {
		if reason := ReasonOf(registryError(ref, err)); reason == ReasonAuthFailed || reason == ReasonNotFound {
			return "", registryError(ref, err)
		}
	}
	gd, err := remote.Get(r, opts...)
	if err != nil {
		return "", registryError(ref, err)
	}
	return gd.Digest.String(), nil
}

// Scan pulls the image ref names (repo@sha256:... or a tag), extracts its installed
// packages and matches them against the database. An error is always an *Error: a
// failed scan never yields a Report.
func (s *Scanner) Scan(ctx context.Context, ref string, kc authn.Keychain) (*Report, error) {
	start := time.Now()
	db, err := s.acquireDB()
	if err != nil {
		return nil, err
	}
	defer db.release()
	r, err := s.parse(ref)
	if err != nil {
		return nil, err
	}
	opts := s.remoteOptions(ctx, kc)
	desc, err := remote.Get(r, opts...)
	if err != nil {
		return nil, registryError(ref, err)
	}
	img, platform, err := s.pickImage(ref, desc)
	if err != nil {
		return nil, err
	}
	if err := s.checkImage(ref, img); err != nil {
		return nil, err
	}
	pkgs, osName, err := s.extract(ctx, ref, img)
	if err != nil {
		return nil, err
	}
	rep := &Report{
		Digest:         desc.Digest.String(),
		Repository:     r.Context().Name(),
		ScannerVersion: ScannerVersion(),
		DBVersion:      db.version,
		Packages:       len(pkgs),
		Counts:         map[Severity]int{},
		OS:             osName,
		Platform:       platform,
	}
	findings, err := s.match(db, pkgs, rep)
	if err != nil {
		return nil, err
	}
	rep.setFindings(findings, s.opts.MaxFindings)
	rep.Duration = time.Since(start)
	return rep, nil
}

// setFindings counts all findings by severity and keeps the worst max of them, worst
// first, then by ID and package.
func (r *Report) setFindings(findings []Finding, maxFindings int) {
	if r.Counts == nil {
		r.Counts = map[Severity]int{}
	}
	for _, f := range findings {
		r.Counts[f.Severity]++
	}
	sort.Slice(findings, func(i, j int) bool {
		a, b := findings[i], findings[j]
		if a.Severity.Rank() != b.Severity.Rank() {
			return a.Severity.Rank() > b.Severity.Rank()
		}
		if a.ID != b.ID {
			return a.ID < b.ID
		}
		return a.Package < b.Package
	})
	if len(findings) > maxFindings {
		findings = findings[:maxFindings]
	}
	r.Findings = findings
}

// pickImage returns the image to scan: the image itself, or linux/<arch> in an index.
func (s *Scanner) pickImage(ref string, desc *remote.Descriptor) (v1.Image, string, error) {
	switch {
	case desc.MediaType.IsIndex():
		idx, err := desc.ImageIndex()
		if err != nil {
			return nil, "", registryError(ref, err)
		}
		im, err := idx.IndexManifest()
		if err != nil {
			return nil, "", registryError(ref, err)
		}
		var seen []string
		for _, m := range im.Manifests {
			if !m.MediaType.IsImage() {
				continue
			}
			if m.Platform == nil {
				seen = append(seen, "unknown")
				continue
			}
			seen = append(seen, m.Platform.OS+"/"+m.Platform.Architecture)
			if m.Platform.OS == "linux" && m.Platform.Architecture == s.opts.Architecture {
				img, err := idx.Image(m.Digest)
				if err != nil {
					return nil, "", registryError(ref, err)
				}
				return img, "linux/" + s.opts.Architecture, nil
			}
		}
		return nil, "", newError(ReasonUnsupportedMediaType, "%s: the index has no linux/%s image (it has: %s)",
			ref, s.opts.Architecture, strings.Join(seen, ", "))
	case desc.MediaType == types.DockerManifestSchema2 || desc.MediaType == types.OCIManifestSchema1:
		img, err := desc.Image()
		if err != nil {
			return nil, "", registryError(ref, err)
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, "", newError(ReasonUnsupportedMediaType, "%s: the image's config is not a container image config: %w", ref, err)
		}
		return img, cf.OS + "/" + cf.Architecture, nil
	}
	return nil, "", newError(ReasonUnsupportedMediaType, "%s: media type %q is not a container image or image index", ref, desc.MediaType)
}

var layerTypes = map[types.MediaType]bool{
	types.DockerLayer:                    true,
	types.DockerUncompressedLayer:        true,
	types.OCILayer:                       true,
	types.OCILayerZStd:                   true,
	types.OCIUncompressedLayer:           true,
	types.DockerForeignLayer:             true,
	types.OCIRestrictedLayer:             true,
	types.OCIUncompressedRestrictedLayer: true,
}

// checkImage refuses what is not a container image (an artifact's config or layer
// media types) and images bigger than the bound, before any layer is pulled.
func (s *Scanner) checkImage(ref string, img v1.Image) error {
	m, err := img.Manifest()
	if err != nil {
		return registryError(ref, err)
	}
	if m.Config.MediaType != types.DockerConfigJSON && m.Config.MediaType != types.OCIConfigJSON {
		return newError(ReasonUnsupportedMediaType, "%s: config media type %q is not a container image config (an OCI artifact?)", ref, m.Config.MediaType)
	}
	var total int64
	for _, l := range m.Layers {
		if !layerTypes[l.MediaType] {
			return newError(ReasonUnsupportedMediaType, "%s: layer %s has media type %q, not a container image layer", ref, l.Digest, l.MediaType)
		}
		total += l.Size
	}
	if total > s.opts.MaxImageBytes {
		return newError(ReasonTooLarge, "%s: its layers weigh %d bytes compressed, more than the bound of %d", ref, total, s.opts.MaxImageBytes)
	}
	return nil
}

// fileAPI is what extractors see of a file while the layers stream past.
type fileAPI struct {
	path string
	info os.FileInfo
}

func (f fileAPI) Path() string               { return f.path }
func (f fileAPI) Stat() (os.FileInfo, error) { return f.info, nil }

func newExtractors() ([]filesystem.Extractor, error) {
	cfg := &cpb.PluginConfig{MaxFileSizeBytes: maxExtractedFileBytes}
	var out []filesystem.Extractor
	for _, mk := range []func(*cpb.PluginConfig) (filesystem.Extractor, error){
		dpkg.New, apk.New, gobinary.New, wheelegg.New, packagejson.New, archive.New,
	} {
		e, err := mk(cfg)
		if err != nil {
			return nil, err
		}
		out = append(out, e)
	}
	return append(out, rpmExtractor{}), nil
}

// osPackageExtractors are the ones whose failure hides every OS package: it fails the
// scan instead of leaving it looking clean.
var osPackageExtractors = map[string]bool{dpkg.Name: true, apk.Name: true, rpmExtractorName: true}

type kept struct {
	path       string
	info       os.FileInfo
	extractors []filesystem.Extractor
}

// countingReader fails once more than limit bytes were read.
type countingReader struct {
	r     io.Reader
	n     int64
	limit int64
}

var errUnpackedTooLarge = errors.New("unpacked layers too large")

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	if c.n > c.limit {
		return n, errUnpackedTooLarge
	}
	return n, err
}

// extract streams the image's flattened file system (whiteouts applied) once, keeps
// only the files an extractor asks for (and os-release) in a temporary directory,
// and runs the extractors on them.
func (s *Scanner) extract(ctx context.Context, ref string, img v1.Image) ([]*extractor.Package, string, error) {
	extractors, err := newExtractors()
	if err != nil {
		return nil, "", newError(ReasonScanFailed, "setting up the extractors: %w", err)
	}
	tmp, err := os.MkdirTemp(s.opts.TempDir, "orderly-imagescan-")
	if err != nil {
		return nil, "", newError(ReasonScanFailed, "creating a temporary directory: %w", err)
	}
	defer os.RemoveAll(tmp)

	rc := mutate.Extract(img)
	defer rc.Close()
	cr := &countingReader{r: rc, limit: s.opts.MaxUnpackedBytes}
	tr := tar.NewReader(cr)
	var files []kept
	for {
		if err := ctx.Err(); err != nil {
			return nil, "", newError(ReasonScanFailed, "%s: %w", ref, err)
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, "", s.streamError(ref, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			continue
		}
		p := cleanPath(hdr.Name)
		if p == "" {
			continue
		}
		api := fileAPI{path: p, info: hdr.FileInfo()}
		var want []filesystem.Extractor
		for _, e := range extractors {
			if e.FileRequired(api) {
				want = append(want, e)
			}
		}
		isOSRelease := p == "etc/os-release" || p == "usr/lib/os-release"
		if len(want) == 0 && !isOSRelease {
			continue
		}
		if hdr.Size > maxExtractedFileBytes {
			continue
		}
		var src io.Reader = tr
		if len(want) == 1 && want[0].Name() == gobinary.Name {
			// Most executables of an OS image are not Go programs: keep only those
			// carrying Go's build information, instead of writing every one to disk.
			b, err := io.ReadAll(tr)
			if err != nil {
				return nil, "", s.streamError(ref, err)
			}
			if !bytes.Contains(b, goBuildInfoMagic) {
				continue
			}
			src = bytes.NewReader(b)
		}
		dst := filepath.Join(tmp, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
			return nil, "", newError(ReasonScanFailed, "unpacking %s: %w", p, err)
		}
		f, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
		if err != nil {
			return nil, "", newError(ReasonScanFailed, "unpacking %s: %w", p, err)
		}
		_, err = io.Copy(f, src)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return nil, "", s.streamError(ref, err)
		}
		if len(want) > 0 {
			files = append(files, kept{path: p, info: hdr.FileInfo(), extractors: want})
		}
	}

	fsys := scalibrfs.DirFS(tmp)
	osName := ""
	if m, err := osrelease.GetOSRelease(fsys); err == nil && m["ID"] != "" {
		osName = strings.TrimSpace(m["ID"] + " " + m["VERSION_ID"])
	}
	var pkgs []*extractor.Package
	for _, k := range files {
		for _, e := range k.extractors {
			inv, err := runExtractor(ctx, e, fsys, tmp, k)
			if err != nil {
				if osPackageExtractors[e.Name()] {
					return nil, "", newError(ReasonScanFailed, "%s: reading the package database /%s: %w", ref, k.path, err)
				}
				continue
			}
			pkgs = append(pkgs, inv...)
		}
	}
	return pkgs, osName, nil
}

func runExtractor(ctx context.Context, e filesystem.Extractor, fsys scalibrfs.FS, root string, k kept) ([]*extractor.Package, error) {
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(k.path)))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	inv, err := e.Extract(ctx, &filesystem.ScanInput{FS: fsys, Path: k.path, Root: root, Info: k.info, Reader: f})
	if err != nil {
		return nil, err
	}
	return inv.Packages, nil
}

func (s *Scanner) streamError(ref string, err error) error {
	if errors.Is(err, errUnpackedTooLarge) {
		return newError(ReasonTooLarge, "%s: its layers unpack to more than the bound of %d bytes", ref, s.opts.MaxUnpackedBytes)
	}
	return registryError(ref, err)
}

// cleanPath makes a layer path relative and clean; "" for paths that leave the root.
func cleanPath(p string) string {
	p = path.Clean("/" + p)
	p = strings.TrimPrefix(p, "/")
	if p == "" || p == "." {
		return ""
	}
	return p
}

// match looks every package up in its ecosystem's archive.
func (s *Scanner) match(db *database, pkgs []*extractor.Package, rep *Report) ([]Finding, error) {
	type key struct{ id, pkg, version, eco string }
	seen := map[key]bool{}
	ecos := map[string]bool{}
	var missing []string
	var findings []Finding
	for _, p := range pkgs {
		n := normalize(p)
		if n.ecosystem.IsEmpty() {
			rep.Unmatched++
			continue
		}
		ecos[n.ecosystem.String()] = true
		edb := db.ecosystems[string(n.ecosystem.Ecosystem)]
		if edb == nil {
			if !slices.Contains(missing, string(n.ecosystem.Ecosystem)) {
				missing = append(missing, string(n.ecosystem.Ecosystem))
			}
			continue
		}
		for _, i := range edb.byName[n.name] {
			rec, err := edb.record(i)
			if err != nil {
				return nil, err
			}
			ok, aff, fixed := affects(rec, n)
			if !ok {
				continue
			}
			k := key{rec.ID, p.Name, n.version, n.ecosystem.String()}
			if seen[k] {
				continue
			}
			seen[k] = true
			findings = append(findings, Finding{
				ID:        rec.ID,
				Aliases:   slices.Clone(rec.Aliases),
				Package:   p.Name,
				Ecosystem: n.ecosystem.String(),
				Installed: n.version,
				Fixed:     fixed,
				Severity:  recordSeverity(rec, aff),
			})
		}
	}
	if len(missing) > 0 {
		sort.Strings(missing)
		return nil, newError(ReasonDatabaseMissing, "the image has %s packages but the OSV database in %s has no %s/all.zip (it has: %s)",
			strings.Join(missing, ", "), dbBase(db.dir), missing[0], strings.Join(db.ecosystemNames(), ", "))
	}
	for e := range ecos {
		rep.Ecosystems = append(rep.Ecosystems, e)
	}
	sort.Strings(rep.Ecosystems)
	return mergeAliases(findings), nil
}

// mergeAliases makes one finding of records that describe the same vulnerability of
// the same package (GO-2022-1059 and GHSA-69ch-w2m2-3vjp, linked by their aliases),
// so it is counted once. The kept ID is the one with the worst known severity
// (then the smallest ID); the others join its aliases.
func mergeAliases(findings []Finding) []Finding {
	parent := make([]int, len(findings))
	for i := range parent {
		parent[i] = i
	}
	find := func(i int) int {
		for parent[i] != i {
			parent[i] = parent[parent[i]]
			i = parent[i]
		}
		return i
	}
	type pkgKey struct{ pkg, version, eco string }
	owner := map[pkgKey]map[string]int{}
	for i, f := range findings {
		k := pkgKey{f.Package, f.Installed, f.Ecosystem}
		if owner[k] == nil {
			owner[k] = map[string]int{}
		}
		for _, id := range append([]string{f.ID}, f.Aliases...) {
			if j, ok := owner[k][id]; ok {
				parent[find(i)] = find(j)
			} else {
				owner[k][id] = i
			}
		}
	}
	groups := map[int][]int{}
	var roots []int
	for i := range findings {
		r := find(i)
		if _, ok := groups[r]; !ok {
			roots = append(roots, r)
		}
		groups[r] = append(groups[r], i)
	}
	var out []Finding
	for _, r := range roots {
		members := groups[r]
		if len(members) == 1 {
			out = append(out, findings[members[0]])
			continue
		}
		best := findings[members[0]]
		for _, m := range members[1:] {
			f := findings[m]
			if f.Severity.Rank() > best.Severity.Rank() || (f.Severity.Rank() == best.Severity.Rank() && f.ID < best.ID) {
				best = f
			}
		}
		names := map[string]bool{}
		for _, m := range members {
			names[findings[m].ID] = true
			for _, a := range findings[m].Aliases {
				names[a] = true
			}
			if best.Fixed == "" {
				best.Fixed = findings[m].Fixed
			}
		}
		delete(names, best.ID)
		best.Aliases = make([]string, 0, len(names))
		for n := range names {
			best.Aliases = append(best.Aliases, n)
		}
		sort.Strings(best.Aliases)
		out = append(out, best)
	}
	return out
}

// String is a one-line summary for logs and Events.
func (r *Report) String() string {
	var parts []string
	for _, sev := range Severities {
		if n := r.Counts[sev]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, sev))
		}
	}
	if len(parts) == 0 {
		parts = []string{"no vulnerabilities"}
	}
	return fmt.Sprintf("%s@%s: %d packages, %s", r.Repository, r.Digest, r.Packages, strings.Join(parts, ", "))
}
