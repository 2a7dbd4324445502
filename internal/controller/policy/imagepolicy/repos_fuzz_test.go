package imagepolicy

import (
	"testing"
	"unicode/utf8"

	"orderly.dev/orderly/internal/controller/policy/imagescan"
	"orderly.dev/orderly/internal/testing/testcel"
)

// FuzzImageRepos checks the generated policy's CEL normalization of images against
// ParseRef's, which the webhook, the scans and status use: for any image reference
// ParseRef accepts, the repository the ValidatingAdmissionPolicy matches
// allowedRegistries against is ParseRef's Repository. Where they differ, the native
// check and the rest of Orderly decide on different repositories.
func FuzzImageRepos(f *testing.F) {
	for _, image := range []string{
		"nginx", "nginx:1.27", "team/app:v1", "index.docker.io/library/nginx", "127.0.0.1:5000/app:v1",
		"registry.example.com/app@" + digestA, "registry.example.com/app:v1@" + digestA, "localhost/app", "localhost:5000/app:v1",
		// Docker Hub's official images named with the registry and without library/:
		// the native check matched docker.io/nginx, the rest of Orderly
		// docker.io/library/nginx.
		"docker.io/nginx", "index.docker.io/nginx", "docker.io/nginx:1.27@" + digestA, "registry.example.com:443/team/app:v2", "UPPER/Case::bad",
	} {
		f.Add(image)
	}
	f.Fuzz(func(t *testing.T, image string) {
		ref, err := imagescan.ParseRef(image)
		if err != nil || !utf8.ValidString(image) {
			return
		}
		var repos []string
		if err := testcel.Eval(reposExpr, map[string]any{"variables": map[string]any{"images": []string{image}}}, &repos); err != nil {
			t.Fatalf("the policy's repos of %q: %v", image, err)
		}
		if len(repos) != 1 || repos[0] != ref.Repository {
			t.Fatalf("image %q: the ValidatingAdmissionPolicy matches repository %q, ParseRef says %q", image, repos, ref.Repository)
		}
	})
}
