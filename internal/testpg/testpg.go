// Package testpg starts a throwaway PostgreSQL server for tests (internal/localpg in
// a temporary directory, listening on a free loopback port). When PostgreSQL is
// missing it is installed (as root) or the caller gets an error that says how to
// install it; tests never skip for lack of it.
package testpg

import (
	"fmt"
	"net"
	"os"
	"strconv"

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

	cluster *localpg.Cluster
}

// Start initialises and starts a new server. Call Close to stop it and remove its files.
func Start() (*Server, error) {
	bin, err := localpg.InstallBinDir()
	if err != nil {
		return nil, err
	}
	dir, err := os.MkdirTemp("", "orderly-testpg-")
	if err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := int32(l.Addr().(*net.TCPAddr).Port)
	_ = l.Close()
	c, err := localpg.New(dir, port, bin)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// Throwaway data: durability is not needed, speed is.
	c.Settings = []string{"max_connections=400", "fsync=off", "synchronous_commit=off", "full_page_writes=off", "shared_buffers=64MB"}
	s := &Server{Host: "127.0.0.1", Port: port, Username: Admin, Password: "admin-" + strconv.Itoa(os.Getpid()), cluster: c}
	if err := c.Init(s.Password); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	if err := c.Start(); err != nil {
		_ = os.RemoveAll(dir)
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

// URL is a connection URL for database db as the admin.
func (s *Server) URL(db string) string {
	return fmt.Sprintf("postgres://%s:%s@%s:%d/%s?sslmode=disable", s.Username, s.Password, s.Host, s.Port, db)
}
