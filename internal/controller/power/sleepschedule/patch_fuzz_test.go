package sleepschedule

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	jsonpatch "github.com/evanphx/json-patch/v5"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// FuzzParsePointer reads any string as a sleep field's JSON pointer. Properties: a
// refusal names the pointer; an accepted one is under /spec or names one annotation
// that is not Orderly's, has no empty segment,
// and its segments escaped again give back the pointer (~0 and ~1 round-trip).
func FuzzParsePointer(f *testing.F) {
	for _, p := range []string{"/spec/replicas", "/spec/a~1b/c~0d", "/spec/shards/0/replicas", "/metadata/labels/x",
		"/status/replicas", "/spec", "/spec//replicas", "/spec/a~2", "/spec/a~", "spec/replicas", "/spec/~01", "/spec/list/-",
		"/metadata/annotations/kubeflow-resource-stopped", "/metadata/annotations/power.orderly.dev~1sleep-state", "/metadata/annotations/a/b"} {
		f.Add(p)
	}
	f.Fuzz(func(t *testing.T, p string) {
		parts, err := parsePointer(p)
		if err != nil {
			if !strings.Contains(err.Error(), fmt.Sprintf("%q", p)) {
				t.Fatalf("parsePointer(%q): the error %q does not name the pointer", p, err)
			}
			return
		}
		key, annotation := annotationKey(p)
		switch {
		case annotation && (len(parts) != 3 || parts[2] != key || labels.IsOrderlyKey(key)):
			t.Fatalf("parsePointer(%q) = %q: not one annotation of anyone but Orderly", p, parts)
		case !annotation && (len(parts) < 2 || parts[0] != "spec"):
			t.Fatalf("parsePointer(%q) = %q: not under /spec", p, parts)
		}
		var b strings.Builder
		for _, s := range parts {
			if s == "" {
				t.Fatalf("parsePointer(%q) = %q: an empty segment", p, parts)
			}
			b.WriteString("/" + escapeSegment(s))
		}
		if b.String() != p {
			t.Fatalf("parsePointer(%q) = %q, which escapes back to %q", p, parts, b.String())
		}
	})
}

