package imagescan

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
)

var sha256Digest = regexp.MustCompile(`^sha256:[0-9a-f]{64}$`)

// FuzzParseRef parses any image reference, as a pod names it. Properties: a
// refusal names the image; an accepted one has a repository with a registry host,
// Docker Hub as docker.io, a tag or a sha256 digest; its Pullable form parses back to
// the same repository, tag and digest (parse, format, parse is stable); and the names
// of its ImageScans are valid object names.
func FuzzParseRef(f *testing.F) {
	const digest = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"
	for _, image := range []string{"nginx", "nginx:1.27", "team/app:v1", "index.docker.io/library/nginx", "127.0.0.1:5000/app:v1",
		"registry.example.com/app@" + digest, "registry.example.com/app:v1@" + digest, "UPPER/Case::bad", "docker.io/nginx",
		"localhost/app", "[::1]:5000/app:v1", "a/b/c/d/e:tag", "registry.example.com/app@sha512:" + strings.Repeat("b", 128)} {
		f.Add(image)
	}
	f.Fuzz(func(t *testing.T, image string) {
		r, err := ParseRef(image)
		if err != nil {
			if !strings.Contains(err.Error(), "image ") {
				t.Fatalf("the error %q does not name the image", err)
			}
			return
		}
		host, path, ok := strings.Cut(r.Repository, "/")
		if !ok || host == "" || path == "" || host == name.DefaultRegistry {
			t.Fatalf("ParseRef(%q).Repository = %q: no registry host and path, or Docker Hub not as docker.io", image, r.Repository)
		}
		if (r.Tag == "") == (r.Digest == "") && r.Digest == "" {
			t.Fatalf("ParseRef(%q) = %+v: neither tag nor digest", image, r)
		}
		if r.Digest != "" && !sha256Digest.MatchString(r.Digest) {
			t.Fatalf("ParseRef(%q).Digest = %q, not a sha256 digest", image, r.Digest)
		}
		again, err := ParseRef(r.Pullable())
		if err != nil {
			t.Fatalf("the pullable form %q of %q does not parse: %v", r.Pullable(), image, err)
		}
		want := r
		if r.Digest != "" {
			want.Tag = "" // Pullable names the digest alone
		}
		if again.Repository != want.Repository || again.Digest != want.Digest || (r.Digest == "" && again.Tag != want.Tag) {
			t.Fatalf("ParseRef(%q) = %+v, but its pullable form %q parses to %+v", image, r, r.Pullable(), again)
		}
		names := []string{PendingName(r.Repository, r.Tag)}
		if r.Digest != "" {
			names = append(names, ScanName(r.Repository, r.Digest))
		}
		for _, n := range names {
			if errs := validation.IsDNS1123Subdomain(n); len(errs) > 0 {
				t.Fatalf("ImageScan name %q of %q: %v", n, image, errs)
			}
		}
	})
}

// FuzzParsePullSecrets reads any pull-secrets annotation. Properties: at most
// MaxPullSecrets references, each with a namespace and a name and no repeats; and a
// list of valid names, written by FormatPullSecrets, reads back as written.
func FuzzParsePullSecrets(f *testing.F) {
	f.Add("team-a/one, bad,/x,y/,team-b/a,team-b/b,team-b/c,team-b/d", "team-a", "one")
	f.Add("team-b/x,team-a/one", "team-b", "x")
	f.Fuzz(func(t *testing.T, v, ns, secret string) {
		refs := ParsePullSecrets(v)
		if len(refs) > MaxPullSecrets {
			t.Fatalf("%d references, more than %d", len(refs), MaxPullSecrets)
		}
		for i, r := range refs {
			if r.Namespace == "" || r.Name == "" || slices.Contains(refs[:i], r) {
				t.Fatalf("ParsePullSecrets(%q) = %v: an empty or repeated reference", v, refs)
			}
		}
		if len(validation.IsDNS1123Label(ns)) > 0 || len(validation.IsDNS1123Subdomain(secret)) > 0 {
			return
		}
		written := PullSecretsFor(ns, []corev1.LocalObjectReference{{Name: secret}})
		if back := ParsePullSecrets(FormatPullSecrets(written)); !slices.Equal(back, written) {
			t.Fatalf("%v written as %q reads back as %v", written, FormatPullSecrets(written), back)
		}
	})
}

// FuzzParseDockerConfig reads any bytes as a pull Secret's docker config. Properties:
// a refusal is an error with a message; an accepted config resolves any registry
// without failing.
func FuzzParseDockerConfig(f *testing.F) {
	f.Add([]byte(`{"auths":{"https://registry.example.com":{"username":"u","password":"p"},"docker.io":{"auth":"dTpw"}}}`))
	f.Add([]byte(`{"registry.example.com":{"auth":"dTpw"}}`))
	f.Add([]byte(`{"auths":null}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		kc, err := ParseDockerConfig(data)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		for _, reg := range []string{"registry.example.com", "index.docker.io", "other.io"} {
			r, _ := name.NewRegistry(reg)
			a, err := kc.Resolve(r)
			if err != nil || a == nil {
				t.Fatalf("Resolve(%s) = %v, %v", reg, a, err)
			}
			if a != authn.Anonymous {
				if _, err := a.Authorization(); err != nil && err.Error() == "" {
					t.Fatal("an authorization error without a message")
				}
			}
		}
	})
}
