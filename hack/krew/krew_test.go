package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"
)

// plugin is krew's manifest (index.Plugin of sigs.k8s.io/krew, apiVersion v1alpha2),
// as much of it as its validation reads. krew's validation package is not imported:
// it would bring krew and its dependencies into go.mod for a few rules, written out
// here instead (validate).
type plugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Homepage         string `json:"homepage"`
		Platforms        []struct {
			Selector *metav1.LabelSelector `json:"selector"`
			URI      string                `json:"uri"`
			Sha256   string                `json:"sha256"`
			Bin      string                `json:"bin"`
			Files    []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

var (
	safePluginName = regexp.MustCompile(`^[\w-]+$`)
	validSHA256    = regexp.MustCompile(`^[a-f0-9]{64}$`)
)

// validate checks a manifest file against krew's rules (pkg/index/validation:
// ValidatePlugin and validatePlatform), plus what `kubectl krew install` then needs
// of the archives in dist: each platform's archive is there, its sha256 is the
// manifest's, and it holds the bin and every file the manifest copies out of it. It
// also refuses two platforms for one os/arch, which krew-index refuses.
func validate(manifest, dist string) error {
	raw, err := os.ReadFile(manifest)
	if err != nil {
		return err
	}
	var p plugin
	if err := yaml.UnmarshalStrict(raw, &p); err != nil {
		return fmt.Errorf("not a krew manifest: %w", err)
	}
	name := strings.TrimSuffix(filepath.Base(manifest), ".yaml")
	var errs []error
	check := func(ok bool, format string, args ...any) {
		if !ok {
			errs = append(errs, fmt.Errorf(format, args...))
		}
	}
	check(p.APIVersion == "krew.googlecontainertools.github.com/v1alpha2", "apiVersion %q is not krew.googlecontainertools.github.com/v1alpha2", p.APIVersion)
	check(p.Kind == "Plugin", "kind %q is not Plugin", p.Kind)
	check(safePluginName.MatchString(name), "plugin name %q is not allowed", name)
	check(p.Metadata.Name == name, "metadata.name %q is not the file's name %q", p.Metadata.Name, name)
	check(p.Spec.ShortDescription != "", "no shortDescription")
	check(semver.MatchString(p.Spec.Version), "version %q is not v followed by a semantic version", p.Spec.Version)
	check(len(p.Spec.Platforms) > 0, "no platform")
	seen := map[string]bool{}
	for i, pl := range p.Spec.Platforms {
		at := fmt.Sprintf("platforms[%d]", i)
		check(pl.URI != "", "%s: no uri", at)
		u, err := url.Parse(pl.URI)
		check(err == nil && (u.Scheme == "https" || u.Scheme == "http") && u.Host != "", "%s: uri %q is not an http(s) URL", at, pl.URI)
		check(validSHA256.MatchString(pl.Sha256), "%s: sha256 %q is not 64 lowercase hex digits", at, pl.Sha256)
		check(pl.Bin != "" && !filepath.IsAbs(pl.Bin) && !strings.Contains(pl.Bin, ".."), "%s: bin %q is not a relative path", at, pl.Bin)
		for _, f := range pl.Files {
			check(f.From != "" && f.To != "", "%s: a file without from or to", at)
		}
		check(pl.Selector != nil && (len(pl.Selector.MatchLabels) > 0 || len(pl.Selector.MatchExpressions) > 0), "%s: no selector", at)
		if pl.Selector == nil {
			continue
		}
		sel, err := metav1.LabelSelectorAsSelector(pl.Selector)
		check(err == nil, "%s: selector: %v", at, err)
		for _, pf := range Platforms {
			if err == nil && sel.Matches(labels.Set{"os": pf.OS, "arch": pf.Arch}) {
				key := pf.OS + "/" + pf.Arch
				check(!seen[key], "%s: a second platform for %s", at, key)
				seen[key] = true
			}
		}

		// The archive the uri names, as dist holds it.
		archive := filepath.Join(dist, filepath.Base(pl.URI))
		b, err := os.ReadFile(archive)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", at, err))
			continue
		}
		sum := sha256.Sum256(b)
		check(hex.EncodeToString(sum[:]) == pl.Sha256, "%s: sha256 %s is not %s's (%x)", at, pl.Sha256, archive, sum)
		names, err := tarNames(b)
		check(err == nil, "%s: %s: %v", at, archive, err)
		check(slices.Contains(names, pl.Bin), "%s: %s does not hold the bin %s (%q)", at, archive, pl.Bin, names)
		for _, f := range pl.Files {
			check(slices.Contains(names, f.From), "%s: %s does not hold %s", at, archive, f.From)
		}
	}
	for _, pf := range Platforms {
		check(seen[pf.OS+"/"+pf.Arch], "no platform for %s/%s", pf.OS, pf.Arch)
	}
	return errors.Join(errs...)
}

