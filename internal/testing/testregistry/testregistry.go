// Package testregistry starts a throwaway OCI registry for tests: the registry
// stand-in (internal/standin/registry, Debian's docker-registry) on a free loopback
// port, with its storage in a temporary directory. When it is missing it is
// installed (as root, with apt-get) or the caller gets an error that says how; tests
// never skip for lack of it.
package testregistry

import "orderly.dev/orderly/internal/standin/registry"

// BinEnv names a registry binary to use instead of docker-registry on PATH.
const BinEnv = registry.BinEnv

// Registry is a running throwaway registry.
type Registry = registry.Registry

// Start starts a registry without auth; Close stops it and removes its files.
func Start() (*Registry, error) { return registry.Start() }

// StartWithAuth starts a registry that serves only user with password.
func StartWithAuth(user, password string) (*Registry, error) {
	return registry.StartWithAuth(user, password)
}
