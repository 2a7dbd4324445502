// Package images builds real container images and pushes them to a registry (the
// registry stand-in, internal/standin/registry), and writes the OSV database files a
// scanner reads: for the image scanner's tests, and for the images and the offline
// vulnerability database of `orderly dev up --with images`.
//
// The images are real OCI images (go-containerregistry: an empty image, one gzip
// layer, a config with os/architecture) whose layer holds real package databases:
// a dpkg status file with Debian's os-release, an apk installed file with Alpine's,
// an RPM database written by rpm itself with AlmaLinux's (see RPMDatabase), and a Go
// binary built by `go build` whose build information lists the requested module
// versions (see BuildGoBinary: the modules are served to the Go command from a module
// proxy on disk, so no network is used). Files are written with a fixed
// time, so equal contents give equal digests.
package images

import (
	"archive/tar"
	"bytes"
	"context"
	"fmt"
	"io"
	"path"
	"runtime"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/static"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// Pkg is a package name and version.
type Pkg struct {
	Name, Version string
	// Description is an RPM package's description (default "test package"): a long
	// one makes its header spill onto the database's overflow pages.
	Description string
}

// Contents is what an image holds.
type Contents struct {
	// Dpkg packages go into /var/lib/dpkg/status, with Debian 12's /etc/os-release
	// (unless Apk is set too, or Files has its own os-release).
	Dpkg []Pkg
	// Apk packages go into /lib/apk/db/installed, with Alpine 3.20's os-release.
	Apk []Pkg
	// Rpm packages ("[epoch:]version-release") go into a real RPM database,
	// /var/lib/rpm/rpmdb.sqlite (see RPMDatabase), with AlmaLinux 9's os-release
	// (unless Dpkg or Apk is set too).
	Rpm []Pkg
	// GoModules are listed in the build information of /usr/local/bin/app, a Go
	// binary built for the image (module paths and versions as in go.mod, e.g.
	// {"golang.org/x/text", "v0.3.0"}).
	GoModules []Pkg
	// Files are further files by absolute path; they win over the generated ones.
	Files map[string][]byte
}

// fixedTime is the modification time of every file, so images are reproducible.
var fixedTime = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// DebianOSRelease and AlpineOSRelease are the os-release files written for dpkg and
// apk contents.
const (
	DebianOSRelease = `PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"
NAME="Debian GNU/Linux"
VERSION_ID="12"
VERSION="12 (bookworm)"
VERSION_CODENAME=bookworm
ID=debian
`
	AlpineOSRelease = `NAME="Alpine Linux"
ID=alpine
VERSION_ID=3.20.3
PRETTY_NAME="Alpine Linux v3.20"
`
)

// DpkgStatus renders a dpkg status file listing the packages as installed.
func DpkgStatus(pkgs []Pkg) []byte {
	var b strings.Builder
	for _, p := range pkgs {
		fmt.Fprintf(&b, "Package: %s\nStatus: install ok installed\nPriority: optional\nSection: libs\nInstalled-Size: 100\n"+
			"Maintainer: Orderly Tests <tests@orderly.dev>\nArchitecture: amd64\nVersion: %s\nDescription: test package %s\n\n",
			p.Name, p.Version, p.Name)
	}
	return []byte(b.String())
}

// ApkInstalled renders an apk installed database listing the packages.
func ApkInstalled(pkgs []Pkg) []byte {
	var b strings.Builder
	for _, p := range pkgs {
		fmt.Fprintf(&b, "C:Q1AAAAAAAAAAAAAAAAAAAAAAAAAAA=\nP:%s\nV:%s\nA:x86_64\nS:1000\nI:4096\nT:test package %s\n"+
			"U:https://orderly.dev\nL:MIT\no:%s\nm:Orderly Tests <tests@orderly.dev>\nt:1767225600\n\n",
			p.Name, p.Version, p.Name, p.Name)
	}
	return []byte(b.String())
}

type file struct {
	data []byte
	mode int64
}

// Files renders the contents as the files of the image, by absolute path.
func (c Contents) files() (map[string]file, error) {
	out := map[string]file{}
	if len(c.Dpkg) > 0 {
		out["/var/lib/dpkg/status"] = file{DpkgStatus(c.Dpkg), 0o644}
		out["/etc/os-release"] = file{[]byte(DebianOSRelease), 0o644}
	}
	if len(c.Apk) > 0 {
		out["/lib/apk/db/installed"] = file{ApkInstalled(c.Apk), 0o644}
		if len(c.Dpkg) == 0 {
			out["/etc/os-release"] = file{[]byte(AlpineOSRelease), 0o644}
		}
	}
	if len(c.Rpm) > 0 {
		db, err := RPMDatabase(c.Rpm)
		if err != nil {
			return nil, err
		}
		out[rpmDatabasePath] = file{db, 0o644}
		if len(c.Dpkg) == 0 && len(c.Apk) == 0 {
			out["/etc/os-release"] = file{[]byte(AlmaLinuxOSRelease), 0o644}
		}
	}
	if len(c.GoModules) > 0 {
		bin, err := BuildGoBinary(c.GoModules)
		if err != nil {
			return nil, err
		}
		out["/usr/local/bin/app"] = file{bin, 0o755}
	}
	for p, b := range c.Files {
		out[path.Clean("/"+p)] = file{b, 0o644}
	}
	return out, nil
}

// Layer is a gzip OCI layer holding the contents.
func (c Contents) Layer() (v1.Layer, error) {
	files, err := c.files()
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(files))
	for p := range files {
		names = append(names, p)
	}
	sort.Strings(names)
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	dirs := map[string]bool{}
	for _, p := range names {
		var parents []string
		for d := path.Dir(p); d != "/"; d = path.Dir(d) {
			parents = append(parents, d)
		}
		for i := len(parents) - 1; i >= 0; i-- {
			d := parents[i]
			if dirs[d] {
				continue
			}
			dirs[d] = true
			if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeDir, Name: strings.TrimPrefix(d, "/") + "/", Mode: 0o755, ModTime: fixedTime}); err != nil {
				return nil, err
			}
		}
		f := files[p]
		if err := tw.WriteHeader(&tar.Header{Typeflag: tar.TypeReg, Name: strings.TrimPrefix(p, "/"), Mode: f.mode, Size: int64(len(f.data)), ModTime: fixedTime}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// Image is an OCI image for linux/arch (runtime.GOARCH when arch is "") holding the
// contents in one layer.
func (c Contents) Image(arch string) (v1.Image, error) {
	if arch == "" {
		arch = runtime.GOARCH
	}
	layer, err := c.Layer()
	if err != nil {
		return nil, err
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, &v1.ConfigFile{
		OS: "linux", Architecture: arch, Created: v1.Time{Time: fixedTime},
		Config: v1.Config{Cmd: []string{"/usr/local/bin/app"}},
	})
	if err != nil {
		return nil, err
	}
	return mutate.Append(img, mutate.Addendum{Layer: layer, History: v1.History{Created: v1.Time{Time: fixedTime}, CreatedBy: "orderly testimages"}})
}

func reference(registryHost, repoTag string) (name.Reference, error) {
	return name.ParseReference(registryHost+"/"+repoTag, name.Insecure)
}

// Push builds an image of the contents for this machine's architecture and pushes
// it as registryHost/repoTag over plain HTTP; it returns the image's digest.
// opts are added to the push (e.g. remote.WithAuth for a registry with passwords).
func Push(ctx context.Context, registryHost, repoTag string, c Contents, opts ...remote.Option) (string, error) {
	img, err := c.Image("")
	if err != nil {
		return "", err
	}
	return pushImage(ctx, registryHost, repoTag, img, opts)
}

// pushImage pushes img as registryHost/repoTag and returns its digest.
func pushImage(ctx context.Context, registryHost, repoTag string, img v1.Image, opts []remote.Option) (string, error) {
	ref, err := reference(registryHost, repoTag)
	if err != nil {
		return "", err
	}
	if err := remote.Write(ref, img, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := img.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// Platform is one image of a multi-platform index.
type Platform struct {
	Architecture string
	Contents     Contents
}

// PushIndex pushes a multi-platform OCI index of linux images (one per platform) as
// registryHost/repoTag and returns the index's digest.
func PushIndex(ctx context.Context, registryHost, repoTag string, platforms []Platform, opts ...remote.Option) (string, error) {
	ref, err := reference(registryHost, repoTag)
	if err != nil {
		return "", err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for _, p := range platforms {
		img, err := p.Contents.Image(p.Architecture)
		if err != nil {
			return "", err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{
			Add:        img,
			Descriptor: v1.Descriptor{MediaType: types.OCIManifestSchema1, Platform: &v1.Platform{OS: "linux", Architecture: p.Architecture}},
		})
	}
	if err := remote.WriteIndex(ref, idx, append([]remote.Option{remote.WithContext(ctx)}, opts...)...); err != nil {
		return "", fmt.Errorf("pushing %s: %w", ref, err)
	}
	d, err := idx.Digest()
	if err != nil {
		return "", err
	}
	return d.String(), nil
}

// ArtifactConfigMediaType and ArtifactLayerMediaType are the media types of the
// artifact PushArtifact pushes: not a container image.
const (
	ArtifactConfigMediaType types.MediaType = "application/vnd.orderly.test.config.v1+json"
	ArtifactLayerMediaType  types.MediaType = "application/vnd.orderly.test.data.v1"
)

// ArtifactImage is an OCI artifact holding data: an image manifest whose config and
// layer have non-image media types, as Helm charts and signatures have.
func ArtifactImage(data []byte) (v1.Image, error) {
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, ArtifactConfigMediaType)
	return mutate.Append(img, mutate.Addendum{Layer: static.NewLayer(data, ArtifactLayerMediaType)})
}

// PushArtifact pushes an OCI artifact (an image manifest whose config and layer have
// non-image media types, as Helm charts and signatures have) and returns its digest.
func PushArtifact(ctx context.Context, registryHost, repoTag string, data []byte, opts ...remote.Option) (string, error) {
	img, err := ArtifactImage(data)
	if err != nil {
		return "", err
	}
	return pushImage(ctx, registryHost, repoTag, img, opts)
}
