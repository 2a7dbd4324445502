package canary

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

func fromYAML(t *testing.T, s string) *unstructured.Unstructured {
	t.Helper()
	var m map[string]any
	if err := yaml.Unmarshal([]byte(s), &m); err != nil {
		t.Fatal(err)
	}
	// JSON numbers decode as float64 here and as int64 from the API server: both are read.
	return &unstructured.Unstructured{Object: m}
}

const userRoute = `
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: shop, namespace: shop}
spec:
  rules:
  - matches: [{path: {type: PathPrefix, value: /api}}]
    backendRefs:
    - {name: web-primary, port: 8080}
  - backendRefs:
    - {name: other, port: 80}
`

// Orderly sets the weights of the rules that send traffic to the primary, adds the
// canary next to it, and leaves every other rule and backendRef alone.
func TestHTTPRouteWeightsTouchOnlyThePrimarysRules(t *testing.T) {
	u := fromYAML(t, userRoute)
	if w, found := httpRouteWeight(u, "shop", "web-primary", "web-canary"); !found || w != 0 {
		t.Fatalf("weight %d found %v", w, found)
	}
	changed, err := setHTTPRouteWeights(u, "shop", "web-primary", "web-canary", 9090, 25)
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	if w, _ := httpRouteWeight(u, "shop", "web-primary", "web-canary"); w != 25 {
		t.Fatalf("weight after set: %d", w)
	}
	rules, _, _ := unstructured.NestedSlice(u.Object, "spec", "rules")
	refs := asMap(rules[0])["backendRefs"].([]any)
	if len(refs) != 2 || asMap(refs[1])["name"] != "web-canary" || intOf(asMap(refs[1])["port"], 0) != 8080 || intOf(asMap(refs[0])["weight"], 0) != 75 {
		t.Fatalf("first rule's refs: %v", refs)
	}
	other := asMap(rules[1])["backendRefs"].([]any)
	if len(other) != 1 || asMap(other[0])["weight"] != nil {
		t.Fatalf("another rule was changed: %v", other)
	}
	if _, ok := asMap(rules[0])["matches"]; !ok {
		t.Fatal("the rule's matches were lost")
	}
	changed, err = setHTTPRouteWeights(u, "shop", "web-primary", "web-canary", 9090, 25)
	if err != nil || changed {
		t.Fatalf("setting the same weight again changed %v (err %v)", changed, err)
	}
}

func TestHTTPRouteWithoutThePrimaryIsRefused(t *testing.T) {
	u := fromYAML(t, `
spec:
  rules:
  - backendRefs: [{name: web-primary, namespace: elsewhere, port: 80}, {name: web-primary, kind: ServiceImport, group: multicluster.x-k8s.io}]
`)
	if _, found := httpRouteWeight(u, "shop", "web-primary", "web-canary"); found {
		t.Fatal("a Service of another namespace or another kind counted as the primary")
	}
	if _, err := setHTTPRouteWeights(u, "shop", "web-primary", "web-canary", 80, 10); err == nil {
		t.Fatal("no error for a route that does not send traffic to the primary")
	}
}

func TestVirtualServiceWeights(t *testing.T) {
	u := fromYAML(t, `
spec:
  hosts: [shop.example.com]
  http:
  - route:
    - destination: {host: web-primary.shop.svc.cluster.local, port: {number: 8080}, subset: v1}
  - route:
    - destination: {host: other}
`)
	if w, found := virtualServiceWeight(u, "shop", "web-primary", "web-canary"); !found || w != 0 {
		t.Fatalf("weight %d found %v", w, found)
	}
	changed, err := setVirtualServiceWeights(u, "shop", "web-primary", "web-canary", 40)
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	if w, _ := virtualServiceWeight(u, "shop", "web-primary", "web-canary"); w != 40 {
		t.Fatalf("weight %d", w)
	}
	http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
	dests := asMap(http[0])["route"].([]any)
	host, _, _ := unstructured.NestedString(asMap(dests[1]), "destination", "host")
	if host != "web-canary.shop.svc.cluster.local" {
		t.Fatalf("canary host %q", host)
	}
	if _, has := asMap(asMap(dests[1])["destination"])["subset"]; has {
		t.Fatal("the primary's subset was copied to the canary")
	}
	if r := asMap(http[1])["route"].([]any); asMap(r[0])["weight"] != nil {
		t.Fatal("another route was changed")
	}
}

func TestPercent(t *testing.T) {
	for _, tt := range []struct {
		wp, wc int64
		want   int32
	}{{100, 0, 0}, {90, 10, 10}, {1, 1, 50}, {0, 0, 0}, {0, 5, 100}, {2, 1, 33}} {
		if got := percent(tt.wp, tt.wc); got != tt.want {
			t.Errorf("percent(%d, %d) = %d, want %d", tt.wp, tt.wc, got, tt.want)
		}
	}
}
