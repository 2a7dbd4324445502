// Command krew packs the kubectl plugin's release archives and writes its krew
// manifest: for each platform, a tar.gz of kubectl-orderly (built by `make dist` with
// the flags of `make build`, into <dist>/<os>-<arch>/kubectl-orderly) and the
// LICENSE, then <dist>/orderly.yaml from hack/krew/orderly.yaml.tmpl with the version,
// each archive's URI and its sha256. The archives carry no timestamps or owners, so the
// same binaries give the same sha256s. docs/install.md says how a release publishes them.
//
//	go run ./hack/krew --version v0.3.0 --dist dist --license LICENSE --base-url https://example.com/releases/v0.3.0
package main

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"text/template"
)

// Platform is one os/arch the plugin is released for.
type Platform struct {
	OS, Arch string
	// URI and SHA256 are its archive's, filled in by pack.
	URI, SHA256 string
}

// Platforms are the ones `make dist` builds (DIST_PLATFORMS in the Makefile).
var Platforms = []Platform{{OS: "linux", Arch: "amd64"}, {OS: "linux", Arch: "arm64"}, {OS: "darwin", Arch: "amd64"}, {OS: "darwin", Arch: "arm64"}}

// Bin is the plugin's executable: kubectl runs `kubectl orderly` as kubectl-orderly.
const Bin = "kubectl-orderly"

// ArchiveName is the file name of a platform's archive.
func ArchiveName(p Platform) string { return fmt.Sprintf("%s_%s_%s.tar.gz", Bin, p.OS, p.Arch) }

// semver is what krew accepts as spec.version: v, then semantic versioning.
var semver = regexp.MustCompile(`^v(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)(-[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?(\+[0-9A-Za-z-]+(\.[0-9A-Za-z-]+)*)?$`)

// KrewVersion turns the build's version (`git describe`: a tag such as v0.3.0, or a
// commit such as 9236ce9-dirty between tags) into a semantic version krew accepts: a
// tag as it is, anything else as a pre-release of v0.0.0. The pre-release is one
// identifier ("dev-9236ce9-dirty"), never a number that could start with 0.
func KrewVersion(v string) string {
	if semver.MatchString(v) {
		return v
	}
	clean := regexp.MustCompile(`[^0-9A-Za-z-]+`).ReplaceAllString(v, "-")
	return "v0.0.0-dev-" + strings.Trim(clean, "-")
}

// Options say where the binaries and the LICENSE are, and where the archives go.
type Options struct {
	Version, Dist, License, BaseURL, Template string
}

// Run packs every platform's archive and writes <dist>/orderly.yaml.
func Run(o Options) error {
	license, err := os.ReadFile(o.License)
	if err != nil {
		return fmt.Errorf("reading the LICENSE every archive carries: %w", err)
	}
	tmpl, err := template.ParseFiles(o.Template)
	if err != nil {
		return err
	}
	var ps []Platform
	for _, p := range Platforms {
		bin := filepath.Join(o.Dist, p.OS+"-"+p.Arch, Bin)
		sum, err := pack(bin, license, filepath.Join(o.Dist, ArchiveName(p)))
		if err != nil {
			return fmt.Errorf("packing %s/%s: %w", p.OS, p.Arch, err)
		}
		p.URI, p.SHA256 = strings.TrimSuffix(o.BaseURL, "/")+"/"+ArchiveName(p), sum
		ps = append(ps, p)
	}
	out, err := os.Create(filepath.Join(o.Dist, "orderly.yaml"))
	if err != nil {
		return err
	}
	if err := tmpl.Execute(out, struct {
		Version   string
		Platforms []Platform
	}{KrewVersion(o.Version), ps}); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}

// pack writes a tar.gz of the binary and the LICENSE to path, and returns its sha256.
func pack(binary string, license []byte, path string) (string, error) {
	bin, err := os.ReadFile(binary)
	if err != nil {
		return "", err
	}
	f, err := os.Create(path)
	if err != nil {
		return "", err
	}
	h := sha256.New()
	gz := gzip.NewWriter(io.MultiWriter(f, h)) // no name, no modification time
	tw := tar.NewWriter(gz)
	for _, e := range []struct {
		name string
		mode int64
		data []byte
	}{{Bin, 0o755, bin}, {"LICENSE", 0o644, license}} {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Size: int64(len(e.data)), Typeflag: tar.TypeReg, Format: tar.FormatPAX}
		if err := tw.WriteHeader(hdr); err != nil {
			return "", err
		}
		if _, err := tw.Write(e.data); err != nil {
			return "", err
		}
	}
	if err := errors.Join(tw.Close(), gz.Close(), f.Close()); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

func main() {
	var o Options
	flag.StringVar(&o.Version, "version", "", "the build's version (make's VERSION)")
	flag.StringVar(&o.Dist, "dist", "dist", "where the binaries are (<os>-<arch>/kubectl-orderly) and the archives and manifest go")
	flag.StringVar(&o.License, "license", "LICENSE", "the license file every archive carries")
	flag.StringVar(&o.BaseURL, "base-url", "", "the URL the archives are published under")
	flag.StringVar(&o.Template, "template", "hack/krew/orderly.yaml.tmpl", "the manifest's template")
	flag.Parse()
	if o.Version == "" || o.BaseURL == "" {
		fmt.Fprintln(os.Stderr, "krew: --version and --base-url are required")
		os.Exit(2)
	}
	if err := Run(o); err != nil {
		fmt.Fprintln(os.Stderr, "krew:", err)
		os.Exit(1)
	}
	fmt.Printf("wrote %s\n", filepath.Join(o.Dist, "orderly.yaml"))
}
