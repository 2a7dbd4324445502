//go:build !unix

package devcluster

import "io"

// lockFile is a no-op where flock is not available; concurrent builds there only
// cost time, because every binary is renamed into place atomically, but two clusters
// created at the same moment may pick the same ports.
func lockFile(string, string, io.Writer) (func(), error) {
	return func() {}, nil
}
