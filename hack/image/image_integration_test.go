//go:build integration

package main

import (
	"archive/tar"
	"debug/elf"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"

	"orderly.dev/orderly/internal/testing/testenv"
	"orderly.dev/orderly/internal/testing/testregistry"
)

// The image built from a static binary, pushed to a real registry and pulled back:
// its config runs /orderly manager as the nonroot user, its passwd knows that user,
// and the binary in it reports the version it was built with. Two builds of the same
// binary have the same digest.
func TestImageRoundTrip(t *testing.T) {
	reg, err := testregistry.Start()
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	// The binary `make build` made (the integration tier builds it first): static,
	// so it runs in an image without libc.
	bin := filepath.Join(testenv.RepoRoot(), "bin", "orderly")
	if err := static(bin); err != nil {
		t.Fatalf("%s: %v (run make build)", bin, err)
	}
	want, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	const version = "v0.0.0-imagetest"

	ref := reg.Host + "/orderly:test"
	if err := run(binaries{"linux/amd64": bin}, ref, true, "", Labels(version, "abc123")); err != nil {
		t.Fatal(err)
	}
	again, err := Build(binaries{"linux/amd64": bin}, Labels(version, "abc123"))
	if err != nil {
		t.Fatal(err)
	}
	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	desc, err := remote.Get(r)
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != desc.Digest {
		t.Errorf("a second build of the same binary has digest %s, the pushed one %s", d, desc.Digest)
	}
	img, err := remote.Image(r, remote.WithPlatform(v1.Platform{OS: "linux", Architecture: "amd64"}))
	if err != nil {
		t.Fatal(err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.Config.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532 (nonroot)", cf.Config.User)
	}
	if strings.Join(cf.Config.Entrypoint, " ") != "/orderly" || strings.Join(cf.Config.Cmd, " ") != "manager" {
		t.Errorf("entrypoint %q cmd %q, want /orderly manager", cf.Config.Entrypoint, cf.Config.Cmd)
	}
	if cf.Config.Labels["org.opencontainers.image.version"] != version || cf.Architecture != "amd64" || cf.OS != "linux" {
		t.Errorf("labels %v, platform %s/%s", cf.Config.Labels, cf.OS, cf.Architecture)
	}

	files := extract(t, img, "orderly", "etc/passwd", "tmp/")
	if !strings.Contains(string(files["etc/passwd"]), "nonroot:x:65532:65532:") {
		t.Errorf("/etc/passwd has no nonroot user:\n%s", files["etc/passwd"])
	}
	pulled := filepath.Join(t.TempDir(), "orderly")
	if err := os.WriteFile(pulled, files["orderly"], 0o755); err != nil {
		t.Fatal(err)
	}
	got, err := exec.Command(pulled, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("the image's binary says %q, the one built says %q", got, want)
	}
}

// static checks that the ELF binary at path asks for no dynamic loader.
func static(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return errors.New("dynamically linked (built with cgo)")
		}
	}
	return nil
}

// extract reads the named entries out of the image's flattened file system.
func extract(t *testing.T, img v1.Image, names ...string) map[string][]byte {
	t.Helper()
	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			t.Fatal(err)
		}
		tr := tar.NewReader(rc)
		for {
			h, err := tr.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for _, n := range names {
				if h.Name == n {
					b, err := io.ReadAll(tr)
					if err != nil {
						t.Fatal(err)
					}
					out[n] = b
					if n == "tmp/" && h.Mode&0o1777 != 0o1777 {
						t.Errorf("/tmp has mode %o, want 1777", h.Mode)
					}
				}
			}
		}
		_ = rc.Close()
	}
	for _, n := range names {
		if _, ok := out[n]; !ok {
			t.Errorf("the image has no %s", n)
		}
	}
	return out
}
