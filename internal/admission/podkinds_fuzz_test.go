package admission

import (
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"orderly.dev/orderly/internal/testing/testcel"
)

// podObject is an object of kind k whose pod spec has the containers given (init and
// ephemeral ones only when there are any).
func podObject(k PodKind, containers, initContainers, ephemeral []string) map[string]any {
	list := func(images []string) []any {
		out := make([]any, 0, len(images))
		for i, im := range images {
			out = append(out, map[string]any{"name": string(rune('a' + i)), "image": im})
		}
		return out
	}
	spec := map[string]any{"containers": list(containers)}
	if len(initContainers) > 0 {
		spec["initContainers"] = list(initContainers)
	}
	if len(ephemeral) > 0 {
		spec["ephemeralContainers"] = list(ephemeral)
	}
	var obj any = spec
	for i := len(k.Spec) - 1; i >= 0; i-- {
		obj = map[string]any{k.Spec[i]: obj}
	}
	out := obj.(map[string]any)
	out["kind"], out["metadata"] = k.Kind, map[string]any{"name": "x"}
	return out
}

// FuzzImagesTwin checks the two readers of a write's images against each other, for
// every kind with a pod spec and any images: the CEL of the generated admission
// policies (PodSpecCEL, ImagesCEL, evaluated by the API server's CEL) and the Go of
// the webhooks (PodSpecOf, ImagesOf) find the same images. Where they differ, the
// native policy and the webhook judge different images of one object.
func FuzzImagesTwin(f *testing.F) {
	f.Add(uint8(0), "nginx", "busybox:1.36", "", true, false)
	f.Add(uint8(7), "registry.example.com/app@sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "", "debug", false, true)
	f.Add(uint8(2), "a", "b", "c", true, true)
	f.Fuzz(func(t *testing.T, kind uint8, c1, c2, c3 string, withInit, withEphemeral bool) {
		// An object from the API server is JSON, so each image is valid UTF-8 on its
		// own (checking the concatenation lets "\xdf" through beside a "\x80").
		for _, s := range []string{c1, c2, c3} {
			if !utf8.ValidString(s) {
				return
			}
		}
		k := PodKinds[int(kind)%len(PodKinds)]
		containers, inits, eph := []string{c1}, []string(nil), []string(nil)
		if withInit {
			inits = []string{c2}
		} else {
			containers = append(containers, c2)
		}
		if withEphemeral {
			eph = []string{c3}
		}
		obj := podObject(k, containers, inits, eph)
		raw, err := json.Marshal(obj)
		if err != nil {
			t.Fatal(err)
		}
		spec, err := PodSpecOf(k.Kind, raw)
		if err != nil {
			t.Fatalf("PodSpecOf(%s): %v", k.Kind, err)
		}
		goImages := ImagesOf(spec)
		var celImages []string
		vars := map[string]any{"object": obj, "request": map[string]any{"kind": map[string]any{"kind": k.Kind}}}
		if err := testcel.Eval(ImagesCEL(PodSpecCEL("object")), vars, &celImages); err != nil {
			t.Fatalf("the policies' images of a %s: %v", k.Kind, err)
		}
		slices.Sort(goImages)
		slices.Sort(celImages)
		if !slices.Equal(goImages, celImages) {
			t.Fatalf("a %s's images: the policies' CEL finds %q, the webhooks %q", k.Kind, celImages, goImages)
		}
		if p, ok := SpecPointer(k.Kind); !ok || p == "" {
			t.Fatalf("no spec pointer for %s", k.Kind)
		}
	})
}
