package sleepschedule

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"

	"orderly.dev/orderly/internal/kit"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/types"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func TestParsePointer(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{"/spec/replicas", []string{"spec", "replicas"}, false},
		{"/spec/a~1b/c~0d", []string{"spec", "a/b", "c~d"}, false},
		{"/spec/shards/0/replicas", []string{"spec", "shards", "0", "replicas"}, false},
		{"/metadata/labels/x", nil, true}, // never outside spec: Orderly's own record lives there
		{"/status/replicas", nil, true},
		{"/spec", nil, true},
		{"/spec//replicas", nil, true},
		{"/spec/a~2", nil, true},
		{"/spec/a~", nil, true},
		{"spec/replicas", nil, true},
		// The end of a list: each sleep appended an element no wake removed (found
		// by FuzzSleepPatch).
		{"/spec/shards/-", nil, true},
		{"/spec/shards/-/replicas", nil, true},
		{"/spec/a-b/-c", []string{"spec", "a-b", "-c"}, false},
		// One annotation, of anyone but Orderly (its record and label live there).
		{"/metadata/annotations/kubeflow-resource-stopped", []string{"metadata", "annotations", "kubeflow-resource-stopped"}, false},
		{"/metadata/annotations/autoscaling.keda.sh~1paused", []string{"metadata", "annotations", "autoscaling.keda.sh/paused"}, false},
		{"/metadata/annotations/power.orderly.dev~1sleep-state", nil, true},
		{"/metadata/annotations/orderly.dev~1x", nil, true},
		{"/metadata/annotations/a/b", nil, true},
		{"/metadata/annotations", nil, true},
		{"/metadata/annotations/", nil, true},
		{"/metadata/ownerReferences/0", nil, true},
	}
	for _, tt := range tests {
		got, err := parsePointer(tt.in)
		if (err != nil) != tt.wantErr {
			t.Errorf("parsePointer(%q) error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !equalStrings(got, tt.want) {
			t.Errorf("parsePointer(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func equalStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func object(t *testing.T, s string) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	return m
}

func field(path, value string) powerv1alpha1.SleepField {
	return powerv1alpha1.SleepField{Path: path, Value: apiextensionsv1.JSON{Raw: []byte(value)}}
}

// The values a wake restores are captured from the object, including absent fields
// and list elements, and a change by someone else while asleep is recognised.
func TestCaptureFieldsAndChanges(t *testing.T) {
	obj := object(t, `{"spec":{"redis":{"replicas":3},"shards":[{"replicas":2}],"mode":"Running"}}`)
	p := &powerv1alpha1.SleepPatch{Fields: []powerv1alpha1.SleepField{
		field("/spec/redis/replicas", "0"),
		field("/spec/shards/0/replicas", "0"),
		field("/spec/paused", "true"),
	}}
	rec, err := captureFields(obj, p)
	if err != nil {
		t.Fatal(err)
	}
	want := []fieldRecord{
		{Path: "/spec/redis/replicas", Before: json.RawMessage("3"), Slept: json.RawMessage("0")},
		{Path: "/spec/shards/0/replicas", Before: json.RawMessage("2"), Slept: json.RawMessage("0")},
		{Path: "/spec/paused", Before: nil, Slept: json.RawMessage("true")},
	}
	for i := range want {
		if rec[i].Path != want[i].Path || !sameJSON(rec[i].Before, want[i].Before) || !sameJSON(rec[i].Slept, want[i].Slept) {
			t.Errorf("field %d = %s %s %s, want %s %s %s", i, rec[i].Path, rec[i].Before, rec[i].Slept, want[i].Path, want[i].Before, want[i].Slept)
		}
	}
	if err := checkFields(rec); err != nil {
		t.Errorf("checkFields of a captured record: %v", err)
	}

	asleep := object(t, `{"spec":{"redis":{"replicas":0},"shards":[{"replicas":0.0}],"mode":"Running","paused":true}}`)
	if fieldsChanged(asleep, rec) {
		t.Error("an object as Orderly put it to sleep is taken for changed")
	}
	for _, changed := range []string{
		`{"spec":{"redis":{"replicas":1},"shards":[{"replicas":0}],"paused":true}}`,
		`{"spec":{"redis":{"replicas":0},"shards":[{"replicas":0}]}}`,
		`{"spec":{"redis":{"replicas":0},"shards":[],"paused":true}}`,
	} {
		if !fieldsChanged(object(t, changed), rec) {
			t.Errorf("a change while asleep is not seen: %s", changed)
		}
	}

	big := object(t, `{"spec":{"big":"`+strings.Repeat("x", maxCapturedValue)+`"}}`)
	if _, err := captureFields(big, &powerv1alpha1.SleepPatch{Fields: []powerv1alpha1.SleepField{field("/spec/big", `""`)}}); err == nil {
		t.Error("a value larger than a record keeps was captured")
	}
}

func TestCheckFieldsRefusesWhatCannotBeRestored(t *testing.T) {
	for name, rec := range map[string][]fieldRecord{
		"none":                    nil,
		"outside spec":            {{Path: "/metadata/ownerReferences", Before: json.RawMessage("[]"), Slept: json.RawMessage("0")}},
		"bad pointer":             {{Path: "/spec/a~9", Slept: json.RawMessage("0")}},
		"not JSON":                {{Path: "/spec/replicas", Before: json.RawMessage("{"), Slept: json.RawMessage("0")}},
		"too large to set":        {{Path: "/spec/replicas", Before: json.RawMessage(`"` + strings.Repeat("x", maxCapturedValue) + `"`), Slept: json.RawMessage("0")}},
		"Orderly's record":        {{Path: "/metadata/annotations/power.orderly.dev~1sleep-state", Before: json.RawMessage(`"x"`), Slept: json.RawMessage(`"y"`)}},
		"annotation not a string": {{Path: "/metadata/annotations/a", Before: json.RawMessage(`3`), Slept: json.RawMessage(`"y"`)}},
	} {
		if err := checkFields(rec); err == nil {
			t.Errorf("%s: checkFields accepted %v", name, rec)
		}
	}
}

func TestObjectPatchBodies(t *testing.T) {
	v := "sched"
	p := &objectPatch{
		resourceVersion: "42",
		hasLabels:       false,
		hasAnnotations:  true,
		labels:          map[string]*string{powerv1alpha1.AsleepLabel: &v},
		annotations:     map[string]*string{powerv1alpha1.SleepStateAnnotation: &v, powerv1alpha1.LeftAloneAnnotation: nil},
		fields: []fieldWrite{
			{path: "/spec/redis/replicas", value: json.RawMessage("0"), exists: true},
			{path: "/spec/paused", value: json.RawMessage("true")},
			{path: "/spec/gone", value: nil, exists: true},
			{path: "/spec/never", value: nil, exists: false},
		},
	}
	p.typ = powerv1alpha1.JSONPatchType
	typ, body, err := p.build()
	if err != nil {
		t.Fatal(err)
	}
	wantJSON := `[{"op":"replace","path":"/metadata/resourceVersion","value":"42"},` +
		`{"op":"add","path":"/metadata/labels","value":{"power.orderly.dev/asleep":"sched"}},` +
		`{"op":"remove","path":"/metadata/annotations/power.orderly.dev~1left-alone"},` +
		`{"op":"add","path":"/metadata/annotations/power.orderly.dev~1sleep-state","value":"sched"},` +
		`{"op":"replace","path":"/spec/redis/replicas","value":0},` +
		`{"op":"add","path":"/spec/paused","value":true},` +
		`{"op":"remove","path":"/spec/gone"}]`
	if typ != types.JSONPatchType || string(body) != wantJSON {
		t.Errorf("JSON patch = %s %s\nwant %s", typ, body, wantJSON)
	}

	p.typ = powerv1alpha1.MergePatchType
	p.fields = p.fields[:3]
	typ, body, err = p.build()
	if err != nil {
		t.Fatal(err)
	}
	wantMerge := `{"metadata":{"annotations":{"power.orderly.dev/left-alone":null,"power.orderly.dev/sleep-state":"sched"},"labels":{"power.orderly.dev/asleep":"sched"},"resourceVersion":"42"},` +
		`"spec":{"gone":null,"paused":true,"redis":{"replicas":0}}}`
	if typ != types.MergePatchType || string(body) != wantMerge {
		t.Errorf("merge patch = %s %s\nwant %s", typ, body, wantMerge)
	}
}

// A schedule whose patch cannot be restored is refused before anything sleeps.
func TestCheckPatches(t *testing.T) {
	spec := &powerv1alpha1.SleepScheduleSpec{Targets: powerv1alpha1.SleepTargets{Kinds: []powerv1alpha1.SleepKind{
		{Group: "keda.sh", Kind: "ScaledObject"},
		{Group: "example.com", Kind: "Queue", Patch: &powerv1alpha1.SleepPatch{Fields: []powerv1alpha1.SleepField{field("/spec/replicas", "0"), field("/spec/workers/-", "{}")}}},
	}}}
	err := checkPatches(spec)
	if err == nil || !strings.Contains(err.Error(), "targets.kinds[1].patch.fields[1].path") || !strings.Contains(err.Error(), "end of a list") {
		t.Fatalf("checkPatches = %v, want the end of a list refused, naming the field", err)
	}
	spec.Targets.Kinds[1].Patch.Fields = spec.Targets.Kinds[1].Patch.Fields[:1]
	if err := checkPatches(spec); err != nil {
		t.Fatalf("checkPatches of a good patch: %v", err)
	}
	spec.Targets.Kinds[1].Patch.Fields = append(spec.Targets.Kinds[1].Patch.Fields, field("/metadata/annotations/stopped", "true"))
	if err := checkPatches(spec); err == nil || !strings.Contains(err.Error(), "fields[1].value") || !strings.Contains(err.Error(), "must be a string") {
		t.Fatalf("checkPatches = %v, want an annotation's value that is not a string refused", err)
	}
	spec.Targets.Kinds[1].Patch.Fields[1] = field("/metadata/annotations/stopped", `"true"`)
	if err := checkPatches(spec); err != nil {
		t.Fatalf("checkPatches of an annotation: %v", err)
	}
}

// An annotation of a patch is written beside Orderly's own, in both patch types:
// set while asleep, then put back or removed.
func TestAnnotationFieldsGoWithOrderlysOwn(t *testing.T) {
	from := &unstructured.Unstructured{Object: map[string]any{"metadata": map[string]any{
		"annotations": map[string]any{"stopped": "by-hand"}}}}
	for _, tt := range []struct {
		name   string
		value  json.RawMessage
		exists bool
		want   map[string]*string
	}{
		{"set", json.RawMessage(`"2026-12-07T00:00:00Z"`), false, map[string]*string{"stopped": ptr.To("2026-12-07T00:00:00Z")}},
		{"put back", json.RawMessage(`"by-hand"`), true, map[string]*string{"stopped": ptr.To("by-hand")}},
		{"removed when it was absent", nil, true, map[string]*string{"stopped": nil}},
	} {
		op, p := &objectPatch{}, newPatch(from)
		if err := op.set(p, "/metadata/annotations/stopped", tt.value, tt.exists); err != nil {
			t.Fatalf("%s: %v", tt.name, err)
		}
		if len(op.fields) != 0 || !reflect.DeepEqual(p.annotations, tt.want) {
			t.Errorf("%s: fields %v, annotations %v, want no fields and %v", tt.name, op.fields, p.annotations, tt.want)
		}
	}
	op, p := &objectPatch{}, newPatch(from)
	for _, bad := range []string{`1`, `null`, `{}`} {
		if err := op.set(p, "/metadata/annotations/stopped", json.RawMessage(bad), false); err == nil {
			t.Errorf("an annotation set to %s was accepted", bad)
		}
	}
	if err := op.set(p, "/spec/replicas", json.RawMessage(`0`), true); err != nil || len(op.fields) != 1 || len(p.annotations) != 0 {
		t.Errorf("a spec field: %v, fields %v, annotations %v", err, op.fields, p.annotations)
	}
}

// A ScaledJob without a patch sleeps through KEDA's paused annotation.
func TestScaledJobSleepsThroughKEDAsAnnotation(t *testing.T) {
	info := func(schema.GroupKind) (kit.KindInfo, error) {
		return kit.KindInfo{Version: "v1alpha1", Resource: "scaledjobs", Namespaced: true}, nil
	}
	kinds, problems := resolveKinds([]powerv1alpha1.SleepKind{{Group: "keda.sh", Kind: "ScaledJob"}}, info)
	if len(problems) != 0 || len(kinds) != 1 || kinds[0].mode != modePatch {
		t.Fatalf("resolveKinds = %v, %v: want one kind sleeping by patch", kinds, problems)
	}
	f := kinds[0].spec.Patch.Fields
	if len(f) != 1 || f[0].Path != "/metadata/annotations/autoscaling.keda.sh~1paused" || string(f[0].Value.Raw) != `"true"` {
		t.Errorf("the ScaledJob's patch = %+v", f)
	}
	if err := checkPatches(&powerv1alpha1.SleepScheduleSpec{Targets: powerv1alpha1.SleepTargets{Kinds: []powerv1alpha1.SleepKind{kinds[0].spec}}}); err != nil {
		t.Errorf("the built-in patch does not pass the schedule's own check: %v", err)
	}
}