func tarNames(archive []byte) ([]string, error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	var names []string
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return names, nil
		}
		if err != nil {
			return nil, err
		}
		names = append(names, h.Name)
	}
}

// fakeDist lays out what `make dist` builds, with small files for binaries.
func fakeDist(t *testing.T) (dist, license string) {
	t.Helper()
	dist = t.TempDir()
	for _, p := range Platforms {
		dir := filepath.Join(dist, p.OS+"-"+p.Arch)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, Bin), []byte("binary for "+p.OS+"/"+p.Arch), 0o755); err != nil { //nolint:gosec // an executable
			t.Fatal(err)
		}
	}
	license = filepath.Join(t.TempDir(), "LICENSE")
	if err := os.WriteFile(license, []byte("the license\n"), 0o644); err != nil { //nolint:gosec // not a secret
		t.Fatal(err)
	}
	return dist, license
}

func TestGeneratedManifestFollowsKrewRules(t *testing.T) {
	dist, license := fakeDist(t)
	o := Options{Version: "9236ce9-dirty", Dist: dist, License: license, BaseURL: "https://example.com/orderly/v0.0.0/", Template: "orderly.yaml.tmpl"}
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(dist, "orderly.yaml")
	if err := validate(manifest, dist); err != nil {
		t.Fatalf("dist/orderly.yaml breaks krew's rules:\n%v", err)
	}
	var p plugin
	raw, _ := os.ReadFile(manifest)
	if err := yaml.Unmarshal(raw, &p); err != nil {
		t.Fatal(err)
	}
	if p.Spec.Version != "v0.0.0-dev-9236ce9-dirty" {
		t.Errorf("version %q", p.Spec.Version)
	}
	if u := p.Spec.Platforms[0].URI; u != "https://example.com/orderly/v0.0.0/kubectl-orderly_linux_amd64.tar.gz" {
		t.Errorf("uri %q", u)
	}

	// The same binaries give the same archives: a release can be rebuilt and checked.
	first := slices.Clone(raw)
	if err := Run(o); err != nil {
		t.Fatal(err)
	}
	if again, _ := os.ReadFile(manifest); !bytes.Equal(first, again) {
		t.Error("packing the same binaries twice gave different sha256s")
	}

	// The check itself catches what krew refuses.
	bad := filepath.Join(t.TempDir(), "orderly.yaml")
	broken := strings.Replace(string(raw), p.Spec.Platforms[1].Sha256, strings.Repeat("0", 64), 1)
	broken = strings.Replace(broken, "kind: Plugin", "kind: Plugins", 1)
	if err := os.WriteFile(bad, []byte(broken), 0o644); err != nil { //nolint:gosec // not a secret
		t.Fatal(err)
	}
	err := validate(bad, dist)
	if err == nil || !strings.Contains(err.Error(), `kind "Plugins"`) || !strings.Contains(err.Error(), "platforms[1]: sha256") {
		t.Errorf("a wrong kind and sha256 not caught: %v", err)
	}
}

func TestRunRefusesAMissingLicense(t *testing.T) {
	dist, _ := fakeDist(t)
	err := Run(Options{Version: "v1.0.0", Dist: dist, License: filepath.Join(dist, "LICENSE"), BaseURL: "https://example.com", Template: "orderly.yaml.tmpl"})
	if err == nil || !strings.Contains(err.Error(), "LICENSE") {
		t.Errorf("err = %v, want one about the LICENSE", err)
	}
}

func TestKrewVersion(t *testing.T) {
	for in, want := range map[string]string{
		"v0.3.0":         "v0.3.0",
		"v1.2.3-rc.1":    "v1.2.3-rc.1",
		"9236ce9":        "v0.0.0-dev-9236ce9",
		"0123456-dirty":  "v0.0.0-dev-0123456-dirty", // one identifier: a leading 0 is fine
		"v0.3.0-4-gabc1": "v0.3.0-4-gabc1",
		"dev":            "v0.0.0-dev-dev",
	} {
		if got := KrewVersion(in); got != want || !semver.MatchString(got) {
			t.Errorf("KrewVersion(%q) = %q, want %q", in, got, want)
		}
	}
}

// The manifest `make dist` wrote, when it has been run: krew's rules on the real
// archives.
func TestDistManifest(t *testing.T) {
	dist := filepath.Join("..", "..", "dist")
	manifest := filepath.Join(dist, "orderly.yaml")
	if _, err := os.Stat(manifest); err != nil {
		t.Skip("no dist/orderly.yaml: run `make dist` first")
	}
	if err := validate(manifest, dist); err != nil {
		t.Fatalf("dist/orderly.yaml breaks krew's rules:\n%v", err)
	}
}
