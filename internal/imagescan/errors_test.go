package imagescan

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
)

func TestReasons(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want string
	}{
		{"401", &transport.Error{StatusCode: 401}, ReasonAuthFailed},
		{"403", fmt.Errorf("wrapped: %w", &transport.Error{StatusCode: 403}), ReasonAuthFailed},
		{"DENIED code", &transport.Error{StatusCode: 400, Errors: []transport.Diagnostic{{Code: transport.DeniedErrorCode}}}, ReasonAuthFailed},
		{"404", &transport.Error{StatusCode: 404, Errors: []transport.Diagnostic{{Code: transport.ManifestUnknownErrorCode}}}, ReasonNotFound},
		{"NAME_UNKNOWN", &transport.Error{StatusCode: 400, Errors: []transport.Diagnostic{{Code: transport.NameUnknownErrorCode}}}, ReasonNotFound},
		{"UNSUPPORTED", &transport.Error{StatusCode: 415, Errors: []transport.Diagnostic{{Code: transport.UnsupportedErrorCode}}}, ReasonUnsupportedMediaType},
		{"503", &transport.Error{StatusCode: 503}, ReasonRegistryUnreachable},
		{"429", &transport.Error{StatusCode: 429}, ReasonRegistryUnreachable},
		{"connection refused", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}, ReasonRegistryUnreachable},
		{"deadline", fmt.Errorf("get: %w", context.DeadlineExceeded), ReasonRegistryUnreachable},
		{"already classified", newError(ReasonTooLarge, "big"), ReasonTooLarge},
	}
	for _, tt := range tests {
		err := registryError("127.0.0.1:5000/app:1", tt.err)
		if got := ReasonOf(err); got != tt.want {
			t.Errorf("%s: reason %s, want %s (%v)", tt.name, got, tt.want, err)
		}
		if !strings.HasPrefix(err.Error(), tt.want+": ") {
			t.Errorf("%s: message %q does not start with its reason", tt.name, err)
		}
	}
	if !strings.Contains(registryError("r", &transport.Error{StatusCode: 401}).Error(), "pull secret") {
		t.Error("the AuthFailed message does not say what to check")
	}
	if ReasonOf(nil) != "" || ReasonOf(errors.New("x")) != ReasonScanFailed || ReasonOf(fmt.Errorf("w: %w", newError(ReasonNotFound, "n"))) != ReasonNotFound {
		t.Error("ReasonOf: wrong reason for nil, a plain error or a wrapped *Error")
	}
}
