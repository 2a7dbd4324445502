package kit

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// A name cache keeps an object's identity and nothing a user writes into it: however
// large the labels, annotations or owners someone gives a Secret, its entry stays small.
func TestNameOnlyKeepsNoUserContent(t *testing.T) {
	big := strings.Repeat("x", 64*1024)
	in := MetadataOf(corev1.SchemeGroupVersion.WithKind("Secret"))
	in.ObjectMeta = metav1.ObjectMeta{Name: "db", Namespace: "shop", UID: "u-1", ResourceVersion: "42", Generation: 3,
		Labels: map[string]string{"a": big}, Annotations: map[string]string{"b": big}, Finalizers: []string{big},
		OwnerReferences: []metav1.OwnerReference{{Name: big}}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: big}}}
	out, err := NameOnly(in)
	if err != nil {
		t.Fatal(err)
	}
	want := MetadataOf(corev1.SchemeGroupVersion.WithKind("Secret"))
	want.ObjectMeta = metav1.ObjectMeta{Name: "db", Namespace: "shop", UID: "u-1", ResourceVersion: "42"}
	if !equality.Semantic.DeepEqual(out, want) {
		t.Errorf("NameOnly kept %+v, want %+v", out, want)
	}
	if in.Labels["a"] != big {
		t.Error("NameOnly changed its input")
	}
	other := "not metadata"
	if got, _ := NameOnly(other); got != other {
		t.Errorf("NameOnly(%v) = %v, want it unchanged", other, got)
	}
}
