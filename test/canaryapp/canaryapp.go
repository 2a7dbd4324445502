// Package canaryapp is the test program behind the Canary tests: the canaryapp
// stand-in (internal/standin/canaryapp) under the name the tests use.
package canaryapp

import "orderly.dev/orderly/internal/standin/canaryapp"

// App is a running program; Behaviour is how one variant of one target answers.
type (
	App       = canaryapp.App
	Behaviour = canaryapp.Behaviour
)

// Start serves /metrics on a free loopback port and simulates requests until Close.
func Start() (*App, error) { return canaryapp.Start() }

// ErrorRatioQuery and LatencyQuery are PromQL over the program's series, with the
// Canary's placeholders.
var (
	ErrorRatioQuery = canaryapp.ErrorRatioQuery
	LatencyQuery    = canaryapp.LatencyQuery
)
