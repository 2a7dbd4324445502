package imagepolicy

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"

	orderlyadmission "orderly.dev/orderly/internal/admission"
	"orderly.dev/orderly/internal/controller/policy/imagescan"
)

// FuzzPins pins any images of an object of any pod kind to the digest a tag is known
// by, as requireDigest.rewrite does, and applies the patch as the API server would.
// Properties: the patch applies; every image the patch changes is its tag pinned
// (image@sha256:...), every other image is left as written, and nothing but images
// changes.
func FuzzPins(f *testing.F) {
	const digest = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	f.Add(uint8(0), "nginx:1.27", "busybox", "registry.example.com/app@"+digest)
	f.Add(uint8(7), "team/app:v1", "UPPER/Case::bad", "localhost:5000/x:y")
	f.Fuzz(func(t *testing.T, kind uint8, init, container, ephemeral string) {
		for _, s := range []string{init, container, ephemeral} {
			if !utf8.ValidString(s) {
				return // each image of a JSON object is valid UTF-8 on its own
			}
		}
		k := orderlyadmission.PodKinds[int(kind)%len(orderlyadmission.PodKinds)]
		list := func(image string) []any { return []any{map[string]any{"name": "c", "image": image}} }
		var spec any = map[string]any{"initContainers": list(init), "containers": list(container), "ephemeralContainers": list(ephemeral)}
		for i := len(k.Spec) - 1; i >= 0; i-- {
			spec = map[string]any{k.Spec[i]: spec}
		}
		obj := spec.(map[string]any)
		obj["kind"], obj["metadata"] = k.Kind, map[string]any{"name": "x", "labels": map[string]any{"a": "b"}}
		raw, _ := json.Marshal(obj)
		podSpec, err := orderlyadmission.PodSpecOf(k.Kind, raw)
		if err != nil {
			t.Fatal(err)
		}
		digestOf := func(repository, tag string) string {
			if strings.HasPrefix(tag, "x") {
				return "" // a tag not resolved yet
			}
			return digest
		}
		ops := Pins(k.Kind, podSpec, digestOf)
		body, _ := json.Marshal(ops)
		patch, err := jsonpatch.DecodePatch(body)
		if err != nil {
			t.Fatalf("the patch %s does not decode: %v", body, err)
		}
		patched, err := patch.Apply(raw)
		if err != nil {
			t.Fatalf("the patch %s does not apply to %s: %v", body, raw, err)
		}
		after, err := orderlyadmission.PodSpecOf(k.Kind, patched)
		if err != nil {
			t.Fatal(err)
		}
		before, now := orderlyadmission.ImagesOf(podSpec), orderlyadmission.ImagesOf(after)
		for i := range before {
			if now[i] == before[i] {
				continue
			}
			ref, err := imagescan.ParseRef(before[i])
			if err != nil || ref.Digest != "" || now[i] != before[i]+"@"+digest || digestOf(ref.Repository, ref.Tag) == "" {
				t.Fatalf("image %q became %q", before[i], now[i])
			}
		}
		// Nothing but images: the object with the new images put back is the old one.
		var a, b map[string]any
		_ = json.Unmarshal(raw, &a)
		_ = json.Unmarshal(patched, &b)
		back, _ := json.Marshal(b)
		for i := range before {
			back = []byte(strings.Replace(string(back), mustJSON(now[i]), mustJSON(before[i]), 1))
		}
		var c map[string]any
		_ = json.Unmarshal(back, &c)
		if mustJSON(c) != mustJSON(a) {
			t.Fatalf("the patch changed more than images:\n%s\n%s", raw, patched)
		}
	})
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}
