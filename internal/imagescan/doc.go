// Package imagescan resolves container images to digests and scans them for known
// vulnerabilities, offline: the registry is the only thing it talks to.
//
// # What is scanned
//
// The image's layers are pulled with go-containerregistry and streamed once as the
// flattened file system (whiteouts applied). Only the files osv-scalibr's extractors
// ask for are kept, in a temporary directory removed after the scan:
//
//   - Debian/Ubuntu packages: /var/lib/dpkg/status and status.d (dpkg extractor);
//   - Alpine packages: /lib/apk/db/installed (apk extractor);
//   - RPM packages (RHEL, AlmaLinux, Rocky, SUSE, Azure Linux, ...): the RPM database
//     in /var/lib/rpm or /usr/lib/sysimage/rpm, SQLite (rpmdb.sqlite), Berkeley DB
//     (Packages) or NDB (Packages.db), through go-rpmdb (rpm.go: Orderly's own
//     extractor, which reads the SQLite file without an SQLite engine); the epoch
//     goes into the version matched, as OSV's RPM ecosystems write it;
//   - Go binaries: the module versions and Go toolchain version of every executable
//     that carries Go build information (gobinary extractor);
//   - Python packages installed as wheels/eggs (wheelegg), npm packages installed in
//     node_modules (packagejson), Java archives (archive).
//
// Not covered: language lockfiles that are not installed packages, binaries of other languages,
// kernel and firmware.
//
// For a multi-platform index the linux image of Options.Architecture (default the
// manager's own) is scanned, and the index's digest is reported. Anything else (OCI
// artifacts, Helm charts, schema 1 manifests, unknown layer types) fails with
// UnsupportedMediaType before a layer is pulled.
//
// # The database
//
// The database is the file set osv.dev exports: one zip of OSV JSON records per
// ecosystem, at <DBDir>/<Ecosystem>/all.zip (Debian/all.zip, Alpine/all.zip,
// Go/all.zip, ...; the ecosystem is the part before the colon of "Debian:12").
// osv-scalibr's own cache layout, <DBDir>/osv-scalibr/<Ecosystem>/all.zip, is used
// when that directory exists; <DBDir>/<Ecosystem>.zip is read too, which is what a
// ConfigMap volume holds (keys cannot contain "/"). DownloadDB fetches the archives
// from a URL (osv.dev's bucket or a mirror) into the layout, conditionally, each
// replaced by rename. Archives must be replaced by rename (as a ConfigMap volume,
// DownloadDB and `mv` do): one rewritten in place under a loaded database makes scans
// fail with DatabaseMissing until ReloadDB. The archives stay open and only an index from package
// name to records is held in memory; records are decoded when a package they name is
// found. DBVersion is the text of <DBDir>/VERSION (when present) joined to a hash of
// the archives' ecosystems, sizes and modification times, so it changes whenever an
// archive is replaced. ReloadDB loads a changed set; a failed reload keeps the
// previous one in use. An image whose packages belong to an ecosystem without an
// archive fails with DatabaseMissing rather than looking clean.
//
// Matching follows osv-scalibr's local matcher (see match.go): versions are ordered
// by osv-scalibr's per-ecosystem rules (package semantic), Debian binary packages
// are looked up by their source package and Alpine ones by their origin.
//
// # Severity
//
// The severity of a finding is, in this order:
//  1. the "severity" string of the matched affected entry's ecosystem_specific or
//     database_specific, or of the record's database_specific (GitHub advisories and
//     many OS feeds write CRITICAL, HIGH, MODERATE, LOW), or a numeric "cvss_score"
//     there;
//  2. else, from the entry's severity[] (or, when that gives nothing, the record's),
//     the higher of an Ubuntu priority and the highest rating among the CVSS vectors
//     of the newest version there: v4.0 (score per the v4.0 specification, through
//     github.com/pandatix/go-cvss), then v3.0/v3.1 (base score through go-cvss),
//     then v2 (base score through go-cvss); v4 and v3 scores
//     rate 9.0+ Critical, 7.0+ High, 4.0+ Medium, above 0 Low; v2 scores rate as NVD
//     rates them, 7.0+ High (v2 has no Critical);
//  3. else Unknown.
//
// # Errors
//
// Every failure is an *Error whose Reason is one of RegistryUnreachable, AuthFailed,
// NotFound, UnsupportedMediaType, TooLarge, DatabaseMissing, ScanFailed; a failed scan
// never returns a report, so it cannot be mistaken for a clean one.
package imagescan
