package secretrotation

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

// The Secrets cache keeps a Secret's identity and nothing a user writes into it:
// however large the labels, annotations or owners someone gives a Secret, its entry
// stays small.
func TestIdentityOnlyKeepsNoUserContent(t *testing.T) {
	big := strings.Repeat("x", 64*1024)
	in := secretObject()
	in.ObjectMeta = metav1.ObjectMeta{Name: "db", Namespace: "shop", UID: "u-1", ResourceVersion: "42", Generation: 3,
		Labels: map[string]string{"a": big}, Annotations: map[string]string{"b": big}, Finalizers: []string{big},
		OwnerReferences: []metav1.OwnerReference{{Name: big}}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: big}}}
	out, err := identityOnly(in)
	if err != nil {
		t.Fatal(err)
	}
	want := secretObject()
	want.ObjectMeta = metav1.ObjectMeta{Name: "db", Namespace: "shop", UID: "u-1", ResourceVersion: "42"}
	if !equality.Semantic.DeepEqual(out, want) {
		t.Errorf("identityOnly kept %+v, want %+v", out, want)
	}
	if in.Labels["a"] != big {
		t.Error("identityOnly changed its input")
	}
	other := "not metadata"
	if got, _ := identityOnly(other); got != other {
		t.Errorf("identityOnly(%v) = %v, want it unchanged", other, got)
	}
}

func TestIndexSecretName(t *testing.T) {
	tests := []struct {
		name string
		sr   *secretsv1alpha1.SecretRotation
		want []string
	}{
		{"named", &secretsv1alpha1.SecretRotation{Spec: secretsv1alpha1.SecretRotationSpec{SecretName: "db"}}, []string{"db"}},
		{"unnamed", &secretsv1alpha1.SecretRotation{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := indexSecretName(tt.sr); !equality.Semantic.DeepEqual(got, tt.want) {
				t.Errorf("indexSecretName = %v, want %v", got, tt.want)
			}
		})
	}
}

// Every change of a Secret (a new resourceVersion) wakes its SecretRotations; a
// resync of an unchanged Secret does not.
func TestSecretChanged(t *testing.T) {
	at := func(rv string) *metav1.PartialObjectMetadata {
		s := secretObject()
		s.Name, s.Namespace, s.ResourceVersion = "db", "shop", rv
		return s
	}
	p := secretChanged()
	tests := []struct {
		name string
		got  bool
		want bool
	}{
		{"create", p.Create(event.CreateEvent{Object: at("1")}), true},
		{"delete", p.Delete(event.DeleteEvent{Object: at("1")}), true},
		{"change", p.Update(event.UpdateEvent{ObjectOld: at("1"), ObjectNew: at("2")}), true},
		{"resync", p.Update(event.UpdateEvent{ObjectOld: at("2"), ObjectNew: at("2")}), false},
		{"generic", p.Generic(event.GenericEvent{Object: at("2")}), false},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s: let through = %v, want %v", tt.name, tt.got, tt.want)
		}
	}
}
