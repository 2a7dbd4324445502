package tenant

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/labels"
)

// FuzzRenderResource renders any JSON as a spec.resources object for a namespace.
// Properties: it returns in bounded time; a refusal is an error with a message; the
// object rendered is in that namespace, carries the Tenant's ownership labels and one
// controller reference, keeps none of the fields the API server or Orderly set, no
// status, and renders the same twice (its digest is stable); strings without
// templates are kept as they are.
func FuzzRenderResource(f *testing.F) {
	for _, raw := range []string{
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"cfg","labels":{"a":"b"}},"data":{"ns":"{{ .Namespace }}","list":"{{ .Tenant }}/x"},"status":{"x":1}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"{{ .Cluster }}"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"{{ .Namespace "}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","namespace":"y"}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","ownerReferences":[]}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"policy.orderly.dev/x":"y"}}}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x","labels":{"app.kubernetes.io/managed-by":"y"}}}`,
		`[1,2]`, `{"apiVersion":"v1","kind":"ConfigMap"}`, `{"apiVersion":"v1","kind":"ConfigMap","metadata":"x"}`,
		`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"x"},"data":{"a":"{{range 100000000000}}{{end}}"}}`,
		`{"apiVersion":"networking.k8s.io/v1","kind":"NetworkPolicy","metadata":{"name":"deny"},"spec":{"podSelector":{},"policyTypes":["Ingress"]}}`,
	} {
		f.Add(raw, "acme-dev")
	}
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "acme", UID: "u-1"}}
	f.Fuzz(func(t *testing.T, raw, ns string) {
		entry := &tenancyv1alpha1.TenantResource{Name: "cfg", Object: &runtime.RawExtension{Raw: []byte(raw)}}
		type result struct {
			obj map[string]any
			err error
		}
		render := func() result {
			done := make(chan result, 1)
			go func() {
				defer func() {
					if p := recover(); p != nil {
						t.Errorf("renderResource(%s) panicked: %v", raw, p)
						done <- result{err: errPanicked}
					}
				}()
				u, err := renderResource(tn, entry, ns)
				if err != nil {
					done <- result{err: err}
					return
				}
				done <- result{obj: u.Object}
			}()
			select {
			case r := <-done:
				return r
			case <-time.After(30 * time.Second):
				t.Fatalf("renderResource(%s) did not return within 30s", raw)
			}
			return result{}
		}
		r := render()
		if r.err != nil {
			if r.err.Error() == "" {
				t.Fatal("a refusal without a message")
			}
			return
		}
		meta, _ := r.obj["metadata"].(map[string]any)
		if got := (&unstructured.Unstructured{Object: r.obj}).GetNamespace(); got != ns {
			t.Fatalf("rendered into namespace %q, want %q", got, ns)
		}
		for _, field := range []string{"uid", "resourceVersion", "finalizers", "managedFields", "creationTimestamp", "deletionTimestamp"} {
			if _, ok := meta[field]; ok {
				t.Fatalf("metadata.%s kept: %v", field, meta)
			}
		}
		if _, ok := r.obj["status"]; ok {
			t.Fatal("status kept")
		}
		lbls, _ := meta["labels"].(map[string]any)
		if lbls[labels.ManagedBy] != labels.ManagedByValue || lbls[tenancyv1alpha1.TenantLabel] != "acme" || lbls[tenancyv1alpha1.ResourceLabel] != "cfg" {
			t.Fatalf("ownership labels: %v", lbls)
		}
		for k := range lbls {
			if k != labels.ManagedBy && k != tenancyv1alpha1.TenantLabel && k != tenancyv1alpha1.ResourceLabel && reservedResourceKey(k) {
				t.Fatalf("a reserved label from the entry was kept: %s", k)
			}
		}
		refs, _ := meta["ownerReferences"].([]any)
		if len(refs) != 1 {
			t.Fatalf("owner references: %v", refs)
		}
		if again := render(); !reflect.DeepEqual(again.obj, r.obj) {
			t.Fatalf("renders differently twice:\n%v\n%v", r.obj, again.obj)
		}
		if !strings.Contains(raw, "{{") {
			var in map[string]any
			if err := json.Unmarshal([]byte(raw), &in); err == nil {
				for k, v := range in {
					if k != "metadata" && k != "status" && !reflect.DeepEqual(r.obj[k], v) {
						t.Fatalf("%s changed without a template: %v, was %v", k, r.obj[k], v)
					}
				}
			}
		}
	})
}

type panicked struct{}

func (panicked) Error() string { return "panicked" }

var errPanicked error = panicked{}
