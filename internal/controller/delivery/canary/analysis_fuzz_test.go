package canary

import (
	"strings"
	"testing"
	"time"
)

// FuzzRenderQuery fills in any metric query. Properties: it returns in bounded time;
// an error has a message; a query without placeholders is sent as written; a
// rendered query is within the bound.
func FuzzRenderQuery(f *testing.F) {
	for _, q := range []string{
		`rate(http_errors{app="{{ .Target }}",ns="{{.Namespace}}",variant="{{ .Variant }}"}[1m])`,
		`up{x="{{ .Nope }}"}`, `up{x="{{ .Target }"}`, `{{ call .Target }}`, `sum(rate(x[5m]))`,
		`{{range 100000000000}}{{end}}`, `{{printf "%0999999d" 0}}`, `{{ .Variant | printf "%q" }}`,
	} {
		f.Add(q, "web", "shop")
	}
	f.Fuzz(func(t *testing.T, query, target, ns string) {
		type result struct {
			out string
			err error
		}
		done := make(chan result, 1)
		go func() {
			out, err := renderQuery(query, queryVars{Target: target, Namespace: ns, Variant: "canary"})
			done <- result{out, err}
		}()
		var r result
		select {
		case r = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the query %q did not render within 30s", query)
		}
		if r.err != nil {
			if !strings.HasPrefix(r.err.Error(), "the query") {
				t.Fatalf("the error %q does not say it is about the query", r.err)
			}
			return
		}
		if !strings.Contains(query, "{{") && r.out != query {
			t.Fatalf("%q without placeholders rendered as %q", query, r.out)
		}
		if len(r.out) > maxQueryBytes {
			t.Fatalf("%q rendered %d bytes, more than %d", query, len(r.out), maxQueryBytes)
		}
	})
}
