package kit

import (
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/cache"
)

func TestMergeCache(t *testing.T) {
	managed := cache.ByObject{Label: k8slabels.SelectorFromSet(k8slabels.Set{"app.kubernetes.io/managed-by": "orderly"})}
	strip := cache.ByObject{Transform: cache.TransformStripManagedFields()}
	rules := func(r CacheRules) func() CacheRules { return func() CacheRules { return r } }

	t.Run("same rule from two controllers is one entry", func(t *testing.T) {
		got, err := MergeCache(clientgoscheme.Scheme, []Controller{
			{Name: "a", Cache: rules(CacheRules{&corev1.Secret{}: managed, &appsv1.Deployment{}: strip})},
			{Name: "b", Cache: rules(CacheRules{&corev1.Secret{}: managed})},
			{Name: "c"},
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != 2 {
			t.Errorf("got %d kinds, want 2", len(got))
		}
	})
	t.Run("the same kind asked for differently is refused, naming both", func(t *testing.T) {
		_, err := MergeCache(clientgoscheme.Scheme, []Controller{
			{Name: "a", Cache: rules(CacheRules{&corev1.Secret{}: managed})},
			{Name: "b", Cache: rules(CacheRules{&corev1.Secret{}: strip})},
		})
		if err == nil || !strings.Contains(err.Error(), "a and b") || !strings.Contains(err.Error(), "Secret") {
			t.Errorf("err = %v, want a conflict on Secret naming a and b", err)
		}
	})
	t.Run("a kind the scheme does not know is an error", func(t *testing.T) {
		_, err := MergeCache(clientgoscheme.Scheme, []Controller{{Name: "a", Cache: rules(CacheRules{&unknownKind{}: managed})}})
		if err == nil {
			t.Error("no error for a kind the scheme does not know")
		}
	})
}

type unknownKind struct{ corev1.Secret }
