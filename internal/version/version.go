// Package version holds the build's version, stamped at link time by the Makefile.
package version

// Version is the release this binary was built from; "dev" for local builds.
var Version = "dev"

// Commit is the git commit this binary was built from, when known.
var Commit = "unknown"
