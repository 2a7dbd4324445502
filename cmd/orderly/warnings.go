package main

import (
	"context"
	"os"
	"regexp"

	"k8s.io/client-go/rest"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
)

// ownDeprecation matches the API server's warning that one of Orderly's own served
// versions is deprecated ("power.orderly.dev/v1alpha1 SleepSchedule is deprecated:
// use power.orderly.dev/v1beta1 ...").
var ownDeprecation = regexp.MustCompile(`^[a-z0-9.-]+\.orderly\.dev/v[0-9a-z]+ [A-Za-z]+ is deprecated`)

// withoutOwnDeprecations passes every warning of the API server to next except those
// about Orderly's own deprecated versions: the manager and the CLI read and write the
// stored version on purpose until a release moves the storage (docs/install.md), and
// a warning on each of their requests would bury every other one. Users' clients still
// get them.
type withoutOwnDeprecations struct {
	next rest.WarningHandlerWithContext
}

func (w withoutOwnDeprecations) HandleWarningHeaderWithContext(ctx context.Context, code int, agent, text string) {
	if ownDeprecation.MatchString(text) {
		return
	}
	w.next.HandleWarningHeaderWithContext(ctx, code, agent, text)
}

// cliWarnings prints warnings on standard error once each, as kubectl does.
func cliWarnings() rest.WarningHandlerWithContext {
	return withoutOwnDeprecations{warningWriter{rest.NewWarningWriter(os.Stderr, rest.WarningWriterOptions{Deduplicate: true})}}
}

// managerWarnings logs warnings through the manager's logger, once each.
func managerWarnings() rest.WarningHandlerWithContext {
	return withoutOwnDeprecations{crlog.NewKubeAPIWarningLogger(crlog.KubeAPIWarningLoggerOptions{Deduplicate: true})}
}

// warningWriter lends client-go's WarningHandler the context-taking method.
type warningWriter struct{ rest.WarningHandler }

func (w warningWriter) HandleWarningHeaderWithContext(_ context.Context, code int, agent, text string) {
	w.HandleWarningHeader(code, agent, text)
}
