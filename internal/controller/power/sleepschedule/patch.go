package sleepschedule

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/types"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// maxCapturedValue bounds what one field of a patched kind may hold to be recorded:
// the record lives in an annotation, and all of an object's annotations together may
// not exceed 256 KiB. A pointer at a big subtree is a mistake in the schedule, which
// is reported rather than copied into the object.
const maxCapturedValue = 4096

// fieldRecord is one field of a patched kind in a sleep record: what it held before
// sleep (nil when absent), and what Orderly set, by which a change made by someone
// else while asleep is recognised.
type fieldRecord struct {
	Path   string          `json:"path"`
	Before json.RawMessage `json:"before,omitempty"`
	Slept  json.RawMessage `json:"slept"`
}

// annotationsPointer is where the annotations a patch may name are.
const annotationsPointer = "/metadata/annotations/"

// parsePointer splits a JSON pointer (RFC 6901) into its unescaped segments. Only
// pointers under /spec and single annotations other than Orderly's own are accepted:
// they are the schedule's, or read from a sleep record that anyone who may edit the
// object can write, and Orderly's label and record, owner references or status must
// never be written through them.
func parsePointer(p string) ([]string, error) {
	if !strings.HasPrefix(p, "/spec/") && !strings.HasPrefix(p, annotationsPointer) {
		return nil, fmt.Errorf("%q is neither a JSON pointer under /spec nor an annotation (%s<key>)", p, annotationsPointer)
	}
	parts := strings.Split(p[1:], "/")
	for i, s := range parts {
		if s == "" {
			return nil, fmt.Errorf("%q has an empty segment", p)
		}
		for j := 0; j < len(s); j++ {
			if s[j] == '~' && (j+1 == len(s) || (s[j+1] != '0' && s[j+1] != '1')) {
				return nil, fmt.Errorf("%q has a ~ that is neither ~0 nor ~1", p)
			}
		}
		// In a JSON patch "-" is the end of a list: each sleep would append an
		// element that no wake removes (what it held before sleep is nothing).
		if s == "-" {
			return nil, fmt.Errorf("%q names the end of a list (-), which a wake cannot restore: name an existing element such as /spec/items/0", p)
		}
		parts[i] = unescapeSegment(s)
	}
	if parts[0] == "metadata" {
		if len(parts) != 3 {
			return nil, fmt.Errorf("%q names more than one annotation: write / in a key as ~1", p)
		}
		if labels.IsOrderlyKey(parts[2]) {
			return nil, fmt.Errorf("%q is Orderly's own annotation, which a patch cannot set", p)
		}
	}
	return parts, nil
}

// annotationKey is the annotation a field's path names, if it names one (the path
// was checked by parsePointer).
func annotationKey(path string) (string, bool) {
	if !strings.HasPrefix(path, annotationsPointer) {
		return "", false
	}
	return unescapeSegment(path[len(annotationsPointer):]), true
}

// annotationValue is the string a recorded or configured JSON value of an annotation
// holds.
func annotationValue(path string, raw json.RawMessage) (string, error) {
	var v *string // null decodes into a string as "" without an error
	if err := json.Unmarshal(raw, &v); err != nil || v == nil {
		return "", fmt.Errorf("the value of the annotation %s must be a string, not %s", path, raw)
	}
	return *v, nil
}

// checkPatches reports a field of targets.kinds that cannot be set and restored.
func checkPatches(spec *powerv1alpha1.SleepScheduleSpec) error {
	for i, k := range spec.Targets.Kinds {
		if k.Patch == nil {
			continue
		}
		for j, f := range k.Patch.Fields {
			if _, err := parsePointer(f.Path); err != nil {
				return fmt.Errorf("targets.kinds[%d].patch.fields[%d].path: %w", i, j, err)
			}
			if _, ok := annotationKey(f.Path); ok {
				if _, err := annotationValue(f.Path, f.Value.Raw); err != nil {
					return fmt.Errorf("targets.kinds[%d].patch.fields[%d].value: %w", i, j, err)
				}
			}
		}
	}
	return nil
}

