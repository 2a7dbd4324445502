// Package testpg starts a throwaway PostgreSQL server for tests: Debian's postgresql
// package, initdb and pg_ctl in a temporary directory, listening on a free loopback
// port. When PostgreSQL is missing it is installed (as root) or the caller gets an
// error that says how to install it; tests never skip for lack of it.
package testpg

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"syscall"
)

// Admin is the superuser of every test server.
const Admin = "orderly_admin"

// Server is a running throwaway PostgreSQL.
type Server struct {
	Host     string
	Port     int32
	Username string
	Password string

	bin  string
	dir  string
	cred *syscall.Credential
	mu   sync.Mutex
}

var installOnce sync.Once

// binDir finds PostgreSQL's server binaries, installing Debian's postgresql package
// when running as root and they are missing.
func binDir() (string, error) {
	find := func() string {
		m, _ := filepath.Glob("/usr/lib/postgresql/*/bin/initdb")
		if len(m) == 0 {
			return ""
		}
		sort.Strings(m)
		return filepath.Dir(m[len(m)-1])
	}
	if d := find(); d != "" {
		return d, nil
	}
	if os.Geteuid() != 0 {
		return "", errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb): run `sudo apt-get install -y postgresql` (Debian/Ubuntu) and run the tests again")
	}
	var installErr error
	installOnce.Do(func() {
		for _, args := range [][]string{{"update"}, {"install", "-y", "--no-install-recommends", "postgresql"}} {
			cmd := exec.Command("apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			if out, err := cmd.CombinedOutput(); err != nil {
				installErr = fmt.Errorf("apt-get %v: %w\n%s", args, err, out)
				return
			}
		}
	})
	if installErr != nil {
		return "", fmt.Errorf("installing PostgreSQL: %w", installErr)
	}
	if d := find(); d != "" {
		return d, nil
	}
	return "", errors.New("PostgreSQL was installed but /usr/lib/postgresql/*/bin/initdb is still missing")
}

// Start initialises and starts a new server. Call Close to stop it and remove its files.
func Start() (*Server, error) {
	bin, err := binDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "orderly-testpg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Host: "127.0.0.1", Username: Admin, Password: "admin-" + strconv.Itoa(os.Getpid()), bin: bin, dir: dir}
	if os.Geteuid() == 0 {
		// initdb refuses to run as root: run the server as the postgres user.
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running PostgreSQL as root needs the postgres user (created by the postgresql package): %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		s.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			return nil, err
		}
	}
	pwfile := filepath.Join(dir, "pwfile")
	if err := os.WriteFile(pwfile, []byte(s.Password+"\n"), 0o600); err != nil {
		return nil, err
	}
	if s.cred != nil {
		_ = os.Chown(pwfile, int(s.cred.Uid), int(s.cred.Gid))
	}
	if err := s.run("initdb", "-D", s.data(), "-U", Admin, "--pwfile", pwfile, "--auth-host=scram-sha-256", "--auth-local=trust", "-E", "UTF8", "--no-sync", "--locale=C.UTF-8"); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.Port = int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	if err := s.StartAgain(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

func (s *Server) data() string { return filepath.Join(s.dir, "data") }

func (s *Server) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(s.bin, name), args...)
	cmd.Dir = s.dir
	if s.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %v: %w\n%s", name, args, err, out)
	}
	return nil
}

// StartAgain starts the server after Stop, on the same port with the same data.
func (s *Server) StartAgain() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	opts := fmt.Sprintf("-p %d -k %s -c listen_addresses=127.0.0.1 -c max_connections=400 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c shared_buffers=64MB", s.Port, s.dir)
	return s.run("pg_ctl", "-D", s.data(), "-o", opts, "-l", filepath.Join(s.dir, "server.log"), "-w", "-t", "60", "start")
}

// Stop stops the server, so that it is unreachable, keeping its data.
func (s *Server) Stop() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.run("pg_ctl", "-D", s.data(), "-m", "fast", "-w", "stop")
}

// Close stops the server and removes its files.
func (s *Server) Close() {
	_ = s.run("pg_ctl", "-D", s.data(), "-m", "immediate", "-w", "stop")
	_ = os.RemoveAll(s.dir)
}

// URL is a connection URL for database db as the admin.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", s.Username, s.Password, s.Host, s.Port, db)
}
