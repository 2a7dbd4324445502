package imagescan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

// The reasons an *Error carries; each becomes a condition reason.
const (
	// ReasonRegistryUnreachable: the registry did not answer, answered with a server
	// error, or the connection failed.
	ReasonRegistryUnreachable = "RegistryUnreachable"
	// ReasonAuthFailed: the registry refused the credentials (401/403).
	ReasonAuthFailed = "AuthFailed"
	// ReasonNotFound: the repository, tag or digest does not exist.
	ReasonNotFound = "NotFound"
	// ReasonUnsupportedMediaType: the reference names something that is not a container
	// image (an OCI artifact, a Helm chart, ...) or an index without a linux image for
	// this platform.
	ReasonUnsupportedMediaType = "UnsupportedMediaType"
	// ReasonTooLarge: the image's compressed layers (or their unpacked package files)
	// are bigger than the configured bound.
	ReasonTooLarge = "TooLarge"
	// ReasonDatabaseMissing: the OSV database is missing, unreadable, or lacks an
	// ecosystem the image's packages belong to.
	ReasonDatabaseMissing = "DatabaseMissing"
	// ReasonScanFailed: anything else that kept the scan from completing.
	ReasonScanFailed = "ScanFailed"
)

// Error is a failed resolve or scan, with a reason a controller puts in a condition.
// A scan that returns an *Error has found nothing: it never means "clean".
type Error struct {
	Reason string
	Err    error
}

func (e *Error) Error() string {
	if e.Err == nil {
		return e.Reason
	}
	return e.Reason + ": " + e.Err.Error()
}

func (e *Error) Unwrap() error { return e.Err }

// ReasonOf is the reason of err when it is (or wraps) an *Error, ScanFailed for any
// other error, and "" for nil.
func ReasonOf(err error) string {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Reason
	}
	return ReasonScanFailed
}

func newError(reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Err: fmt.Errorf(format, args...)}
}

// registryError classifies an error of go-containerregistry while talking to the
// registry about ref.
func registryError(ref string, err error) error {
	var e *Error
	if errors.As(err, &e) {
		return err
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return &Error{Reason: ReasonRegistryUnreachable, Err: fmt.Errorf("%s: the registry did not answer in time: %w", ref, err)}
	}
	var terr *transport.Error
	if errors.As(err, &terr) {
		switch {
		case terr.StatusCode == http.StatusUnauthorized || terr.StatusCode == http.StatusForbidden:
			return &Error{Reason: ReasonAuthFailed, Err: fmt.Errorf("%s: the registry refused the credentials (%d %s); check the pull secret's server, user and password: %w",
				ref, terr.StatusCode, http.StatusText(terr.StatusCode), err)}
		case terr.StatusCode == http.StatusNotFound:
			return &Error{Reason: ReasonNotFound, Err: fmt.Errorf("%s: the registry has no such repository, tag or digest: %w", ref, err)}
		case terr.StatusCode >= 500 || terr.StatusCode == http.StatusTooManyRequests:
			return &Error{Reason: ReasonRegistryUnreachable, Err: fmt.Errorf("%s: the registry failed (%d %s); it is retried later: %w",
				ref, terr.StatusCode, http.StatusText(terr.StatusCode), err)}
		}
		for _, d := range terr.Errors {
			switch d.Code {
			case transport.UnauthorizedErrorCode, transport.DeniedErrorCode:
				return &Error{Reason: ReasonAuthFailed, Err: fmt.Errorf("%s: the registry refused the credentials: %w", ref, err)}
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode:
				return &Error{Reason: ReasonNotFound, Err: fmt.Errorf("%s: %w", ref, err)}
			case transport.UnsupportedErrorCode:
				return &Error{Reason: ReasonUnsupportedMediaType, Err: fmt.Errorf("%s: %w", ref, err)}
			}
		}
		return &Error{Reason: ReasonRegistryUnreachable, Err: fmt.Errorf("%s: the registry answered %d: %w", ref, terr.StatusCode, err)}
	}
	var nerr net.Error
	var operr *net.OpError
	if errors.As(err, &nerr) || errors.As(err, &operr) {
		return &Error{Reason: ReasonRegistryUnreachable, Err: fmt.Errorf("%s: cannot reach the registry: %w", ref, err)}
	}
	return &Error{Reason: ReasonRegistryUnreachable, Err: fmt.Errorf("%s: %w", ref, err)}
}
