package imagepolicy

import (
	"regexp"
	"strings"
	"testing"
	"unicode/utf8"

	admissionv1 "k8s.io/api/admissionregistration/v1"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/testing/testcel"
)

// apiRegistryPattern is the CRD's pattern for an allowedRegistries item.
var apiRegistryPattern = regexp.MustCompile(`^(\*\.)?[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*(:[0-9]{1,5})?(/[a-z0-9]+([._-]+[a-z0-9]+)*)*(/\*)?$`)

// registryAllows is what the documentation says a pattern allows, written with
// strings instead of a regular expression: the reference RegistryRegexp is held to.
func registryAllows(pattern, repo string) bool {
	host, path, _ := strings.Cut(pattern, "/")
	repoHost, repoPath, ok := strings.Cut(repo, "/")
	if !ok || repoPath == "" {
		return false
	}
	if sub, wild := strings.CutPrefix(host, "*."); wild {
		labels, found := strings.CutSuffix(repoHost, "."+sub)
		if !found || labels == "" {
			return false
		}
		for l := range strings.SplitSeq(labels, ".") {
			if !regexp.MustCompile(`^` + hostLabel + `$`).MatchString(l) {
				return false
			}
		}
	} else if repoHost != host {
		return false
	}
	switch {
	case path == "" || path == "*":
		return true
	case strings.HasSuffix(path, "/*"):
		prefix := strings.TrimSuffix(path, "*")
		return strings.HasPrefix(repoPath, prefix) && len(repoPath) > len(prefix)
	}
	return repoPath == path
}

// FuzzRegistryPatterns compiles any allowedRegistries pattern the CRD admits and
// matches any repository against it. Properties: the pattern compiles in Go and in
// the generated ValidatingAdmissionPolicy (the API server's CEL); the regular
// expression allows exactly what registryAllows, the documented rule, allows; and
// the same expression in CEL decides as it does in Go.
func FuzzRegistryPatterns(f *testing.F) {
	for _, s := range [][2]string{
		{"registry.example.com/*", "registry.example.com/app"}, {"registry.example.com/*", "registry.example.com/team/app"},
		{"registry.example.com", "registry.example.com/app"}, {"registry.example.com/*", "registry.example.com.evil.io/app"},
		{"registry.example.com/*", "evil.io/registry.example.com/app"}, {"registry.example.com/team/*", "registry.example.com/team/app"},
		{"registry.example.com/team/*", "registry.example.com/team2/app"}, {"registry.example.com/team/*", "registry.example.com/team"},
		{"registry.example.com/team/app", "registry.example.com/team/app"}, {"registry.example.com/team/app", "registry.example.com/team/app2"},
		{"*.corp.io/team/*", "eu.registry.corp.io/team/app"}, {"*.corp.io/team/*", "corp.io/team/app"},
		{"*.corp.io/team/*", "evilcorp.io/team/app"}, {"127.0.0.1:5000/*", "127.0.0.1:5000/app"},
		{"127.0.0.1:5000/*", "127.0.0.1:5001/app"}, {"docker.io/library/*", "docker.io/library/nginx"},
		{"r.io/a.b/*", "r.io/axb/c"}, {"*.corp.io", "a.b.corp.io/x"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, pattern, repo string) {
		r, err := CompileRegistries([]string{pattern})
		if !apiRegistryPattern.MatchString(pattern) || len(pattern) > 255 {
			if err != nil && !strings.Contains(err.Error(), "allowedRegistries") {
				t.Fatalf("the error %q does not name allowedRegistries", err)
			}
			return
		}
		if err != nil {
			t.Fatalf("the pattern %q, which the API server accepts, does not compile: %v", pattern, err)
		}
		if !utf8.ValidString(repo) {
			return
		}
		got := r.Allowed(repo)
		if want := registryAllows(pattern, repo); got != want {
			t.Fatalf("%q allows %q = %v, the documented rule says %v (regexp %s)", pattern, repo, got, want, RegistryRegexp(pattern))
		}
		var cel bool
		expr := "value.matches(" + celString(RegistryRegexp(pattern)) + ")"
		if err := testcel.Eval(expr, map[string]any{"value": repo}, &cel); err != nil {
			t.Fatalf("%s: %v", expr, err)
		}
		if cel != got {
			t.Fatalf("%q allows %q in Go = %v, in CEL = %v", pattern, repo, got, cel)
		}
	})
}

// FuzzCompileImagePolicy compiles any ImagePolicy the CRD admits (allowedRegistries
// patterns, requireDigest, a manager namespace). Properties: the
// ValidatingAdmissionPolicy and the webhooks' match conditions compile with the API
// server's CEL compilers, and the webhook is reached on the policy's own path.
func FuzzCompileImagePolicy(f *testing.F) {
	for _, s := range [][3]string{{"r.io/*", "", "orderly-system"}, {"registry.example.com/team/*", "*.corp.io", ""}, {"127.0.0.1:5000/*", "docker.io/library/nginx", "x"}} {
		f.Add(s[0], s[1], true, s[2])
	}
	f.Fuzz(func(t *testing.T, p1, p2 string, digest bool, managerNS string) {
		p := policy(func(s *policyv1alpha1.ImagePolicySpec) {
			for _, pat := range []string{p1, p2} {
				if pat != "" {
					s.AllowedRegistries = append(s.AllowedRegistries, pat)
				}
			}
			if digest {
				s.RequireDigest = &policyv1alpha1.RequireDigest{Enabled: true, Rewrite: true}
			}
		})
		for _, pat := range p.Spec.AllowedRegistries {
			if !apiRegistryPattern.MatchString(pat) || len(pat) > 255 {
				return
			}
		}
		if managerNS != "" && !regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`).MatchString(managerNS) {
			return
		}
		if _, err := Compile(p); err != nil {
			t.Fatalf("Compile: %v", err)
		}
		a := CompileAdmission(p, &admission.Endpoint{URL: "https://127.0.0.1:9443"}, managerNS)
		if a.VAP == nil {
			t.Fatal("no ValidatingAdmissionPolicy for allowedRegistries or requireDigest")
		}
		if err := testcel.ValidatingAdmissionPolicy(&a.VAP.Spec); err != nil {
			t.Fatalf("the ValidatingAdmissionPolicy of %v does not compile: %v", p.Spec.AllowedRegistries, err)
		}
		var conds []admissionv1.MatchCondition
		if a.Webhook != nil {
			conds = append(conds, a.Webhook.Webhooks[0].MatchConditions...)
		}
		if a.Mutating != nil {
			conds = append(conds, a.Mutating.Webhooks[0].MatchConditions...)
		}
		if err := testcel.MatchConditions(conds); err != nil {
			t.Fatalf("match conditions: %v", err)
		}
	})
}
