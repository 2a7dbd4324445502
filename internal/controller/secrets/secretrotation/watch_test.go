package secretrotation

import (
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/event"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
)

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
