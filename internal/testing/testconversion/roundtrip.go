// Package testconversion checks, in tests, that a kind served in two versions
// converts without losing anything: objects filled at random (sigs.k8s.io/randfill)
// go from the hub version to the other and back, and the other way, and must come
// back equal.
package testconversion

import (
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/conversion"
	"sigs.k8s.io/randfill"
)

// Runs is how many random objects each direction is tried with.
const Runs = 1000

// RoundTrip fills Runs hub objects at random and converts each to the spoke version
// and back, then the same from spoke objects, and fails t at the first object that
// does not come back equal, with the difference.
func RoundTrip(t *testing.T, newHub func() conversion.Hub, newSpoke func() conversion.Convertible) {
	t.Helper()
	f := Filler(time.Now().UnixNano())
	for i := range Runs {
		hub := newHub()
		f.Fill(hub)
		spoke := newSpoke()
		if err := spoke.ConvertFrom(hub); err != nil {
			t.Fatalf("run %d: hub to spoke: %v", i, err)
		}
		back := newHub()
		if err := spoke.ConvertTo(back); err != nil {
			t.Fatalf("run %d: spoke back to hub: %v", i, err)
		}
		same(t, i, "hub -> spoke -> hub", hub, back)

		spoke = newSpoke()
		f.Fill(spoke)
		hub = newHub()
		if err := spoke.ConvertTo(hub); err != nil {
			t.Fatalf("run %d: spoke to hub: %v", i, err)
		}
		spokeBack := newSpoke()
		if err := spokeBack.ConvertFrom(hub); err != nil {
			t.Fatalf("run %d: hub back to spoke: %v", i, err)
		}
		same(t, i, "spoke -> hub -> spoke", spoke, spokeBack)
	}
}

// same compares two objects of one version, without their apiVersion and kind (a
// conversion sets them; the filler wrote random ones).
func same(t *testing.T, run int, path string, want, got runtime.Object) {
	t.Helper()
	want.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	got.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	if !equality.Semantic.DeepEqual(want, got) {
		t.Fatalf("run %d: %s changed the object (-want +got):\n%s", run, path, cmp.Diff(want, got))
	}
}

// Filler fills API objects with values the API server could hold: times to the
// second (what JSON carries), valid JSON in free-form fields, whole quantities.
func Filler(seed int64) *randfill.Filler {
	return randfill.NewWithSeed(seed).NilChance(0.2).NumElements(0, 3).Funcs(
		func(tm *metav1.Time, c randfill.Continue) {
			*tm = metav1.Unix(c.Int63n(4_000_000_000), 0)
		},
		// Not null: apiextensionsv1.JSON reads a JSON null as no value, in every
		// version alike, so no Go client holds one to convert.
		func(j *apiextensionsv1.JSON, c randfill.Continue) {
			values := []string{`0`, `false`, `"Stopped"`, `{"replicas":1}`, `[1,2]`}
			j.Raw = []byte(values[c.Intn(len(values))])
		},
		func(q *resource.Quantity, c randfill.Continue) {
			*q = *resource.NewQuantity(c.Int63n(1<<20), resource.DecimalSI)
		},
		func(fv *metav1.FieldsV1, c randfill.Continue) {
			fv.SetRawBytes([]byte(`{"f:spec":{}}`))
		},
		func(e *runtime.RawExtension, c randfill.Continue) {
			e.Raw = []byte(`{"apiVersion":"v1","kind":"ConfigMap"}`)
		},
	)
}
