package canary

import (
	"reflect"
	"strings"
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
	if w, found := virtualServiceWeight(u, "shop", "web-primary", "web-canary", nil); !found || w != 0 {
		t.Fatalf("weight %d found %v", w, found)
	}
	changed, err := setVirtualServiceWeights(u, "shop", "web-primary", "web-canary", 40, nil)
	if err != nil || !changed {
		t.Fatalf("changed %v err %v", changed, err)
	}
	if w, _ := virtualServiceWeight(u, "shop", "web-primary", "web-canary", nil); w != 40 {
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

// Routes that pick their requests by header or query parameter are left alone
// unless named; named routes are the only ones shifted; a weight of zero adds no
// canary destination (the VirtualService stays as written until the first step).
func TestVirtualServiceRouteSelection(t *testing.T) {
	doc := `
spec:
  http:
  - name: testers
    match: [{headers: {x-version: {exact: v1}}}]
    route: [{destination: {host: web-primary}}]
  - name: beta
    match: [{queryParams: {beta: {exact: "1"}}}]
    route: [{destination: {host: web-primary}}]
  - name: api
    match: [{uri: {prefix: /api}}]
    route: [{destination: {host: web-primary}}]
  - name: default
    route: [{destination: {host: web-primary}}]
`
	routeHosts := func(u *unstructured.Unstructured) map[string]int {
		http, _, _ := unstructured.NestedSlice(u.Object, "spec", "http")
		out := map[string]int{}
		for _, r := range http {
			out[asMap(r)["name"].(string)] = len(asMap(r)["route"].([]any))
		}
		return out
	}
	u := fromYAML(t, doc)
	if changed, err := setVirtualServiceWeights(u, "shop", "web-primary", "web-canary", 0, nil); err != nil || changed {
		t.Fatalf("weight 0 before any step: changed %v, err %v; want nothing written", changed, err)
	}
	if changed, err := setVirtualServiceWeights(u, "shop", "web-primary", "web-canary", 10, nil); err != nil || !changed {
		t.Fatalf("weight 10: changed %v, err %v", changed, err)
	}
	if got, want := routeHosts(u), map[string]int{"testers": 1, "beta": 1, "api": 2, "default": 2}; !reflect.DeepEqual(got, want) {
		t.Errorf("destinations per route = %v, want %v", got, want)
	}
	if w, found := virtualServiceWeight(u, "shop", "web-primary", "web-canary", nil); !found || w != 10 {
		t.Errorf("weight read back = %d (found %v), want 10", w, found)
	}
	// Back to zero: the canary stays, at weight 0.
	if changed, _ := setVirtualServiceWeights(u, "shop", "web-primary", "web-canary", 0, nil); !changed {
		t.Error("weight 0 after a step changed nothing")
	}
	if w, _ := virtualServiceWeight(u, "shop", "web-primary", "web-canary", nil); w != 0 {
		t.Errorf("weight after the end = %d", w)
	}

	u = fromYAML(t, doc)
	if _, err := setVirtualServiceWeights(u, "shop", "web-primary", "web-canary", 20, []string{"testers"}); err != nil {
		t.Fatal(err)
	}
	if got, want := routeHosts(u), map[string]int{"testers": 2, "beta": 1, "api": 1, "default": 1}; !reflect.DeepEqual(got, want) {
		t.Errorf("named routes: destinations per route = %v, want %v", got, want)
	}
	if _, err := setVirtualServiceWeights(u, "shop", "web-primary", "web-canary", 20, []string{"missing"}); err == nil || !strings.Contains(err.Error(), "in the routes Orderly shifts") {
		t.Errorf("no named route sends to the primary: %v", err)
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
