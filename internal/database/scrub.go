package database

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// This file is the one rule that keeps a database server's credentials out of what
// Orderly writes (status, Events, logs): every engine describes its errors through
// Describe, and every controller that talks to a DatabaseServer scrubs what it reports
// with a Scrubber.
//
// Canary's scrubURLError (internal/controller/delivery/canary) is not one of these:
// it knows no secret to replace, and cuts parts of a Prometheus URL (its query, which
// is long but no secret, and the user info, which Orderly never puts there) out of the
// HTTP client's errors.

// Placeholders stand where a Scrubber took something out.
const (
	AdminPlaceholder       = "<admin>"
	PasswordPlaceholder    = "<password>"
	AdminSecretPlaceholder = "<admin Secret>"
)

// minName is the length below which a name is not replaced: a name that short means
// nothing alone, and replacing it would only mangle the message.
const minName = 3

// Scrubber replaces the secrets it knows in messages. The zero Scrubber knows none.
type Scrubber struct {
	// pairs are secrets and their placeholders.
	pairs []string
	// server is the DatabaseServer whose users read the messages (OfServer).
	server string
}

// ScrubberFor is the Scrubber of the admin credentials of srv: its user name and
// its password.
func ScrubberFor(srv Server) Scrubber {
	return Scrubber{}.WithName(srv.Username, AdminPlaceholder).With(srv.Password, PasswordPlaceholder)
}

// With is sc that also replaces secret (when not empty) with placeholder.
func (sc Scrubber) With(secret, placeholder string) Scrubber {
	if secret == "" {
		return sc
	}
	sc.pairs = append(slices.Clip(sc.pairs), secret, placeholder)
	return sc
}

// WithName is With for a name, which is replaced when it has at least three
// characters.
func (sc Scrubber) WithName(name, placeholder string) Scrubber {
	if len(name) < minName {
		return sc
	}
	return sc.With(name, placeholder)
}

// OfServer is sc for messages about DatabaseServer s that the namespaces using it
// read: the name of its admin Secret is replaced too, and Error says of a problem with
// its credentials (ErrCredentials, ErrCredentialsNotAllowed, which name the Secrets)
// only that the server cannot be used and that its status says why: the Secrets and
// the server's status belong to the platform team.
func (sc Scrubber) OfServer(s *datav1alpha1.DatabaseServer) Scrubber {
	sc.server = s.Name
	return sc.WithName(s.Spec.AdminCredentialsSecretRef.Name, AdminSecretPlaceholder)
}

// Scrub is err as the namespaces that use DatabaseServer s may read it, srv being
// s's admin credentials as ServerFor read them (empty when it failed):
// ScrubberFor(srv).OfServer(s).Error(err).
func Scrub(err error, s *datav1alpha1.DatabaseServer, srv Server) error {
	return ScrubberFor(srv).OfServer(s).Error(err)
}

// String is msg with every secret sc knows replaced, the longest first (so that a
// name inside a password does not leave the rest of the password behind).
func (sc Scrubber) String(msg string) string {
	if len(sc.pairs) == 0 {
		return msg
	}
	type pair struct{ secret, placeholder string }
	pairs := make([]pair, 0, len(sc.pairs)/2)
	for i := 0; i+1 < len(sc.pairs); i += 2 {
		pairs = append(pairs, pair{sc.pairs[i], sc.pairs[i+1]})
	}
	slices.SortStableFunc(pairs, func(a, b pair) int { return cmp.Compare(len(b.secret), len(a.secret)) })
	args := make([]string, 0, len(sc.pairs))
	for _, p := range pairs {
		args = append(args, p.secret, p.placeholder)
	}
	return strings.NewReplacer(args...).Replace(msg)
}

// Error is err with its message scrubbed (nil for nil). errors.Is and errors.As
// still see err and what it wraps. With OfServer, a credentials problem becomes a
// pointer to the server's status.
func (sc Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	if sc.server != "" && (errors.Is(err, ErrCredentialsNotAllowed) || errors.Is(err, ErrCredentials)) {
		return SafeError(fmt.Sprintf("DatabaseServer %s cannot be used: its admin credentials are not available to Orderly (the DatabaseServer's status says why; its administrators can fix it)", sc.server), err)
	}
	return SafeError(sc.String(err.Error()), err)
}

// Describe says what went wrong in err without anything that could carry a
// credential, and scrubs it: the engine's driver describes the errors it knows (a
// refused login by its code alone, since its message names the user; a server's error
// by its message and code) and returns "" for others; a deadline, or a network error,
// is said the same way for every engine; anything else by its own message.
func (sc Scrubber) Describe(err error, driver func(error) string) string {
	if msg := driver(err); msg != "" {
		return sc.String(msg)
	}
	if errors.Is(err, context.DeadlineExceeded) || IsTimeout(err) {
		return "the server did not answer in time"
	}
	var netErr net.Error
	if errors.As(err, &netErr) {
		return sc.String(netErr.Error())
	}
	return sc.String(err.Error())
}

// IsTimeout says whether err is a network operation that timed out.
func IsTimeout(err error) bool {
	var netErr net.Error
	return errors.As(err, &netErr) && netErr.Timeout()
}

// safeError is an error whose message is fit to show (a Scrubber's, or an engine's
// own words about what went wrong), and that still unwraps to what it was made from,
// so that callers can react to the class (ErrUnreachable, ErrTimeout, ...) and the
// driver's error.
type safeError struct {
	msg     string
	wrapped []error
}

func (e *safeError) Error() string   { return e.msg }
func (e *safeError) Unwrap() []error { return e.wrapped }

// SafeError is an error with the message msg, which the caller made fit to show,
// that unwraps to each of wrapped (nil ones left out).
func SafeError(msg string, wrapped ...error) error {
	return &safeError{msg: msg, wrapped: slices.DeleteFunc(slices.Clone(wrapped), func(e error) bool { return e == nil })}
}

// IsSafe says whether err (or what it wraps) was made by SafeError: its message was
// said with care already, and is not to be described again.
func IsSafe(err error) bool {
	var s *safeError
	return errors.As(err, &s)
}
