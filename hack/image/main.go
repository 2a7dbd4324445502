// Command image builds Orderly's container image without a container runtime, the
// way ko does: a static binary (built by `make image` with the flags of `make build`)
// added as a layer on a minimal base written here, and pushed to a registry or
// written as an OCI layout. The base is not pulled from anywhere: an /etc/passwd and
// /etc/group with the nonroot user (65532), a world-writable /tmp, and the build
// machine's CA bundle when it has one. Layers carry no timestamps, so the same binary
// gives the same digest.
//
//	go run ./hack/image --binary linux/amd64=bin/linux-amd64/orderly --push 127.0.0.1:5000/orderly:dev --insecure
package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

// NonRoot is the user and group the manager runs as (distroless' nonroot).
const NonRoot = 65532

// caBundle is where Debian and Ubuntu keep the CA bundle the image gets.
const caBundle = "/etc/ssl/certs/ca-certificates.crt"

type binaries map[string]string // "linux/amd64" -> path

func (b binaries) String() string { return fmt.Sprint(map[string]string(b)) }

func (b binaries) Set(v string) error {
	platform, path, ok := strings.Cut(v, "=")
	if !ok || !strings.HasPrefix(platform, "linux/") {
		return fmt.Errorf("want linux/ARCH=PATH, got %q", v)
	}
	b[platform] = path
	return nil
}

func main() {
	bins := binaries{}
	flag.Var(bins, "binary", "linux/ARCH=PATH of a static orderly binary; repeat for a multi-platform image")
	push := flag.String("push", "", "push the image to this reference (registry/repository:tag)")
	insecure := flag.Bool("insecure", false, "talk plain HTTP to the registry (a registry on loopback)")
	ociLayout := flag.String("oci-layout", "", "write the image into this OCI layout directory")
	version := flag.String("version", "", "the binary's version, for the image's labels")
	revision := flag.String("revision", "", "the commit, for the image's labels")
	flag.Parse()
	if err := run(bins, *push, *insecure, *ociLayout, Labels(*version, *revision)); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(bins binaries, push string, insecure bool, ociLayout string, labels map[string]string) error {
	if len(bins) == 0 {
		return errors.New("no --binary given")
	}
	if push == "" && ociLayout == "" {
		return errors.New("give --push or --oci-layout (or both)")
	}
	idx, err := Build(bins, labels)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	if ociLayout != "" {
		p, err := layout.Write(ociLayout, empty.Index)
		if err != nil {
			return err
		}
		if err := p.AppendIndex(idx); err != nil {
			return err
		}
		fmt.Printf("wrote %s into %s\n", digest, ociLayout)
	}
	if push != "" {
		var opts []name.Option
		if insecure {
			opts = append(opts, name.Insecure)
		}
		ref, err := name.ParseReference(push, opts...)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(ref, idx); err != nil {
			return fmt.Errorf("pushing %s: %w", ref, err)
		}
		fmt.Printf("pushed %s@%s\n", ref.Context(), digest)
	}
	return nil
}

// Labels are the image's OCI annotations-as-labels.
func Labels(version, revision string) map[string]string {
	l := map[string]string{
		"org.opencontainers.image.title":       "orderly",
		"org.opencontainers.image.description": "Orderly: platform runbooks as Kubernetes reconcile loops",
	}
	if version != "" {
		l["org.opencontainers.image.version"] = version
	}
	if revision != "" {
		l["org.opencontainers.image.revision"] = revision
	}
	return l
}

// Build makes the image index: one image per platform.
func Build(bins binaries, labels map[string]string) (v1.ImageIndex, error) {
	base, err := baseLayer()
	if err != nil {
		return nil, err
	}
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	for platform, path := range bins {
		img, err := image(platform, path, base, labels)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", platform, err)
		}
		arch := strings.TrimPrefix(platform, "linux/")
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: "linux", Architecture: arch}}})
	}
	return idx, nil
}

func image(platform, path string, base v1.Layer, labels map[string]string) (v1.Image, error) {
	bin, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	app, err := layer([]file{{name: "orderly", mode: 0o755, data: bin}})
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), base, app)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", strings.TrimPrefix(platform, "linux/")
	cf.Created = v1.Time{Time: time.Unix(0, 0).UTC()}
	cf.Config.Entrypoint = []string{"/orderly"}
	cf.Config.Cmd = []string{"manager"}
	cf.Config.User = fmt.Sprintf("%d:%d", NonRoot, NonRoot)
	cf.Config.WorkingDir = "/"
	cf.Config.Env = []string{"PATH=/", "HOME=/tmp"}
	cf.Config.Labels = labels
	return mutate.ConfigFile(img, cf)
}

type file struct {
	name string
	mode int64
	data []byte
	dir  bool
}

// baseLayer is what distroless static gives a Go binary: users, a /tmp and CAs.
func baseLayer() (v1.Layer, error) {
	files := []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:%d:%d:nonroot:/home/nonroot:/sbin/nologin\n", NonRoot, NonRoot))},
		{name: "etc/group", mode: 0o644, data: []byte(fmt.Sprintf("root:x:0:\nnonroot:x:%d:\n", NonRoot))},
		{name: "tmp", mode: 0o1777, dir: true},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true},
	}
	if ca, err := os.ReadFile(caBundle); err == nil {
		files = append(files,
			file{name: "etc/ssl", mode: 0o755, dir: true},
			file{name: "etc/ssl/certs", mode: 0o755, dir: true},
			file{name: strings.TrimPrefix(caBundle, "/"), mode: 0o644, data: ca})
	}
	return layer(files)
}

// layer writes files into a tar layer with zero timestamps, in the order given.
func layer(files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: time.Unix(0, 0), Format: tar.FormatPAX}
		if f.name == "home/nonroot" {
			h.Uid, h.Gid = NonRoot, NonRoot
		}
		if f.dir {
			h.Typeflag, h.Name = tar.TypeDir, f.name+"/"
		} else {
			h.Typeflag, h.Size = tar.TypeReg, int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil },
		tarball.WithMediaType(types.OCILayer))
}