// FuzzSleepPatch puts an object (any JSON) to sleep with a patch of up to two fields
// and wakes it again, applying the bodies objectPatch builds as the API server would
// (RFC 6902 and RFC 7386, evanphx/json-patch, which the API server uses too).
// Properties: nothing outside spec changes but Orderly's labels, annotations and the
// resourceVersion; asleep, each field holds the value set; a JSON patch, woken, gives
// back the spec it found; and the sleep record written is one readRecord accepts.
func FuzzSleepPatch(f *testing.F) {
	obj := `{"spec":{"redis":{"replicas":3},"shards":[{"replicas":2}],"mode":"Running"}}`
	for _, s := range []struct {
		doc, p1, v1, p2, v2 string
		merge               bool
	}{
		{obj, "/spec/redis/replicas", "0", "/spec/shards/0/replicas", "0", false},
		{obj, "/spec/paused", "true", "/spec/mode", `"Stopped"`, false},
		{obj, "/spec/redis/replicas", "0", "/spec/paused", "true", true},
		{obj, "/spec/redis", `{"replicas":0}`, "/spec/mode", `null`, true},
		{`{"metadata":{"labels":{"a":"b"}},"spec":{"replicas":1}}`, "/spec/replicas", "0", "", "", false},
		{obj, "/spec/shards/-", `{"replicas":0}`, "", "", false},
		{obj, "/spec/shards/1", `{"replicas":0}`, "", "", false},
		{obj, "/spec/a~1b", `1`, "/spec/c~0d", `2`, false},
		{`{"metadata":{"annotations":{"stopped":"x"}},"spec":{}}`, "/metadata/annotations/stopped", `"true"`, "/metadata/annotations/a~1b", `"1"`, true},
		{obj, "/metadata/annotations/kubeflow-resource-stopped", `"true"`, "/spec/mode", `"Stopped"`, false},
	} {
		f.Add(s.doc, s.p1, s.v1, s.p2, s.v2, s.merge)
	}
	f.Fuzz(func(t *testing.T, doc, p1, v1, p2, v2 string, merge bool) {
		var content map[string]any
		if json.Unmarshal([]byte(doc), &content) != nil || content == nil {
			return
		}
		meta, _ := content["metadata"].(map[string]any)
		if meta == nil {
			meta = map[string]any{}
			content["metadata"] = meta
		}
		meta["resourceVersion"] = "1"
		patch := &powerv1alpha1.SleepPatch{Type: powerv1alpha1.JSONPatchType}
		if merge {
			patch.Type = powerv1alpha1.MergePatchType
		}
		for _, fv := range [][2]string{{p1, v1}, {p2, v2}} {
			// Strings from the API server are UTF-8 (JSON).
			if fv[0] == "" || !utf8.ValidString(fv[0]) || !json.Valid([]byte(fv[1])) {
				continue
			}
			// What the API server admits: a JSON pointer under /spec, unique paths,
			// and no list element in a merge patch.
			if _, err := parsePointer(fv[0]); err != nil || len(fv[0]) > 256 {
				continue
			}
			if merge && numericSegment(fv[0]) {
				continue
			}
			if _, ok := annotationKey(fv[0]); ok {
				if _, err := annotationValue(fv[0], json.RawMessage(fv[1])); err != nil {
					continue
				}
			}
			if len(patch.Fields) > 0 && patch.Fields[0].Path == fv[0] {
				continue
			}
			patch.Fields = append(patch.Fields, powerv1alpha1.SleepField{Path: fv[0], Value: apiextensionsv1.JSON{Raw: []byte(fv[1])}})
		}
		if len(patch.Fields) == 0 {
			return
		}

		fields, err := captureFields(content, patch)
		if err != nil {
			if !strings.Contains(err.Error(), "/spec/") && !strings.Contains(err.Error(), annotationsPointer) {
				t.Fatalf("captureFields: the error %q does not name the field", err)
			}
			return
		}
		record, _ := json.Marshal(sleepRecord{Fields: fields})
		if _, err := parseRecord(string(record), recordPatch); err != nil {
			t.Fatalf("the record Orderly writes, %s, is refused when read back: %v", record, err)
		}
		// As writePatched builds them: Orderly's label and record, the fields, and
		// the patch's annotations beside Orderly's.
		asleep := &objectPatch{typ: patch.Type, resourceVersion: "1", hasLabels: meta["labels"] != nil, hasAnnotations: meta["annotations"] != nil}
		p := newPatch(&unstructured.Unstructured{Object: content})
		p.markAsleep("s")
		p.setAnnotation(powerv1alpha1.SleepStateAnnotation, string(record))
		for _, fr := range fields {
			if err := asleep.set(p, fr.Path, fr.Slept, fr.Before != nil); err != nil {
				t.Fatalf("setting %s: %v", fr.Path, err)
			}
		}
		asleep.labels, asleep.annotations = p.labels, p.annotations
		slept, ok := applyObjectPatch(t, content, asleep)
		if !ok {
			return // the API server refuses it (an add below a missing parent): reported, nothing written
		}
		onlySpecAndOrderlysMetadata(t, content, slept, fields)
		if !overlapping(fields) {
			for _, fr := range fields {
				got, found, err := valueAt(slept, fr.Path)
				if err != nil || !found && string(fr.Slept) != "null" || found && !sameJSON(got, fr.Slept) && !merge {
					t.Fatalf("asleep, %s holds %s (found %v, %v), want %s", fr.Path, got, found, err, fr.Slept)
				}
			}
		}
		if fieldsChanged(slept, fields) && !merge && !overlapping(fields) {
			t.Fatalf("an object just put to sleep is taken for changed by someone else: %v", slept)
		}

		awake := &objectPatch{typ: patch.Type, resourceVersion: "1", hasLabels: true, hasAnnotations: true}
		p = newPatch(&unstructured.Unstructured{Object: slept})
		p.release()
		for _, fr := range fields {
			_, exists, err := valueAt(slept, fr.Path)
			if err != nil {
				t.Fatal(err)
			}
			if err := awake.set(p, fr.Path, fr.Before, exists); err != nil {
				t.Fatalf("restoring %s: %v", fr.Path, err)
			}
		}
		awake.labels, awake.annotations = p.labels, p.annotations
		woken, ok := applyObjectPatch(t, slept, awake)
		if !ok {
			t.Fatalf("the wake patch of %s is refused; asleep: %v", record, slept)
		}
		onlySpecAndOrderlysMetadata(t, slept, woken, fields)
		if !merge && !reflect.DeepEqual(woken["spec"], content["spec"]) {
			t.Fatalf("woken, spec is %v; before sleep it was %v (record %s)", woken["spec"], content["spec"], record)
		}
		for _, fr := range fields {
			if _, ok := annotationKey(fr.Path); !ok {
				continue
			}
			if got, found, _ := valueAt(woken, fr.Path); found != (fr.Before != nil) || found && !sameJSON(got, fr.Before) {
				t.Fatalf("woken, %s holds %s (found %v); before sleep it held %s", fr.Path, got, found, fr.Before)
			}
		}
	})
}

// numericSegment is the API's rule for merge patches: no segment of digits.
func numericSegment(p string) bool {
	for _, s := range strings.Split(p, "/") {
		if s != "" && strings.Trim(s, "0123456789") == "" {
			return true
		}
	}
	return false
}

