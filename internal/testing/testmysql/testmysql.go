// Package testmysql starts a throwaway MariaDB server for tests (Debian's
// mariadb-server, or the binaries in $ORDERLY_MARIADB_BIN_DIR), in a temporary
// directory, listening on a free loopback port. When MariaDB is missing it is
// installed (as root) or the caller gets an error that says how to install it;
// tests never skip for lack of it.
//
// MariaDB refuses to run as root, so as root the server's files belong to, and its
// process runs as, the mysql user (created by the package). The server is a child
// of the test process that the kernel kills when the test process dies (Pdeathsig),
// and a later Start removes what a killed test left behind, so no server outlives
// its test for long.
package testmysql

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"orderly.dev/orderly/internal/localproc"

	gomysql "github.com/go-sql-driver/mysql"
)

// Admin is the user the tests' Orderly logs in as: ALL PRIVILEGES ON *.* WITH
// GRANT OPTION, from any host.
const Admin = "orderly_admin"

// BinDirEnv names a directory holding mariadbd and mariadb-install-db, to use
// instead of Debian's /usr/sbin and /usr/bin.
const BinDirEnv = "ORDERLY_MARIADB_BIN_DIR"

// InstallCommand installs the server on Debian and Ubuntu.
const InstallCommand = "sudo apt-get install -y mariadb-server"

// ErrNotInstalled: no MariaDB server binaries were found.
var ErrNotInstalled = errors.New("MariaDB is not installed (no mariadbd and mariadb-install-db); install it with `" + InstallCommand + "` (Debian/Ubuntu), or set " + BinDirEnv)

// Server is a running throwaway MariaDB.
type Server struct {
	Host     string
	Port     int32
	Username string
	Password string
	// Dir holds the data, the socket and the logs.
	Dir string
	// CACert is the PEM certificate of the CA that signed the server's, WithTLS.
	CACert []byte

	cmd    *exec.Cmd
	exited chan struct{}
	once   sync.Once
	// bin, args and cred start the server again (StartAgain).
	bin  string
	args []string
	cred *syscall.Credential
}

type options struct {
	tls        bool
	generalLog bool
	args       []string
}

// Option changes the server Start starts.
type Option func(*options)

// WithGeneralLog logs every statement the server receives to GeneralLog().
func WithGeneralLog() Option { return func(o *options) { o.generalLog = true } }

// WithArgs adds mariadbd options, e.g. "--max-statement-time=1".
func WithArgs(args ...string) Option { return func(o *options) { o.args = append(o.args, args...) } }

const dirPrefix = "orderly-testmysql-"

// FindBinDirs returns the directories of mariadbd and mariadb-install-db.
func FindBinDirs() (server, install string, err error) {
	if d := os.Getenv(BinDirEnv); d != "" {
		for _, name := range []string{"mariadbd", "mariadb-install-db"} {
			if _, err := os.Stat(filepath.Join(d, name)); err != nil {
				return "", "", fmt.Errorf("%w: $%s=%s holds no %s", ErrNotInstalled, BinDirEnv, d, name)
			}
		}
		return d, d, nil
	}
	if _, err := os.Stat("/usr/sbin/mariadbd"); err != nil {
		return "", "", ErrNotInstalled
	}
	if _, err := os.Stat("/usr/bin/mariadb-install-db"); err != nil {
		return "", "", ErrNotInstalled
	}
	return "/usr/sbin", "/usr/bin", nil
}

// InstallBinDirs is FindBinDirs, installing Debian's mariadb-server first when it
// is missing and the caller is root (as in CI and on fresh test machines).
func InstallBinDirs() (server, install string, err error) {
	if s, i, err := FindBinDirs(); err == nil || os.Geteuid() != 0 || os.Getenv(BinDirEnv) != "" {
		return s, i, err
	}
	if err := localproc.AptInstall("mariadb-server"); err != nil {
		return "", "", fmt.Errorf("installing MariaDB: %w", err)
	}
	return FindBinDirs()
}

