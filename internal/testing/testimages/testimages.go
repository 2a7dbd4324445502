// Package testimages builds real container images for tests and writes the OSV
// database files a scanner reads: the images stand-in (internal/standin/images) under
// the names the tests use.
package testimages

import "orderly.dev/orderly/internal/standin/images"

// The images' contents, platforms and the OSV records.
type (
	Pkg      = images.Pkg
	Contents = images.Contents
	Platform = images.Platform
	Vuln     = images.Vuln
)

// What builds, pushes and writes them.
var (
	Push          = images.Push
	PushIndex     = images.PushIndex
	PushArtifact  = images.PushArtifact
	ArtifactImage = images.ArtifactImage
	RPMDatabase   = images.RPMDatabase
	WriteOSV      = images.WriteOSV
	WriteEmptyOSV = images.WriteEmptyOSV
)