// overlapping says whether one field is inside another: then the later write decides.
func overlapping(fields []fieldRecord) bool {
	for i := range fields {
		for j := range fields {
			if i != j && strings.HasPrefix(fields[j].Path, fields[i].Path+"/") {
				return true
			}
		}
	}
	return false
}

// applyObjectPatch applies p's body to doc as the API server would; false when it
// refuses it.
func applyObjectPatch(t *testing.T, doc map[string]any, p *objectPatch) (map[string]any, bool) {
	t.Helper()
	typ, body, err := p.build()
	if err != nil {
		t.Fatalf("building the %s: %v", p.typ, err)
	}
	orig, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	var out []byte
	if typ == "application/merge-patch+json" {
		out, err = jsonpatch.MergePatch(orig, body)
	} else {
		var jp jsonpatch.Patch
		if jp, err = jsonpatch.DecodePatch(body); err != nil {
			t.Fatalf("the JSON patch %s does not decode: %v", body, err)
		}
		out, err = jp.Apply(orig)
	}
	if err != nil {
		return nil, false
	}
	var m map[string]any
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	return m, true
}

// onlySpecAndOrderlysMetadata fails when after differs from before outside spec, but
// for Orderly's label and annotations and the annotations the fields name.
func onlySpecAndOrderlysMetadata(t *testing.T, before, after map[string]any, fields []fieldRecord) {
	patched := map[string]bool{powerv1alpha1.AsleepLabel: true, powerv1alpha1.SleepStateAnnotation: true}
	for _, fr := range fields {
		if key, ok := annotationKey(fr.Path); ok {
			patched[key] = true
		}
	}
	t.Helper()
	strip := func(doc map[string]any) map[string]any {
		out := map[string]any{}
		for k, v := range doc {
			if k == "spec" {
				continue
			}
			out[k] = v
		}
		meta, _ := doc["metadata"].(map[string]any)
		m := map[string]any{}
		for k, v := range meta {
			m[k] = v
		}
		for _, key := range []string{"labels", "annotations"} {
			kv, _ := m[key].(map[string]any)
			rest := map[string]any{}
			for k, v := range kv {
				if !patched[k] {
					rest[k] = v
				}
			}
			m[key] = rest
		}
		out["metadata"] = m
		return out
	}
	if b, a := strip(before), strip(after); !reflect.DeepEqual(b, a) {
		t.Fatalf("the patch changed more than spec and Orderly's metadata:\nbefore %v\nafter  %v", b, a)
	}
}

// FuzzParseRecord reads any annotation as the sleep record of each kind. Properties:
// a refusal is an error with a message; an accepted record passes its own check, and
// the restore it describes builds (every field path is one Orderly may write).
func FuzzParseRecord(f *testing.F) {
	for _, s := range []string{`{"replicas":3,"sleepReplicas":0}`, `{"replicas":0}`, `replicas=3`, `{"replicas":-1}`,
		`{"replicas":2,"sleepReplicas":-4}`, `{"suspend":true}`, `{"suspend":false}`, `{"minReplicas":2,"maxReplicas":10}`,
		`{"maxReplicas":10}`, `{"minReplicas":5,"maxReplicas":2}`, `{"minReplicas":1}`, `{"minReplicas":-1,"maxReplicas":3}`,
		`{"fields":[{"path":"/spec/replicas","before":3,"slept":0}]}`, `{"fields":[{"path":"/metadata/ownerReferences","before":[],"slept":0}]}`,
		`{"fields":[{"path":"/spec/a~9","slept":0}]}`, `{"pausedReplicas":"0"}`} {
		for _, kind := range []string{powerv1alpha1.KindDeployment, powerv1alpha1.KindStatefulSet, powerv1alpha1.KindCronJob, kindHPA, recordScale, recordPatch, recordKEDA} {
			f.Add(s, kind)
		}
	}
	f.Fuzz(func(t *testing.T, raw, kind string) {
		rec, err := parseRecord(raw, kind)
		if err != nil {
			if err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		if err := rec.check(kind); err != nil {
			t.Fatalf("an accepted record fails its check: %v", err)
		}
		if kind != recordPatch {
			return
		}
		for _, typ := range []powerv1alpha1.PatchType{powerv1alpha1.JSONPatchType, powerv1alpha1.MergePatchType} {
			p := &objectPatch{typ: typ, resourceVersion: "1"}
			for _, fr := range rec.Fields {
				p.fields = append(p.fields, fieldWrite{path: fr.Path, value: fr.Before, exists: true})
			}
			if _, body, err := p.build(); err != nil || !json.Valid(body) {
				t.Fatalf("the restore of an accepted record does not build: %v (%s)", err, body)
			}
		}
	})
}
