package versitygw

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/standin"
)

// Version is the versitygw release the stand-in runs. It keys the binary's cache
// directory, so changing it builds the new one once and keeps the old one apart.
const Version = "v1.8.0"

// Package is versitygw's main package.
const Package = "github.com/versity/versitygw/cmd/versitygw"

// BinaryEnv names a versitygw binary to use instead of building one.
const BinaryEnv = "ORDERLY_VERSITYGW"

// Path is where the built binary is kept: beside the local cluster's binaries.
func Path() string {
	return filepath.Join(devcluster.CacheDir(), "bin", "versitygw-"+Version, "versitygw")
}

// Binary returns the path of versitygw Version, building it the first time (progress
// on standard error): see Build.
func Binary(ctx context.Context) (string, error) {
	return Build(ctx, os.Stderr)
}

// Build returns the path of versitygw Version, building it from the Go module proxy
// into Orderly's cache the first time (about 3 minutes on 2 cores), with progress on
// out. A lock makes concurrent processes build it once.
func Build(ctx context.Context, out io.Writer) (string, error) {
	if p := os.Getenv(BinaryEnv); p != "" {
		return p, nil
	}
	title := fmt.Sprintf("building versitygw %s, the S3 stand-in (first time only: ~3 min on 2 cores)", Version)
	return standin.BuildOnce(Path(), out, title, func(tmp string) (string, error) {
		// versitygw's go.mod has no replace directives, so go install pkg@version works.
		err := standin.GoBuild(ctx, tmp, filepath.Join(devcluster.CacheDir(), "logs", "versitygw-"+Version+".log"),
			[]string{"GOBIN=" + tmp}, "install", "-ldflags", "-s -w", Package+"@"+Version)
		return filepath.Join(tmp, "versitygw"), err
	})
}
