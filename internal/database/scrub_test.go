package database

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// What the namespaces using a server read does not name the server's admin user, its
// password or its Secrets, whatever the driver said, and still unwraps to what
// happened.
func TestScrubKeepsTheServersCredentialsOut(t *testing.T) {
	s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "shared"}, Spec: datav1alpha1.DatabaseServerSpec{
		AdminCredentialsSecretRef: datav1alpha1.SecretReference{Namespace: "orderly-system", Name: "pg-admin-creds"}}}
	srv := Server{Name: "shared", Username: "platform_admin", Password: "hunter2-platform"}
	for _, tc := range []struct {
		err     error
		wantMsg string
	}{
		{fmt.Errorf("%w: reading Secret orderly-system/pg-admin-creds (adminCredentialsSecretRef): not found", ErrCredentials),
			"DatabaseServer shared cannot be used: its admin credentials are not available to Orderly"},
		{fmt.Errorf("%w: adminCredentialsSecretRef names namespace x; Secret pg-admin-creds", ErrCredentialsNotAllowed),
			"the DatabaseServer's status says why"},
		{fmt.Errorf("%w: looking up role: password authentication failed for user \"platform_admin\"", ErrUnreachable),
			`password authentication failed for user "<admin>"`},
		{errors.New("permission denied to create role; platform_admin lacks CREATEROLE"), "<admin> lacks CREATEROLE"},
		{errors.New("postgres://platform_admin:hunter2-platform@db/x: refused"), "postgres://<admin>:<password>@db/x"},
		{errors.New("Secret pg-admin-creds is old"), "Secret <admin Secret> is old"},
	} {
		got := Scrub(tc.err, s, srv)
		for _, secret := range []string{"platform_admin", "pg-admin-creds", "hunter2"} {
			if strings.Contains(got.Error(), secret) {
				t.Errorf("Scrub(%v) = %q shows %s", tc.err, got, secret)
			}
		}
		if !strings.Contains(got.Error(), tc.wantMsg) {
			t.Errorf("Scrub(%v) = %q, want it to say %q", tc.err, got, tc.wantMsg)
		}
		if !errors.Is(got, tc.err) {
			t.Errorf("Scrub(%v) lost what it wraps", tc.err)
		}
		if inner := errors.Unwrap(tc.err); inner != nil && !errors.Is(got, inner) {
			t.Errorf("Scrub(%v) lost its class", tc.err)
		}
	}
	if Scrub(nil, s, srv) != nil {
		t.Error("Scrub(nil) != nil")
	}
	// Without a server, a credentials error is only scrubbed, not rewritten.
	err := fmt.Errorf("%w: Secret x needs the key password", ErrCredentials)
	if got := ScrubberFor(srv).Error(err); got.Error() != err.Error() {
		t.Errorf("ScrubberFor(srv).Error = %q, want %q", got, err)
	}
}

func TestScrubberString(t *testing.T) {
	for _, tc := range []struct {
		name string
		sc   Scrubber
		in   string
		want string
	}{
		{"knows nothing", Scrubber{}, "admin s3cret", "admin s3cret"},
		{"a short name is left alone", ScrubberFor(Server{Username: "pg", Password: "x9"}), "pg: bad password x9", "pg: bad password <password>"},
		{"the longest first", Scrubber{}.With("adminadmin-pw", "<password>").WithName("admin", "<admin>"),
			"admin logged in with adminadmin-pw", "<admin> logged in with <password>"},
		{"every occurrence", Scrubber{}.With("tok3n", "<t>"), "tok3n tok3n", "<t> <t>"},
		{"empty secrets add nothing", Scrubber{}.With("", "<x>").WithName("", "<y>"), "a b", "a b"},
	} {
		if got := tc.sc.String(tc.in); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	// With does not change the Scrubber it is called on.
	base := Scrubber{}.With("one", "1")
	a, b := base.With("two", "2"), base.With("three", "3")
	if a.String("two three") != "2 three" || b.String("two three") != "two 3" {
		t.Errorf("Scrubbers made from one share their secrets: %q, %q", a.String("two three"), b.String("two three"))
	}
}

// timeoutError is a network error that timed out.
type timeoutError struct{}

func (timeoutError) Error() string   { return "i/o timeout talking to 10.0.0.1 as platform_admin" }
func (timeoutError) Timeout() bool   { return true }
func (timeoutError) Temporary() bool { return true }

func TestDescribe(t *testing.T) {
	sc := ScrubberFor(Server{Username: "platform_admin", Password: "hunter2"})
	driver := func(err error) string {
		if strings.Contains(err.Error(), "driver") {
			return "the driver's own words for platform_admin"
		}
		return ""
	}
	refused := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	for _, tc := range []struct {
		err  error
		want string
	}{
		{errors.New("a driver error"), "the driver's own words for <admin>"},
		{fmt.Errorf("querying: %w", context.DeadlineExceeded), "the server did not answer in time"},
		{timeoutError{}, "the server did not answer in time"},
		{fmt.Errorf("connecting as platform_admin: %w", refused), "dial tcp: connection refused"},
		{errors.New("something else about platform_admin and hunter2"), "something else about <admin> and <password>"},
	} {
		if got := sc.Describe(tc.err, driver); got != tc.want {
			t.Errorf("Describe(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

func TestSafeError(t *testing.T) {
	cause := errors.New("the driver's error, naming platform_admin")
	err := SafeError("what happened, safely", ErrUnreachable, nil, cause)
	if err.Error() != "what happened, safely" || !errors.Is(err, ErrUnreachable) || !errors.Is(err, cause) || !IsSafe(err) {
		t.Errorf("SafeError: %q, unwraps to class %v and cause %v, safe %v", err, errors.Is(err, ErrUnreachable), errors.Is(err, cause), IsSafe(err))
	}
	if IsSafe(cause) || IsSafe(fmt.Errorf("wrapped: %w", cause)) {
		t.Error("an error nobody made safe counts as safe")
	}
	if !IsSafe(fmt.Errorf("wrapped: %w", err)) {
		t.Error("a safe error wrapped is not seen")
	}
}
