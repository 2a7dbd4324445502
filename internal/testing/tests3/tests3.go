// Package tests3 starts a throwaway S3-compatible object store for tests: the
// versitygw stand-in (internal/standin/versitygw) on a free loopback port, with its
// posix backend in a temporary directory. WithTLS serves https with a CA of the
// test's own.
package tests3

import (
	"context"
	"os"

	"orderly.dev/orderly/internal/standin/versitygw"
)

// Region is the region the store says it is in.
const Region = versitygw.Region

// Server is a running versitygw.
type Server = versitygw.Server

// options are what Start was asked for.
type options struct {
	tls bool
}

// Option changes the server Start starts.
type Option func(*options)

// WithTLS serves https only, with a certificate for 127.0.0.1 and localhost signed
// by a CA made for this server (Server.CACert).
func WithTLS() Option { return func(o *options) { o.tls = true } }

// Start builds versitygw if needed and starts it. Call Close to stop it and remove
// its files.
func Start(ctx context.Context, opts ...Option) (*Server, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	if !o.tls {
		return versitygw.Start(ctx)
	}
	dir, err := os.MkdirTemp("", "orderly-tests3-tls-")
	if err != nil {
		return nil, err
	}
	cert, key, ca, err := serverCert(dir)
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	// The certificate stays beside the data, and goes with it on Close.
	s, err := versitygw.Run(ctx, versitygw.Options{Dir: dir, Temporary: true, CertFile: cert, KeyFile: key, CACert: ca})
	if err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return s, nil
}
