package kit

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestRequests(t *testing.T) {
	items := []corev1.ConfigMap{
		{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "one"}},
		{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "two"}},
	}
	got := Requests(items)
	want := []types.NamespacedName{{Namespace: "a", Name: "one"}, {Namespace: "b", Name: "two"}}
	if len(got) != len(want) {
		t.Fatalf("got %d requests, want %d", len(got), len(want))
	}
	for i := range want {
		if got[i].NamespacedName != want[i] {
			t.Errorf("request %d = %v, want %v", i, got[i].NamespacedName, want[i])
		}
	}
	if len(Requests([]corev1.ConfigMap(nil))) != 0 {
		t.Error("no items, yet requests")
	}
}
