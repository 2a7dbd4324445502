// Package testprom starts a throwaway Prometheus server for tests: the Prometheus
// stand-in (internal/standin/prom, Debian's prometheus package) on a free loopback
// port, with a generated configuration and its data in a temporary directory. When
// Prometheus is missing it is installed (as root, with apt-get) or the caller gets an
// error that says how to install it; tests never skip for lack of it.
package testprom

import "orderly.dev/orderly/internal/standin/prom"

// BinEnv names a prometheus binary to use instead of the one on PATH.
const BinEnv = prom.BinEnv

// Server is a running throwaway Prometheus; Options configure it.
type (
	Server  = prom.Server
	Options = prom.Options
)

// Start starts a throwaway Prometheus; Close stops it and removes its files.
func Start(o Options) (*Server, error) { return prom.Start(o) }

// Promtool finds promtool beside the prometheus binary, else on PATH.
func Promtool() (string, error) { return prom.Promtool() }
