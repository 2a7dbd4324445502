package tenant

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

func TestRenderResource(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme", UID: "u-1"}}
	entry := &tenancyv1alpha1.TenantResource{Name: "cfg", Object: runtime.RawExtension{Raw: []byte(
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","labels":{"a":"b"}},"data":{"ns":"{{ .Namespace }}","list":"{{ .Tenant }}/x"},"status":{"x":1}}`)}}
	u, err := renderResource(tn, entry, "acme-dev")
	if err != nil {
		t.Fatal(err)
	}
	if u.GetNamespace() != "acme-dev" || u.Object["data"].(map[string]any)["ns"] != "acme-dev" || u.Object["data"].(map[string]any)["list"] != "acme/x" {
		t.Errorf("templates or namespace not applied: %v", u.Object)
	}
	if _, ok := u.Object["status"]; ok {
		t.Error("status kept")
	}
	l := u.GetLabels()
	if l["a"] != "b" || l[labels.ManagedBy] != labels.ManagedByValue || l[tenancyv1alpha1.TenantLabel] != "acme" || l[tenancyv1alpha1.ResourceLabel] != "cfg" {
		t.Errorf("labels: %v", l)
	}
	if refs := u.GetOwnerReferences(); len(refs) != 1 || refs[0].UID != "u-1" || refs[0].Controller == nil || !*refs[0].Controller {
		t.Errorf("owner references: %v", refs)
	}
	other, err := renderResource(tn, entry, "acme-prod")
	if err != nil {
		t.Fatal(err)
	}
	if other.GetAnnotations()[resourceHashAnnotation] == u.GetAnnotations()[resourceHashAnnotation] {
		t.Error("two different objects have one digest")
	}
	again, _ := renderResource(tn, entry, "acme-dev")
	if again.GetAnnotations()[resourceHashAnnotation] != u.GetAnnotations()[resourceHashAnnotation] {
		t.Error("the digest is not stable")
	}

	for name, raw := range map[string]string{
		"unknown field": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"{{ .Cluster }}"}}`,
		"bad syntax":    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"{{ .Namespace "}}`,
		"namespace":     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"y"}}`,
		"owner refs":    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","ownerReferences":[]}}`,
		"orderly label": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"policy.orderly.dev/x":"y"}}}`,
		"managed-by":    `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"app.kubernetes.io/managed-by":"y"}}}`,
		"not an object": `[1,2]`,
	} {
		entry := &tenancyv1alpha1.TenantResource{Name: "x", Object: runtime.RawExtension{Raw: []byte(raw)}}
		if _, err := renderResource(tn, entry, "ns"); err == nil {
			t.Errorf("%s: rendered", name)
		}
	}
}

func TestHolds(t *testing.T) {
	live := map[string]any{"a": int64(1), "b": map[string]any{"c": "d", "e": "f"}, "l": []any{map[string]any{"x": "y", "z": true}}}
	for name, tc := range map[string]struct {
		want map[string]any
		ok   bool
	}{
		"subset":            {map[string]any{"a": float64(1), "b": map[string]any{"c": "d"}}, true},
		"list items subset": {map[string]any{"l": []any{map[string]any{"x": "y"}}}, true},
		"value differs":     {map[string]any{"b": map[string]any{"c": "other"}}, false},
		"number differs":    {map[string]any{"a": float64(2)}, false},
		"missing key":       {map[string]any{"q": "r"}, false},
		"list length":       {map[string]any{"l": []any{map[string]any{"x": "y"}, "more"}}, false},
		"type differs":      {map[string]any{"a": "1"}, false},
	} {
		if got := holds(live, tc.want); got != tc.ok {
			t.Errorf("%s: holds = %v, want %v", name, got, tc.ok)
		}
	}
}

func TestResourceNamespaces(t *testing.T) {
	got := resourceNamespaces([]namespaceResult{
		{name: "b", state: tenancyv1alpha1.NamespaceReady},
		{name: "a", state: tenancyv1alpha1.NamespaceFailed},
		{name: "c", state: tenancyv1alpha1.NamespaceConflict},
		{name: "d", state: tenancyv1alpha1.NamespacePending},
	})
	if len(got) != 2 || got[0] != "a" || got[1] != "b" {
		t.Errorf("got %v, want [a b]", got)
	}
}
