//go:build !unix

package devcluster

import "io"

// lockFile is a no-op where flock is not available; concurrent builds there only
// cost time, because every binary is renamed into place atomically.
func lockFile(string, io.Writer) (func(), error) {
	return func() {}, nil
}