// Start initialises and starts a new server. Call Close to stop it and remove its files.
func Start(opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	serverBin, installBin, err := InstallBinDirs()
	if err != nil {
		return nil, err
	}
	sweepOrphans()
	dir, err := localproc.MkdirOwned(dirPrefix)
	if err != nil {
		return nil, err
	}
	s, err := start(dir, serverBin, installBin, o)
	if err != nil {
		if s != nil {
			s.Close()
		}
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

// sweepOrphans removes the directories of servers whose test process died without
// Close; their servers died with them (Pdeathsig), or are killed here by pid.
func sweepOrphans() {
	for _, dir := range localproc.Orphans(dirPrefix) {
		if b, err := os.ReadFile(filepath.Join(dir, "mariadbd.pid")); err == nil {
			if spid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && spid > 0 {
				_ = syscall.Kill(spid, syscall.SIGKILL)
			}
		}
		_ = os.RemoveAll(dir)
	}
}

// credential is the mysql user's, when running as root; nil otherwise.
func credential(dir string) (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("mysql")
	if err != nil {
		return nil, fmt.Errorf("running MariaDB as root needs the mysql user (created by the mariadb-server package): %w", err)
	}
	uid, _ := strconv.Atoi(u.Uid)
	gid, _ := strconv.Atoi(u.Gid)
	if err := os.Chown(dir, uid, gid); err != nil {
		return nil, err
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}, nil
}

func start(dir, serverBin, installBin string, o options) (*Server, error) {
	cred, err := credential(dir)
	if err != nil {
		return nil, err
	}
	data := filepath.Join(dir, "data")
	// A temporary directory of its own: servers started at once (test packages run
	// in parallel) otherwise collide on the names of their temporary files in /tmp.
	tmp := filepath.Join(dir, "tmp")
	if err := os.Mkdir(tmp, 0o700); err != nil {
		return nil, err
	}
	if cred != nil {
		if err := os.Chown(tmp, int(cred.Uid), int(cred.Gid)); err != nil {
			return nil, err
		}
	}
	// Throwaway data: small logs and buffers, no durability.
	common := []string{"--innodb-log-file-size=8M", "--innodb-buffer-pool-size=32M", "--tmpdir=" + tmp}
	install := exec.Command(filepath.Join(installBin, "mariadb-install-db"), append([]string{"--no-defaults", "--datadir=" + data,
		"--auth-root-authentication-method=normal", "--skip-test-db", "--skip-name-resolve"}, common...)...)
	install.Dir = dir
	if serverBin != "/usr/sbin" {
		install.Args = append(install.Args, "--basedir="+filepath.Dir(serverBin))
	}
	install.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := install.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("mariadb-install-db: %w\n%s", err, out)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	s := &Server{Host: "127.0.0.1", Port: port, Username: Admin, Password: "admin-" + strconv.Itoa(os.Getpid()), Dir: dir}
	args := append([]string{"--no-defaults", "--datadir=" + data, "--socket=" + s.socket(), "--port=" + strconv.Itoa(int(port)),
		"--bind-address=127.0.0.1", "--skip-name-resolve", "--skip-log-bin", "--pid-file=" + filepath.Join(dir, "mariadbd.pid"),
		"--log-error=" + s.LogFile(), "--max-connections=400", "--innodb-flush-log-at-trx-commit=0", "--innodb-doublewrite=0"}, common...)
	if o.tls {
		tlsArgs, ca, err := serveTLS(dir, cred)
		if err != nil {
			return nil, err
		}
		args, s.CACert = append(args, tlsArgs...), ca
	}
	if o.generalLog {
		args = append(args, "--general-log=1", "--general-log-file="+s.GeneralLog())
	}
	args = append(args, o.args...)
	s.bin, s.args, s.cred = filepath.Join(serverBin, "mariadbd"), args, cred
	if err := s.launch(); err != nil {
		return nil, err
	}
	if err := s.createAdmin(); err != nil {
		return s, err
	}
	return s, nil
}

// launch starts the server process on the data directory.
func (s *Server) launch() error {
	s.cmd = exec.Command(s.bin, s.args...)
	s.cmd.Dir = s.Dir
	// Killed with the test process: a test binary killed at its timeout leaves no
	// server running.
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred, Pdeathsig: syscall.SIGKILL}
	s.exited = make(chan struct{})
	exited := s.exited
	started := make(chan error, 1)
	go func() {
		// Pdeathsig fires when the thread that started the child ends, not the
		// process: this goroutine keeps its thread until the server has exited, so
		// no other goroutine can lock it and end it. It must give it back unlocked:
		// a goroutine that ends holding its thread ends the thread, and with it
		// every child any goroutine ever started from it (an e2e test's manager
		// was SIGKILLed that way).
		runtime.LockOSThread()
		defer runtime.UnlockOSThread()
		if err := s.cmd.Start(); err != nil {
			started <- err
			close(exited)
			return
		}
		started <- nil
		_ = s.cmd.Wait()
		close(exited)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("starting mariadbd: %w", err)
	}
	return nil
}

// Stop stops the server (its files stay), so that tests can see it unreachable.
func (s *Server) Stop() error {
	if err := s.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		return err
	}
	select {
	case <-s.exited:
		return nil
	case <-time.After(60 * time.Second):
		return errors.New("mariadbd did not stop in 60 s")
	}
}

