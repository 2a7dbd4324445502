package canary

import (
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	deliveryv1alpha1 "orderly.dev/orderly/api/delivery/v1alpha1"
	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
)

func createdRouteCanary(hostnames ...string) *deliveryv1alpha1.Canary {
	return &deliveryv1alpha1.Canary{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team-a", Name: "web"},
		Spec: deliveryv1alpha1.CanarySpec{Traffic: deliveryv1alpha1.Traffic{HTTPRoute: &deliveryv1alpha1.HTTPRouteTraffic{
			Name: "web", Create: true, ParentRefs: []deliveryv1alpha1.ParentRef{{Name: "shared", Namespace: "infra"}}, Hostnames: hostnames,
		}}},
	}
}

// A created route carries only hostnames that a ServiceDomain of the Canary's own
// namespace holds, and at least one.
func TestHostnameRefusal(t *testing.T) {
	mine := holding{claimed: true, holder: networkv1alpha1.ClaimHolder{Namespace: "team-a", Name: "web", UID: "u1"}, holderExists: true}
	theirs := holding{claimed: true, holder: networkv1alpha1.ClaimHolder{Namespace: "team-b", Name: "shop", UID: "u2"}, holderExists: false}
	gone := holding{claimed: true, holder: networkv1alpha1.ClaimHolder{Namespace: "team-a", Name: "old", UID: "u3"}}
	cases := []struct {
		name         string
		hostnames    []string
		holdings     map[string]holding
		wantReason   string
		wantHeld     []string
		wantInMsg    []string
		wantNotInMsg []string
	}{
		{name: "held by her ServiceDomain", hostnames: []string{"web.a.example.com"}, holdings: map[string]holding{"web.a.example.com": mine},
			wantHeld: []string{"web.a.example.com"}},
		{name: "no hostnames at all", wantReason: reasonHostnameRequired, wantInMsg: []string{"every hostname", "ServiceDomain in namespace team-a"}},
		{name: "not claimed by anyone", hostnames: []string{"free.example.com"}, wantReason: reasonHostnameNotClaimed,
			wantInMsg: []string{"free.example.com is not claimed", "create a ServiceDomain for it in namespace team-a"}},
		{name: "another team's hostname", hostnames: []string{"shop.b.example.com"}, holdings: map[string]holding{"shop.b.example.com": theirs},
			wantReason: reasonHostnameNotClaimed, wantInMsg: []string{"shop.b.example.com is held by a ServiceDomain of another namespace"},
			wantNotInMsg: []string{"team-b", "shop "}},
		{name: "a claim whose ServiceDomain is gone", hostnames: []string{"old.a.example.com"}, holdings: map[string]holding{"old.a.example.com": gone},
			wantReason: reasonHostnameNotClaimed, wantInMsg: []string{"ServiceDomain old, which no longer exists"}},
		{name: "a wildcard", hostnames: []string{"*.a.example.com"}, wantReason: reasonHostnameNotClaimed, wantInMsg: []string{"*.a.example.com is not a hostname a ServiceDomain can claim"}},
		{name: "one of two not held", hostnames: []string{"web.a.example.com", "shop.b.example.com"},
			holdings:   map[string]holding{"web.a.example.com": mine, "shop.b.example.com": theirs},
			wantReason: reasonHostnameNotClaimed, wantHeld: []string{"web.a.example.com"}, wantInMsg: []string{"shop.b.example.com"},
			wantNotInMsg: []string{"web.a.example.com is"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			reason, msg, held := hostnameRefusal(createdRouteCanary(tc.hostnames...), tc.holdings)
			if reason != tc.wantReason {
				t.Errorf("reason = %q, want %q (%s)", reason, tc.wantReason, msg)
			}
			if !slices.Equal(held, tc.wantHeld) {
				t.Errorf("held = %v, want %v", held, tc.wantHeld)
			}
			for _, s := range tc.wantInMsg {
				if !strings.Contains(msg, s) {
					t.Errorf("message %q lacks %q", msg, s)
				}
			}
			for _, s := range tc.wantNotInMsg {
				if strings.Contains(msg, s) {
					t.Errorf("message %q names %q", msg, s)
				}
			}
		})
	}
}

func TestIndexClaims(t *testing.T) {
	c := createdRouteCanary("a.example.com", "b.example.com")
	if got := indexClaims(c); !slices.Equal(got, []string{"a.example.com", "b.example.com"}) {
		t.Errorf("indexClaims = %v", got)
	}
	c.Spec.Traffic.HTTPRoute.Create = false
	if got := indexClaims(c); got != nil {
		t.Errorf("a route the Canary does not create is indexed: %v", got)
	}
}

// A route Orderly created loses the hostnames its namespace no longer holds; with
// none left it is taken off its Gateways, since without hostnames it would take all
// of theirs.
func TestWithdrawHostnames(t *testing.T) {
	route := func(hostnames ...string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"parentRefs": []any{map[string]any{"name": "shared", "namespace": "infra"}},
		}}}
		if hostnames != nil {
			_ = unstructured.SetNestedStringSlice(u.Object, hostnames, "spec", "hostnames")
		}
		return u
	}
	cases := []struct {
		name        string
		route       *unstructured.Unstructured
		held        []string
		wantChanged bool
		wantHosts   []string
		wantParents int
	}{
		{"all still held", route("a.example.com"), []string{"a.example.com"}, false, []string{"a.example.com"}, 1},
		{"one no longer held", route("a.example.com", "b.example.com"), []string{"a.example.com"}, true, []string{"a.example.com"}, 1},
		{"none held: detached", route("b.example.com"), nil, true, []string{"b.example.com"}, 0},
		{"created without hostnames: detached", route(), nil, true, nil, 0},
		{"detached already", func() *unstructured.Unstructured {
			u := route("b.example.com")
			unstructured.RemoveNestedField(u.Object, "spec", "parentRefs")
			return u
		}(), nil, false, []string{"b.example.com"}, 0},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := withdrawHostnames(tc.route, tc.held); got != tc.wantChanged {
				t.Errorf("changed = %v, want %v", got, tc.wantChanged)
			}
			hosts, _, _ := unstructured.NestedStringSlice(tc.route.Object, "spec", "hostnames")
			parents, _, _ := unstructured.NestedSlice(tc.route.Object, "spec", "parentRefs")
			if !slices.Equal(hosts, tc.wantHosts) || len(parents) != tc.wantParents {
				t.Errorf("hostnames %v, %d parentRefs; want %v, %d", hosts, len(parents), tc.wantHosts, tc.wantParents)
			}
		})
	}
}
