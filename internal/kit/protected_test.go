package kit

import (
	"slices"
	"testing"
)

func TestNamespaceProtection(t *testing.T) {
	cases := []struct {
		ns, managerNS string
		want          Protection
	}{
		{"kube-system", "orderly-system", KubernetesNamespace},
		{"kube-public", "", KubernetesNamespace},
		{"kube-flannel", "orderly-system", KubernetesNamespace},
		{"kube-orderly", "kube-orderly", KubernetesNamespace},
		{"orderly-system", "orderly-system", ManagerNamespace},
		{"orderly-system", "", NotProtected},
		{"kubeflow", "orderly-system", NotProtected},
		{"default", "orderly-system", NotProtected},
		{"", "", NotProtected},
	}
	for _, tc := range cases {
		if got := NamespaceProtection(tc.ns, tc.managerNS); got != tc.want {
			t.Errorf("NamespaceProtection(%q, manager in %q) = %v, want %v", tc.ns, tc.managerNS, got, tc.want)
		}
		if got := ProtectedNamespace(tc.ns, tc.managerNS); got != (tc.want != NotProtected) {
			t.Errorf("ProtectedNamespace(%q, manager in %q) = %v", tc.ns, tc.managerNS, got)
		}
	}
}

func TestProtectedNamespacesAndMatchCondition(t *testing.T) {
	if got := ProtectedNamespaces("orderly-system"); !slices.Equal(got, []string{"kube-*", "orderly-system"}) {
		t.Errorf("ProtectedNamespaces = %v", got)
	}
	if got := ProtectedNamespaces("kube-orderly"); !slices.Equal(got, []string{"kube-*"}) {
		t.Errorf("ProtectedNamespaces(kube-orderly) = %v", got)
	}
	if got := ProtectedMatchCondition("orderly-system").Expression; got != `!request.namespace.startsWith("kube-") && request.namespace != "orderly-system"` {
		t.Errorf("match condition %s", got)
	}
	if got := ProtectedMatchCondition("").Expression; got != `!request.namespace.startsWith("kube-")` {
		t.Errorf("match condition without a manager namespace: %s", got)
	}
}
