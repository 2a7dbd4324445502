// Package testpg starts a throwaway PostgreSQL server for tests (internal/localpg in
// a temporary directory, listening on a free loopback port). When PostgreSQL is
// missing it is installed (as root) or the caller gets an error that says how to
// install it; tests never skip for lack of it.
//
// Options give a server TLS (with a CA of its own), extra settings, or extensions
// of the test's own, and the package has stand-ins for broken servers (fake.go).
package testpg

import (
	"fmt"
	"net"
	"os"
	"strconv"

	"orderly.dev/orderly/internal/localproc"

	"orderly.dev/orderly/internal/localpg"
)

// Admin is the superuser of every test server.
const Admin = localpg.Admin

// Server is a running throwaway PostgreSQL.
type Server struct {
	Host     string
	Port     int32
	Username string
	Password string
	// CACert is the PEM certificate of the CA that signed the server's certificate,
	// with WithTLS; nil otherwise.
	CACert []byte

	cluster *localpg.Cluster
}

// options are what Start was asked for.
type options struct {
	settings   []string
	tls        bool
	extensions []extension
}

// Option changes the server Start starts.
type Option func(*options)

// WithSettings adds server settings (name=value), e.g. "log_statement=all".
func WithSettings(settings ...string) Option {
	return func(o *options) { o.settings = append(o.settings, settings...) }
}

// WithTLS serves TLS with a certificate for 127.0.0.1 and localhost, signed by a CA
// made for this server (Server.CACert). Plaintext connections are still accepted.
func WithTLS() Option { return func(o *options) { o.tls = true } }

// WithExtension makes an extension of the test's own available: a control file
// (its content) and the install script of version 1.0. The server then runs from a
// copy of the installation's binaries whose share directory holds it, so that
// nothing outside the server's own directory changes.
func WithExtension(name, control, script string) Option {
	return func(o *options) {
		o.extensions = append(o.extensions, extension{name: name, control: control, script: script})
	}
}

// Start initialises and starts a new server. Call Close to stop it and remove its files.
func Start(opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	bin, err := localpg.InstallBinDir()
	if err != nil {
		return nil, err
	}
	sweepOrphans(bin)
	// Owned, so that a later Start stops this server should this process die
	// without Close (pg_ctl detaches the server, so nothing else would).
	dir, err := localproc.MkdirOwned(dirPrefix)
	if err != nil {
		return nil, err
	}
	s, err := start(dir, bin, o)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}

const dirPrefix = "orderly-testpg-"

// sweepOrphans stops and removes the servers of earlier test processes that died
// without Close (a test binary killed at its timeout, say): each would otherwise
// keep running, holding memory and a port, until the machine restarts.
func sweepOrphans(bin string) {
	for _, dir := range localproc.Orphans(dirPrefix) {
		if c, err := localpg.New(dir, 0, bin); err == nil && c.Initialized() {
			_ = c.Kill()
		}
		_ = os.RemoveAll(dir)
	}
}

func start(dir, bin string, o options) (*Server, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	if len(o.extensions) > 0 {
		if bin, err = relocate(dir, bin, o.extensions); err != nil {
			return nil, fmt.Errorf("copying PostgreSQL for the test's extensions: %w", err)
		}
	}
	c, err := localpg.New(dir, port, bin)
	if err != nil {
		return nil, err
	}
	// Throwaway data: durability is not needed, speed is.
	c.Settings = []string{"max_connections=400", "fsync=off", "synchronous_commit=off", "full_page_writes=off", "shared_buffers=64MB"}
	c.Settings = append(c.Settings, o.settings...)
	s := &Server{Host: "127.0.0.1", Port: port, Username: Admin, Password: "admin-" + strconv.Itoa(os.Getpid()), cluster: c}
	if o.tls {
		settings, ca, err := serveTLS(c)
		if err != nil {
			return nil, fmt.Errorf("making the test server's certificates: %w", err)
		}
		c.Settings = append(c.Settings, settings...)
		s.CACert = ca
	}
	if err := c.Init(s.Password); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	return s, nil
}

// StartAgain starts the server after Stop, on the same port with the same data.
func (s *Server) StartAgain() error { return s.cluster.Start() }

// Stop stops the server, so that it is unreachable, keeping its data.
func (s *Server) Stop() error { return s.cluster.Stop() }

// Close stops the server and removes its files.
func (s *Server) Close() {
	_ = s.cluster.Kill()
	_ = os.RemoveAll(s.cluster.Dir)
}

// LogFile is the server's log (what it logs depends on its settings, e.g.
// WithSettings("log_statement=all")).
func (s *Server) LogFile() string { return s.cluster.LogFile() }

// URL is a connection URL for database db as the admin.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", s.Username, s.Password, s.Host, s.Port, db)
}
