package testpg

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// extension is an extension of the test's own: its control file and the install
// script of version 1.0.
type extension struct {
	name, control, script string
}

// relocate builds, in dir/install, a copy of the PostgreSQL installation whose bin
// directory is bin, with exts added to its extensions, and returns the copy's bin
// directory. PostgreSQL finds its share directory relative to where its binary
// lies (when the two keep the layout they were built with), so the copy mirrors
// the installation's absolute paths under dir/install: the binaries are copied
// (symbolic links would be followed back), everything else is linked.
func relocate(dir, bin string, exts []extension) (string, error) {
	paths := map[string]string{}
	for _, name := range []string{"bindir", "sharedir", "pkglibdir"} {
		out, err := exec.Command(filepath.Join(bin, "pg_config"), "--"+name).Output()
		if err != nil {
			return "", fmt.Errorf("pg_config --%s (in %s): %w", name, bin, err)
		}
		paths[name] = strings.TrimSpace(string(out))
	}
	root := filepath.Join(dir, "install")
	under := func(p string) string { return filepath.Join(root, p) }
	newBin := under(paths["bindir"])
	if err := os.MkdirAll(newBin, 0o755); err != nil {
		return "", err
	}
	for _, name := range []string{"postgres", "initdb", "pg_ctl"} {
		if err := copyFile(filepath.Join(paths["bindir"], name), filepath.Join(newBin, name), 0o755); err != nil {
			return "", err
		}
	}
	if err := os.MkdirAll(filepath.Dir(under(paths["pkglibdir"])), 0o755); err != nil {
		return "", err
	}
	if _, err := os.Lstat(under(paths["pkglibdir"])); os.IsNotExist(err) {
		if err := os.Symlink(paths["pkglibdir"], under(paths["pkglibdir"])); err != nil {
			return "", err
		}
	}
	share := under(paths["sharedir"])
	if err := linkEntries(paths["sharedir"], share, "extension"); err != nil {
		return "", err
	}
	extDir := filepath.Join(share, "extension")
	if err := linkEntries(filepath.Join(paths["sharedir"], "extension"), extDir, ""); err != nil {
		return "", err
	}
	for _, e := range exts {
		for name, content := range map[string]string{e.name + ".control": e.control, e.name + "--1.0.sql": e.script} {
			if err := os.WriteFile(filepath.Join(extDir, name), []byte(content), 0o644); err != nil {
				return "", err
			}
		}
	}
	return newBin, nil
}

// linkEntries makes dst a directory of symbolic links to the entries of src, all
// but except.
func linkEntries(src, dst, except string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.Name() == except {
			continue
		}
		if err := os.Symlink(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { _ = in.Close() }()
	out, err := os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		_ = out.Close()
		return err
	}
	return out.Close()
}