// StartAgain starts a server Stop stopped, on the same port and data, and waits
// until it accepts connections.
func (s *Server) StartAgain() error {
	if err := s.launch(); err != nil {
		return err
	}
	db, err := s.rootDB()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	return s.waitReady(db)
}

func (s *Server) socket() string { return filepath.Join(s.Dir, "mysqld.sock") }

// rootDB is a pool of root's sessions over the socket.
func (s *Server) rootDB() (*sql.DB, error) {
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Net, cfg.Addr = "root", "unix", s.socket()
	cfg.Logger = &gomysql.NopLogger{}
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	return sql.OpenDB(c), nil
}

// waitReady waits until the server answers db, or has exited.
func (s *Server) waitReady(db *sql.DB) error {
	deadline := time.Now().Add(60 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return nil
		}
		select {
		case <-s.exited:
			return fmt.Errorf("mariadbd exited; its log is %s", s.LogFile())
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("mariadbd did not accept connections in 60 s (its log is %s): %w", s.LogFile(), err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// createAdmin waits for the server and creates Admin as root over the socket.
func (s *Server) createAdmin() error {
	db, err := s.rootDB()
	if err != nil {
		return err
	}
	defer func() { _ = db.Close() }()
	if err := s.waitReady(db); err != nil {
		return err
	}
	for _, stmt := range []string{
		fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", s.Username, s.Password),
		fmt.Sprintf("GRANT ALL PRIVILEGES ON *.* TO '%s'@'%%' WITH GRANT OPTION", s.Username),
	} {
		if _, err := db.Exec(stmt); err != nil {
			return fmt.Errorf("creating the admin user: %w", err)
		}
	}
	return nil
}

// Close kills the server and removes its files.
func (s *Server) Close() {
	s.once.Do(func() {
		if s.cmd != nil && s.cmd.Process != nil {
			_ = s.cmd.Process.Kill()
			select {
			case <-s.exited:
			case <-time.After(30 * time.Second):
			}
		}
		_ = os.RemoveAll(s.Dir)
	})
}

// Pid is the server process's id.
func (s *Server) Pid() int { return s.cmd.Process.Pid }

// LogFile is the server's error log.
func (s *Server) LogFile() string { return filepath.Join(s.Dir, "error.log") }

// GeneralLog is the log of every statement, with WithGeneralLog.
func (s *Server) GeneralLog() string { return filepath.Join(s.Dir, "general.log") }

// DSN is a go-sql-driver data source name for database db as the admin.
func (s *Server) DSN(db string) string { return DSN(s.Host, s.Port, s.Username, s.Password, db) }

// DSN is a go-sql-driver data source name over TCP, without TLS.
func DSN(host string, port int32, user, password, db string) string {
	cfg := gomysql.NewConfig()
	cfg.User, cfg.Passwd, cfg.Net, cfg.Addr, cfg.DBName = user, password, "tcp", net.JoinHostPort(host, strconv.Itoa(int(port))), db
	cfg.Logger = &gomysql.NopLogger{}
	return cfg.FormatDSN()
}

// Open opens a pool to database db as user (one connection at most, so that
// session state carries from one statement to the next).
func Open(host string, port int32, user, password, db string) (*sql.DB, error) {
	cfg, err := gomysql.ParseDSN(DSN(host, port, user, password, db))
	if err != nil {
		return nil, err
	}
	cfg.Logger = &gomysql.NopLogger{}
	c, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, err
	}
	d := sql.OpenDB(c)
	d.SetMaxOpenConns(1)
	return d, nil
}

// Admin opens a one-connection pool to database db as the admin.
func (s *Server) Admin(db string) (*sql.DB, error) {
	return Open(s.Host, s.Port, s.Username, s.Password, db)
}
