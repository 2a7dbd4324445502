package tenant

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

func TestRenderResource(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme", UID: "u-1"}}
	entry := &tenancyv1alpha1.TenantResource{Name: "cfg", Object: &runtime.RawExtension{Raw: []byte(
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
		// Without metadata renderResource panicked (found by FuzzRenderResource): the
		// API server checks an embedded object's apiVersion and kind, not its name.
		"no metadata": `{"apiVersion":"v1","kind":"ConfigMap","data":{"a":"b"}}`,
		"no name":     `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"a":"b"}}}`,
		// A loop held a manager's worker as long as it ran (kit.ParseTemplate).
		"a loop": `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"{{range 100000000000}}{{end}}"}}`,
	} {
		entry := &tenancyv1alpha1.TenantResource{Name: "x", Object: &runtime.RawExtension{Raw: []byte(raw)}}
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

func TestCopyResource(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme", UID: "u-1"}}
	src := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Secret", "type": "kubernetes.io/dockerconfigjson",
		"metadata": map[string]any{"name": "pull", "namespace": "platform", "uid": "s-1", "resourceVersion": "7",
			"labels":      map[string]any{"team": "platform", tenancyv1alpha1.ShareableLabel: "true", labels.ManagedBy: "helm"},
			"annotations": map[string]any{"note": "x", corev1.LastAppliedConfigAnnotation: "{}", "tenancy.orderly.dev/resource-hash": "old"}},
		"data":   map[string]any{".dockerconfigjson": "e30="},
		"status": map[string]any{"x": "y"},
	}}
	u, err := copyResource(tn, "pull", src, "acme-dev")
	if err != nil {
		t.Fatal(err)
	}
	if u.GetNamespace() != "acme-dev" || u.GetName() != "pull" || u.GetKind() != "Secret" || u.Object["type"] != "kubernetes.io/dockerconfigjson" {
		t.Errorf("identity or content not copied: %v", u.Object)
	}
	if _, ok := u.Object["status"]; ok {
		t.Error("status copied")
	}
	if u.GetUID() != "" || u.GetResourceVersion() != "" {
		t.Error("the source's identity copied")
	}
	l := u.GetLabels()
	if l["team"] != "platform" || l[tenancyv1alpha1.ShareableLabel] != "" || l[labels.ManagedBy] != labels.ManagedByValue || l[tenancyv1alpha1.ResourceLabel] != "pull" {
		t.Errorf("labels: %v", l)
	}
	a := u.GetAnnotations()
	if a["note"] != "x" || a[corev1.LastAppliedConfigAnnotation] != "" || a[resourceHashAnnotation] == "old" || a[resourceHashAnnotation] == "" {
		t.Errorf("annotations: %v", a)
	}
	// The copy shares nothing with the source.
	u.Object["data"].(map[string]any)[".dockerconfigjson"] = "changed"
	if src.Object["data"].(map[string]any)[".dockerconfigjson"] != "e30=" {
		t.Error("the copy shares its content with the source")
	}
}

func TestSelectNamespaces(t *testing.T) {
	all := []tenantNamespace{{name: "a-dev", labels: map[string]string{"env": "dev"}}, {name: "a-prod", labels: map[string]string{"env": "prod"}}}
	if got, _ := selectNamespaces(nil, all); len(got) != 2 {
		t.Errorf("no selector: %v", got)
	}
	got, err := selectNamespaces(&metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}}, all)
	if err != nil || len(got) != 1 || got[0].name != "a-prod" {
		t.Errorf("env=prod: %v %v", got, err)
	}
	if _, err := selectNamespaces(&metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "env", Operator: "Bogus"}}}, all); err == nil {
		t.Error("an invalid selector is accepted")
	}
}

func TestMissingResources(t *testing.T) {
	if n := missingResources([]tenancyv1alpha1.TenantResourceStatus{{Namespaces: 3, Applied: 1}, {Namespaces: 2, Applied: 2}, {Namespaces: 0, Applied: 0}}); n != 2 {
		t.Errorf("missing = %d, want 2", n)
	}
}
