package imagepolicy

import (
	"fmt"
	"regexp"
	"strings"
)

// hostLabel is one DNS label of a registry host.
const hostLabel = `[a-z0-9]([a-z0-9-]*[a-z0-9])?`

// RegistryRegexp turns an allowedRegistries pattern into an anchored regular
// expression over a normalized repository (ParseRef's Repository: registry host,
// optional port, path; Docker Hub as docker.io):
//
//	registry.example.com          any repository of that registry
//	registry.example.com/*        the same
//	registry.example.com/team/*   any repository below team/
//	registry.example.com/team/app that repository only
//	*.corp.io/team/*              the same, on any subdomain of corp.io
//
// The same expression runs in Go (status, webhook) and in the generated
// ValidatingAdmissionPolicy (RE2 in both).
func RegistryRegexp(pattern string) string {
	host, path, _ := strings.Cut(pattern, "/")
	var b strings.Builder
	b.WriteString("^")
	if rest, ok := strings.CutPrefix(host, "*."); ok {
		b.WriteString(hostLabel + `(\.` + hostLabel + `)*\.`)
		host = rest
	}
	b.WriteString(regexp.QuoteMeta(host))
	switch {
	case path == "" || path == "*":
		b.WriteString("/.+")
	case strings.HasSuffix(path, "/*"):
		b.WriteString("/" + regexp.QuoteMeta(strings.TrimSuffix(path, "/*")) + "/.+")
	default:
		b.WriteString("/" + regexp.QuoteMeta(path))
	}
	b.WriteString("$")
	return b.String()
}

// Registries matches repositories against allowedRegistries.
type Registries struct {
	patterns []string
	res      []*regexp.Regexp
}

// CompileRegistries compiles the patterns; an empty list allows every registry.
func CompileRegistries(patterns []string) (*Registries, error) {
	r := &Registries{patterns: patterns}
	for _, p := range patterns {
		re, err := regexp.Compile(RegistryRegexp(p))
		if err != nil {
			return nil, fmt.Errorf("allowedRegistries pattern %q: %w", p, err)
		}
		r.res = append(r.res, re)
	}
	return r, nil
}

// Allowed says whether repository matches one of the patterns.
func (r *Registries) Allowed(repository string) bool {
	if r == nil || len(r.res) == 0 {
		return true
	}
	for _, re := range r.res {
		if re.MatchString(repository) {
			return true
		}
	}
	return false
}

// Describe lists the patterns for messages.
func (r *Registries) Describe() string { return strings.Join(r.patterns, ", ") }
