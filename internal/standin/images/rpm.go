package images

import (
	"cmp"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"orderly.dev/orderly/internal/localproc"
)

// AlmaLinuxOSRelease is the os-release file written for RPM contents.
const AlmaLinuxOSRelease = `NAME="AlmaLinux"
VERSION="9.4 (Seafoam Ocelot)"
ID="almalinux"
ID_LIKE="rhel centos fedora"
VERSION_ID="9.4"
PLATFORM_ID="platform:el9"
PRETTY_NAME="AlmaLinux 9.4 (Seafoam Ocelot)"
CPE_NAME="cpe:/o:almalinux:almalinux:9::baseos"
`

// rpmDatabasePath is where RHEL 9 and its rebuilds keep the RPM database.
const rpmDatabasePath = "/var/lib/rpm/rpmdb.sqlite"

// RPMDatabase returns a real RPM database (SQLite, as RHEL 9 keeps it) that lists
// pkgs as installed. Each package is built by rpmbuild as an empty noarch package of
// that name and version ("[epoch:]version-release") and recorded with
// `rpm --justdb`, so the database is what rpm itself writes. Debian's rpm package
// provides both commands; it is installed when missing (as root).
func RPMDatabase(pkgs []Pkg) ([]byte, error) {
	if _, err := exec.LookPath("rpmbuild"); err != nil {
		if err := localproc.AptInstall("rpm"); err != nil {
			return nil, fmt.Errorf("rpmbuild is missing and installing Debian's rpm failed: %w", err)
		}
	}
	dir, err := os.MkdirTemp("", "orderly-testimages-rpm-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	top, root := filepath.Join(dir, "top"), filepath.Join(dir, "root")
	run := func(name string, args ...string) error {
		// HOME keeps rpm away from the user's own macros.
		cmd := exec.Command(name, args...)
		cmd.Env = append(os.Environ(), "HOME="+dir)
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
		}
		return nil
	}
	var built []string
	for i, p := range pkgs {
		epoch, version, release, err := splitRPMVersion(p.Version)
		if err != nil {
			return nil, fmt.Errorf("package %s: %w", p.Name, err)
		}
		spec := fmt.Sprintf("Name: %s\nVersion: %s\nRelease: %s\nSummary: test package %s\nLicense: MIT\nBuildArch: noarch\n", p.Name, version, release, p.Name)
		if epoch != "" {
			spec += "Epoch: " + epoch + "\n"
		}
		spec += "%description\n" + cmp.Or(p.Description, "test package") + "\n%files\n"
		specFile := filepath.Join(dir, fmt.Sprintf("p%d.spec", i))
		if err := os.WriteFile(specFile, []byte(spec), 0o600); err != nil {
			return nil, err
		}
		if err := run("rpmbuild", "--quiet", "--define", "_topdir "+top, "-bb", specFile); err != nil {
			return nil, err
		}
		built = append(built, filepath.Join(top, "RPMS", "noarch", fmt.Sprintf("%s-%s-%s.noarch.rpm", p.Name, version, release)))
	}
	if err := run("rpm", "--root", root, "--dbpath", filepath.Dir(rpmDatabasePath), "--initdb"); err != nil {
		return nil, err
	}
	if len(built) > 0 {
		args := append([]string{"--root", root, "--dbpath", filepath.Dir(rpmDatabasePath), "-i", "--justdb", "--nodeps", "--noscripts"}, built...)
		if err := run("rpm", args...); err != nil {
			return nil, err
		}
	}
	return os.ReadFile(filepath.Join(root, rpmDatabasePath))
}

// splitRPMVersion splits "[epoch:]version-release".
func splitRPMVersion(v string) (epoch, version, release string, err error) {
	if e, rest, ok := strings.Cut(v, ":"); ok {
		epoch, v = e, rest
	}
	i := strings.LastIndex(v, "-")
	if i <= 0 || i == len(v)-1 {
		return "", "", "", fmt.Errorf("version %q is not [epoch:]version-release", v)
	}
	return epoch, v[:i], v[i+1:], nil
}
