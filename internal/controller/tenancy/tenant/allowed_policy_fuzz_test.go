package tenant

import (
	"strings"
	"testing"
	"unicode/utf8"

	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/testing/testcel"
)

// imageNormalization is the expression of allowedPolicy that gives an image its
// registry (the one spec.allowed.registries are prefixes of), for image i.
func imageNormalization(t *testing.T) string {
	for _, v := range allowedPolicy().Spec.Variables {
		if v.Name == "badImages" {
			_, rest, ok := strings.Cut(v.Expression, "registries.exists(p, (")
			expr, _, ok2 := strings.Cut(rest, ").matches(")
			if !ok || !ok2 {
				t.Fatalf("no normalization in %s", v.Expression)
			}
			return expr
		}
	}
	t.Fatal("allowedPolicy has no badImages variable")
	return ""
}

// FuzzAllowedRegistriesNormalization checks the Tenant's allowed-registries policy
// against ParseRef, which ImagePolicy, the scans and status use: for any image
// ParseRef accepts, the name spec.allowed.registries are matched against starts with
// ParseRef's repository (Docker Hub as docker.io, library/ for official images), so
// that a prefix allows what it names, the way the rest of Orderly names it.
func FuzzAllowedRegistriesNormalization(f *testing.F) {
	for _, image := range []string{"nginx", "nginx:1.27", "team/app:v1", "ghcr.io/acme/app:v1", "127.0.0.1:5000/app",
		"localhost/app", "registry.example.com/app@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
		"docker.io/nginx", "index.docker.io/library/nginx", "index.docker.io/nginx"} {
		f.Add(image)
	}
	f.Fuzz(func(t *testing.T, image string) {
		ref, err := imagescan.ParseRef(image)
		if err != nil || !utf8.ValidString(image) {
			return
		}
		var name string
		if err := testcel.Eval(imageNormalization(t), map[string]any{"i": image}, &name); err != nil {
			t.Fatalf("normalizing %q: %v", image, err)
		}
		if !strings.HasPrefix(name, ref.Repository) {
			t.Fatalf("image %q: spec.allowed.registries are matched against %q, which does not start with its repository %q", image, name, ref.Repository)
		}
	})
}

// TestAllowedPolicyCompiles: the shared policy of spec.allowed compiles with the API
// server's CEL compilers.
func TestAllowedPolicyCompiles(t *testing.T) {
	if err := testcel.ValidatingAdmissionPolicy(&allowedPolicy().Spec); err != nil {
		t.Fatal(err)
	}
}
