//go:build !unix

package devcluster

import (
	"errors"
	"runtime"
)

var errComponentsUnsupported = errors.New("stopping one component of a local cluster is only supported on unix systems, not " + runtime.GOOS)

func processRuns(int, string) (bool, error) { return false, errComponentsUnsupported }

func processGone(int) (bool, error) { return false, errComponentsUnsupported }

func killProcess(int) error { return errComponentsUnsupported }
