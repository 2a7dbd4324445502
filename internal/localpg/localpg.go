// Package localpg runs a PostgreSQL cluster on this machine with initdb and pg_ctl,
// from Debian's postgresql package: the throwaway servers of the tests
// (internal/testing/testpg) and the persistent one of `orderly dev postgres`.
//
// PostgreSQL refuses to run as root, so when the caller is root the cluster's files
// belong to, and its processes run as, the postgres user (created by the package).
package localpg

import (
	"cmp"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"orderly.dev/orderly/internal/localproc"
)

// Admin is the superuser that initdb creates.
const Admin = "orderly_admin"

// InstallCommand installs the server binaries on Debian and Ubuntu.
const InstallCommand = "sudo apt-get install -y postgresql"

// ErrNotInstalled: no PostgreSQL server binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb); install it with `" + InstallCommand + "` (Debian/Ubuntu)")

// BinDirEnv names a directory with initdb, pg_ctl and postgres to use instead of
// Debian's (for other distributions' layouts).
const BinDirEnv = "ORDERLY_POSTGRES_BIN_DIR"

// binGlob is where Debian's packages put the server binaries, one directory per
// major version.
const binGlob = "/usr/lib/postgresql/*/bin/initdb"

// FindBinDir returns $ORDERLY_POSTGRES_BIN_DIR if set, else the directory of the
// newest installed server binaries.
func FindBinDir() (string, error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		if _, err := os.Stat(filepath.Join(d, "initdb")); err != nil {
			return "", fmt.Errorf("%w: $%s=%s holds no initdb", ErrNotInstalled, BinDirEnv, d)
		}
		return d, nil
	}
	m, _ := filepath.Glob(binGlob)
	if len(m) == 0 {
		return "", ErrNotInstalled
	}
	slices.SortFunc(m, func(a, b string) int { return cmp.Compare(majorOf(a), majorOf(b)) })
	return filepath.Dir(m[len(m)-1]), nil
}

// majorOf reads the major version from /usr/lib/postgresql/<major>/bin/initdb.
func majorOf(initdb string) int {
	n, _ := strconv.Atoi(filepath.Base(filepath.Dir(filepath.Dir(initdb))))
	return n
}

// InstallBinDir is FindBinDir, installing Debian's postgresql package first when
// it is missing and the caller is root (as in CI and on fresh test machines).
func InstallBinDir() (string, error) {
	if d, err := FindBinDir(); err == nil || os.Geteuid() != 0 || os.Getenv(BinDirEnv) != "" {
		return d, err
	}
	if err := localproc.AptInstall("postgresql"); err != nil {
		return "", fmt.Errorf("installing PostgreSQL: %w", err)
	}
	return FindBinDir()
}

// Cluster is one PostgreSQL cluster: its data, socket and log live in Dir.
type Cluster struct {
	// Dir holds data/, server.log and the Unix socket.
	Dir  string
	Port int32
	// Settings are extra server settings (-c name=value).
	Settings []string

	bin  string
	cred *syscall.Credential
	mu   sync.Mutex
}

// New describes a cluster in dir (created if missing) listening on 127.0.0.1:port,
// using the server binaries in bin. As root, dir is handed to the postgres user.
func New(dir string, port int32, bin string) (*Cluster, error) {
	c := &Cluster{Dir: dir, Port: port, bin: bin}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running PostgreSQL as root needs the postgres user (created by the postgresql package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
		if err := reachable(dir, uint32(uid)); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// reachable checks that the user uid may enter every directory above dir.
func reachable(dir string, uid uint32) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	for p := filepath.Dir(abs); ; p = filepath.Dir(p) {
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if ok && fi.Mode().Perm()&0o001 == 0 && st.Uid != uid {
			return fmt.Errorf("PostgreSQL runs as the postgres user, which cannot enter %s: choose a directory under /tmp or /var/tmp", p)
		}
		if p == filepath.Dir(p) {
			return nil
		}
	}
}

// WriteFile writes data to the file name in Dir, readable by the server's user
// only (as PostgreSQL wants of a TLS key), and returns its path.
func (c *Cluster) WriteFile(name string, data []byte) (string, error) {
	path := filepath.Join(c.Dir, name)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		return "", err
	}
	if c.cred != nil {
		if err := os.Chown(path, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return "", err
		}
	}
	return path, nil
}

// DataDir is the cluster's data directory.
func (c *Cluster) DataDir() string { return filepath.Join(c.Dir, "data") }

// LogFile is the server's log.
func (c *Cluster) LogFile() string { return filepath.Join(c.Dir, "server.log") }

// Initialized is true once Init has created the data directory.
func (c *Cluster) Initialized() bool {
	_, err := os.Stat(filepath.Join(c.DataDir(), "PG_VERSION"))
	return err == nil
}

// Init creates the data directory with the superuser Admin and its password;
// TCP logins need the password (scram-sha-256), the Unix socket in Dir trusts.
func (c *Cluster) Init(password string) error {
	pwfile := filepath.Join(c.Dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(password+"\n"), 0o600); err != nil {
		return err
	}
	defer func() { _ = os.Remove(pwfile) }()
	if c.cred != nil {
		if err := os.Chown(pwfile, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return err
		}
	}
	return c.run("initdb", "-D", c.DataDir(), "-U", Admin, "--pwfile", pwfile, "--auth-host=scram-sha-256",
		"--auth-local=trust", "-E", "UTF8", "--no-sync", "--locale=C.UTF-8")
}

// Start starts the server and waits until it accepts connections.
func (c *Cluster) Start() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	opts := []string{fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1", c.Port, c.Dir)}
	for _, s := range c.Settings {
		opts = append(opts, "-c "+s)
	}
	err := c.run("pg_ctl", "-D", c.DataDir(), "-o", strings.Join(opts, " "), "-l", c.LogFile(), "-w", "-t", "60", "start")
	if err != nil {
		return fmt.Errorf("%w\nthe server's log is %s", err, c.LogFile())
	}
	return nil
}

// Stop stops the server (fast: connections are cut, data is kept).
func (c *Cluster) Stop() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run("pg_ctl", "-D", c.DataDir(), "-m", "fast", "-w", "stop")
}

// Kill stops the server at once, without a checkpoint (for throwaway clusters).
func (c *Cluster) Kill() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.run("pg_ctl", "-D", c.DataDir(), "-m", "immediate", "-w", "stop")
}

// Running is true when the server of the data directory runs.
func (c *Cluster) Running() bool {
	if !c.Initialized() {
		return false
	}
	return c.run("pg_ctl", "-D", c.DataDir(), "status") == nil
}

// Version is the server binaries' version, e.g. "15.14".
func (c *Cluster) Version() (string, error) {
	out, err := exec.Command(filepath.Join(c.bin, "postgres"), "--version").Output()
	if err != nil {
		return "", err
	}
	// "postgres (PostgreSQL) 15.14 (Debian 15.14-0+deb12u1)"
	f := strings.Fields(string(out))
	if len(f) < 3 {
		return "", fmt.Errorf("postgres --version printed %q", out)
	}
	return f[2], nil
}

func (c *Cluster) run(name string, args ...string) error {
	localproc.CloseInheritedOnExec()
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.Dir
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return nil
}

// URL is a connection URL for database db as Admin with password.
func (c *Cluster) URL(password, db string) string {
	return fmt.Sprintf("postgres://%s:%s@127.0.0.1:%d/%s?sslmode=disable", Admin, password, c.Port, db)
}
