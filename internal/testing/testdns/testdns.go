// Package testdns starts a throwaway authoritative DNS server for tests: the BIND
// stand-in (internal/standin/bind) on a free loopback port, in a temporary
// directory, serving test zones that accept RFC 2136 dynamic updates signed with a
// TSIG key of its own. When named is missing it is installed (as root, with apt-get)
// or the caller gets an error that says how; tests never skip for lack of it.
package testdns

import "orderly.dev/orderly/internal/standin/bind"

// The TSIG key's name and algorithm, and the variable that names another named.
const (
	KeyName      = bind.KeyName
	KeyAlgorithm = bind.KeyAlgorithm
	BinEnv       = bind.BinEnv
)

// Server is a running named.
type Server = bind.Server

// Start starts named serving zone and the others; Close stops it and removes its files.
func Start(zone string, others ...string) (*Server, error) { return bind.Start(zone, others...) }
