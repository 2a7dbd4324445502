package images

import (
	"archive/zip"
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"sync"
	"unicode"
)

var (
	goBinaryMu    sync.Mutex
	goBinaryCache = map[string][]byte{}
)

// BuildGoBinary builds a small Go program for linux/runtime.GOARCH whose build
// information lists the modules at the given versions, as a program that depends on
// them would. The modules are made up (a go.mod and one empty package each) and
// served to `go build` from a module proxy in a temporary directory (GOPROXY=file://,
// with its own module cache), so no network is used and the user's module cache is
// not touched; the build info is the Go toolchain's own, read back by debug/buildinfo
// exactly as from any Go binary. One build per distinct module list per process
// (about a second with a warm build cache).
func BuildGoBinary(mods []Pkg) ([]byte, error) {
	mods = append([]Pkg(nil), mods...)
	for i := range mods {
		if !strings.HasPrefix(mods[i].Version, "v") {
			mods[i].Version = "v" + mods[i].Version
		}
	}
	sort.Slice(mods, func(i, j int) bool { return mods[i].Name < mods[j].Name })
	key := fmt.Sprint(mods)
	goBinaryMu.Lock()
	defer goBinaryMu.Unlock()
	if b, ok := goBinaryCache[key]; ok {
		return b, nil
	}
	b, err := buildGoBinary(mods)
	if err != nil {
		return nil, err
	}
	goBinaryCache[key] = b
	return b, nil
}

func buildGoBinary(mods []Pkg) ([]byte, error) {
	goBin, err := exec.LookPath("go")
	if err != nil {
		if root := os.Getenv("GOROOT"); root != "" {
			goBin = filepath.Join(root, "bin", "go")
		} else {
			return nil, errors.New("building a Go binary for a test image needs the go command on PATH")
		}
	}
	dir, err := os.MkdirTemp("", "orderly-testimages-go-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	proxy := filepath.Join(dir, "proxy")
	var main strings.Builder
	var gomod strings.Builder
	gomod.WriteString("module orderly.dev/testimages/app\n\ngo 1.21\n\nrequire (\n")
	main.WriteString("package main\n\nimport (\n")
	for _, m := range mods {
		if err := writeProxyModule(proxy, m); err != nil {
			return nil, err
		}
		fmt.Fprintf(&gomod, "\t%s %s\n", m.Name, m.Version)
		fmt.Fprintf(&main, "\t_ %q\n", m.Name)
	}
	gomod.WriteString(")\n")
	main.WriteString(")\n\nfunc main() {}\n")
	src := filepath.Join(dir, "app")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte(gomod.String()), 0o644); err != nil {
		return nil, err
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(main.String()), 0o644); err != nil {
		return nil, err
	}
	out := filepath.Join(dir, "app.bin")
	cmd := exec.Command(goBin, "build", "-trimpath", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = src
	env := []string{}
	for _, e := range os.Environ() {
		k, _, _ := strings.Cut(e, "=")
		switch k {
		case "GOPROXY", "GOSUMDB", "GOFLAGS", "GOMODCACHE", "GOTOOLCHAIN", "GOWORK", "CGO_ENABLED", "GOOS", "GOARCH",
			"GOPRIVATE", "GONOPROXY", "GONOSUMDB", "GOINSECURE", "GOENV", "GOPATH":
			continue
		}
		env = append(env, e)
	}
	env = append(env,
		"GOPROXY=file://"+filepath.ToSlash(proxy), "GOSUMDB=off", "GOFLAGS=-mod=mod -modcacherw",
		"GOMODCACHE="+filepath.Join(dir, "modcache"), "GOPATH="+filepath.Join(dir, "gopath"),
		"GOTOOLCHAIN=local", "GOWORK=off", "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOENV=off")
	cmd.Env = env
	if b, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("go build of the test binary: %w\n%s", err, b)
	}
	return os.ReadFile(out)
}

// escapePath is the module proxy's case encoding: each capital becomes '!' and its
// lower case.
func escapePath(p string) string {
	var b strings.Builder
	for _, r := range p {
		if unicode.IsUpper(r) {
			b.WriteByte('!')
			b.WriteRune(unicode.ToLower(r))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// writeProxyModule lays out one module version in GOPROXY's file layout:
// <path>/@v/list, <version>.info, .mod and .zip.
func writeProxyModule(proxy string, m Pkg) error {
	d := filepath.Join(proxy, filepath.FromSlash(escapePath(m.Name)), "@v")
	if err := os.MkdirAll(d, 0o755); err != nil {
		return err
	}
	ev := escapePath(m.Version)
	mod := fmt.Sprintf("module %s\n\ngo 1.21\n", m.Name)
	files := map[string]string{
		"list":       m.Version + "\n",
		ev + ".info": fmt.Sprintf(`{"Version":%q,"Time":"2026-01-01T00:00:00Z"}`, m.Version),
		ev + ".mod":  mod,
	}
	for n, c := range files {
		if err := os.WriteFile(filepath.Join(d, n), []byte(c), 0o644); err != nil {
			return err
		}
	}
	var buf bytes.Buffer
	zw := zip.NewWriter(&buf)
	prefix := m.Name + "@" + m.Version + "/"
	for n, c := range map[string]string{"go.mod": mod, "m.go": "// Package m is a module made up for a test image.\npackage m\n"} {
		w, err := zw.Create(prefix + n)
		if err != nil {
			return err
		}
		if _, err := w.Write([]byte(c)); err != nil {
			return err
		}
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(d, ev+".zip"), buf.Bytes(), 0o644)
}