// escapeSegment is one JSON pointer segment for the name s, and unescapeSegment the
// name a segment stands for.
func escapeSegment(s string) string {
	return strings.NewReplacer("~", "~0", "/", "~1").Replace(s)
}

func unescapeSegment(s string) string {
	return strings.NewReplacer("~1", "/", "~0", "~").Replace(s)
}

// valueAt returns the JSON value at the pointer p in the object content, and whether
// it is there.
func valueAt(content map[string]any, p string) (json.RawMessage, bool, error) {
	parts, err := parsePointer(p)
	if err != nil {
		return nil, false, err
	}
	var cur any = content
	for _, s := range parts {
		switch c := cur.(type) {
		case map[string]any:
			v, ok := c[s]
			if !ok {
				return nil, false, nil
			}
			cur = v
		case []any:
			i, err := strconv.Atoi(s)
			if err != nil || i < 0 || i >= len(c) {
				return nil, false, nil
			}
			cur = c[i]
		default:
			return nil, false, nil
		}
	}
	raw, err := json.Marshal(cur)
	return raw, true, err
}

// sameJSON reports whether a and b are the same JSON value (whatever the spacing, key
// order or number formatting); nil is an absent value, equal only to nil.
func sameJSON(a, b json.RawMessage) bool {
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	if bytes.Equal(a, b) {
		return true
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return reflect.DeepEqual(x, y)
}

// captureFields records, for each field of the patch, what the object holds now and
// what sleep sets.
func captureFields(content map[string]any, p *powerv1alpha1.SleepPatch) ([]fieldRecord, error) {
	out := make([]fieldRecord, 0, len(p.Fields))
	for _, f := range p.Fields {
		before, ok, err := valueAt(content, f.Path)
		if err != nil {
			return nil, err
		}
		if len(before) > maxCapturedValue {
			return nil, fmt.Errorf("%s holds %d bytes, more than the %d a sleep record keeps: point the patch at a smaller field", f.Path, len(before), maxCapturedValue)
		}
		if !ok {
			before = nil
		}
		slept := json.RawMessage(f.Value.Raw)
		if len(slept) == 0 {
			slept = json.RawMessage("null")
		}
		out = append(out, fieldRecord{Path: f.Path, Before: before, Slept: slept})
	}
	return out, nil
}

// fieldsChanged reports whether a field recorded at sleep no longer holds what Orderly
// set: someone else changed the object while asleep.
func fieldsChanged(content map[string]any, rec []fieldRecord) bool {
	for _, f := range rec {
		now, ok, err := valueAt(content, f.Path)
		if err != nil || !ok || !sameJSON(now, f.Slept) {
			return true
		}
	}
	return false
}

// checkFields reports a recorded field list that cannot be restored.
func checkFields(rec []fieldRecord) error {
	if len(rec) == 0 {
		return errors.New("the sleep record holds no fields")
	}
	for _, f := range rec {
		if _, err := parsePointer(f.Path); err != nil {
			return fmt.Errorf("the sleep record names a field that cannot be written: %w", err)
		}
		if len(f.Before) > maxCapturedValue {
			return fmt.Errorf("the recorded value of %s is larger than %d bytes", f.Path, maxCapturedValue)
		}
		if f.Before != nil && !json.Valid(f.Before) {
			return fmt.Errorf("the recorded value of %s is not JSON", f.Path)
		}
		if _, ok := annotationKey(f.Path); ok && f.Before != nil {
			if _, err := annotationValue(f.Path, f.Before); err != nil {
				return fmt.Errorf("the recorded value: %w", err)
			}
		}
	}
	return nil
}

// fieldWrite is one field an object patch sets (value) or removes (nil value).
type fieldWrite struct {
	path  string
	value json.RawMessage
	// exists is whether the object holds the field now: a JSON patch replaces an
	// existing field, adds a missing one, and removes only what is there.
	exists bool
}

// objectPatch is one write of a kind of targets.kinds: Orderly's label and
// annotations (nil removes one) and fields, checked against the resourceVersion the
// decision was made on (optimistic locking), in one request so that the record and
// the fields it describes never part.
type objectPatch struct {
	typ             powerv1alpha1.PatchType
	resourceVersion string
	// hasLabels, hasAnnotations: whether the object has the maps at all (a JSON
	// patch must create a missing map before adding a key to it).
	hasLabels, hasAnnotations bool
	labels, annotations       map[string]*string
	fields                    []fieldWrite
}

// set writes the field at path to value (nil removes it; exists says whether the
// object holds it now). An annotation goes with Orderly's own, through p.
func (op *objectPatch) set(p *workloadPatch, path string, value json.RawMessage, exists bool) error {
	key, ok := annotationKey(path)
	if !ok {
		op.fields = append(op.fields, fieldWrite{path: path, value: value, exists: exists})
		return nil
	}
	if value == nil {
		p.removeAnnotation(key)
		return nil
	}
	v, err := annotationValue(path, value)
	if err != nil {
		return err
	}
	p.setAnnotation(key, v)
	return nil
}

// build returns the patch's type and body.
func (p *objectPatch) build() (types.PatchType, []byte, error) {
	if p.typ == powerv1alpha1.MergePatchType {
		body, err := p.mergePatch()
		return types.MergePatchType, body, err
	}
	body, err := p.jsonPatch()
	return types.JSONPatchType, body, err
}

func (p *objectPatch) mergePatch() ([]byte, error) {
	meta := map[string]any{"resourceVersion": p.resourceVersion}
	if len(p.labels) > 0 {
		meta["labels"] = p.labels
	}
	if len(p.annotations) > 0 {
		meta["annotations"] = p.annotations
	}
	body := map[string]any{"metadata": meta}
	for _, f := range p.fields {
		parts, err := parsePointer(f.path)
		if err != nil {
			return nil, err
		}
		m := body
		for _, s := range parts[:len(parts)-1] {
			next, ok := m[s].(map[string]any)
			if !ok {
				next = map[string]any{}
				m[s] = next
			}
			m = next
		}
		var v any // nil: JSON null removes the field
		if f.value != nil {
			v = f.value
		}
		m[parts[len(parts)-1]] = v
	}
	return json.Marshal(body)
}

type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

func (p *objectPatch) jsonPatch() ([]byte, error) {
	// The resourceVersion the decision was made on, written into the patched object,
	// makes the API server refuse the patch with a conflict when the object changed
	// since, as in a merge patch. (A "test" op would fail as an invalid request, which
	// is not told apart from a record the API server refuses.)
	ops := []jsonPatchOp{{Op: "replace", Path: "/metadata/resourceVersion", Value: p.resourceVersion}}
	ops = append(ops, mapOps("/metadata/labels", p.hasLabels, p.labels)...)
	ops = append(ops, mapOps("/metadata/annotations", p.hasAnnotations, p.annotations)...)
	for _, f := range p.fields {
		if _, err := parsePointer(f.path); err != nil {
			return nil, err
		}
		switch {
		case f.value == nil && f.exists:
			ops = append(ops, jsonPatchOp{Op: "remove", Path: f.path})
		case f.value == nil:
		case f.exists:
			ops = append(ops, jsonPatchOp{Op: "replace", Path: f.path, Value: f.value})
		default:
			ops = append(ops, jsonPatchOp{Op: "add", Path: f.path, Value: f.value})
		}
	}
	return json.Marshal(ops)
}

// mapOps sets and removes keys of the labels or annotations at path. Removals name
// only keys the object has (objectPatch's callers see to it).
func mapOps(path string, exists bool, kv map[string]*string) []jsonPatchOp {
	var ops []jsonPatchOp
	set := map[string]string{}
	for _, k := range slices.Sorted(maps.Keys(kv)) {
		switch v := kv[k]; {
		case v == nil:
			ops = append(ops, jsonPatchOp{Op: "remove", Path: path + "/" + escapeSegment(k)})
		case exists:
			ops = append(ops, jsonPatchOp{Op: "add", Path: path + "/" + escapeSegment(k), Value: *v})
		default:
			set[k] = *v
		}
	}
	if len(set) > 0 {
		ops = append(ops, jsonPatchOp{Op: "add", Path: path, Value: set})
	}
	return ops
}
