package tenant

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func TestBindableRoles(t *testing.T) {
	tests := []struct {
		name       string
		configured []string
		want       []string
	}{
		{"default when not configured", nil, []string{"edit", tenancyv1alpha1.TenantAdminClusterRole, "view"}},
		{"configured replaces the default", []string{"view", " team-reader "}, []string{tenancyv1alpha1.TenantAdminClusterRole, "team-reader", "view"}},
		{"empty list allows only the owners' role", []string{}, []string{tenancyv1alpha1.TenantAdminClusterRole}},
		{"blank names are ignored", []string{""}, []string{tenancyv1alpha1.TenantAdminClusterRole}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := newBindableRoles(tt.configured).names(); !slices.Equal(got, tt.want) {
				t.Errorf("allowed = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestRefusedBindings(t *testing.T) {
	binding := func(kind, name string) tenancyv1alpha1.TenantRoleBinding {
		return tenancyv1alpha1.TenantRoleBinding{
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: kind, Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "g"}},
		}
	}
	tests := []struct {
		name         string
		bindings     []tenancyv1alpha1.TenantRoleBinding
		wantRefused  []int
		wantMessages []string
	}{
		{"allowed ClusterRoles", []tenancyv1alpha1.TenantRoleBinding{binding("ClusterRole", "view"), binding("ClusterRole", "edit"), binding("ClusterRole", tenancyv1alpha1.TenantAdminClusterRole)}, nil, nil},
		{"cluster-admin is refused", []tenancyv1alpha1.TenantRoleBinding{binding("ClusterRole", "view"), binding("ClusterRole", "cluster-admin")},
			[]int{1}, []string{`additionalRoleBindings[1] binds ClusterRole "cluster-admin", which Tenants may not bind (allowed: edit, orderly-tenant-admin, view)`}},
		{"admin is not implied by orderly-tenant-admin", []tenancyv1alpha1.TenantRoleBinding{binding("ClusterRole", "admin")}, []int{0}, []string{`"admin"`}},
		{"a Role is refused", []tenancyv1alpha1.TenantRoleBinding{binding("Role", "view")}, []int{0}, []string{`binds Role "view": a Tenant binds only ClusterRoles`}},
		{"another API group is refused", []tenancyv1alpha1.TenantRoleBinding{{RoleRef: rbacv1.RoleRef{APIGroup: "example.com", Kind: "ClusterRole", Name: "view"}}}, []int{0}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tn := &tenancyv1alpha1.Tenant{Spec: tenancyv1alpha1.TenantSpec{AdditionalRoleBindings: tt.bindings}}
			refused := refusedBindings(tn, newBindableRoles(nil))
			var got []int
			for _, r := range refused {
				got = append(got, r.index)
			}
			if !slices.Equal(got, tt.wantRefused) {
				t.Fatalf("refused = %v, want %v", got, tt.wantRefused)
			}
			for i, want := range tt.wantMessages {
				if !strings.Contains(refused[i].message, want) {
					t.Errorf("message %q does not contain %q", refused[i].message, want)
				}
			}
			if len(refused) > 0 && !strings.Contains(refusedMessage(refused), "not created") {
				t.Errorf("summary %q does not say the bindings were not created", refusedMessage(refused))
			}
		})
	}
}

func TestRefusedMessageIsBounded(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{}
	for range 32 {
		tn.Spec.AdditionalRoleBindings = append(tn.Spec.AdditionalRoleBindings, tenancyv1alpha1.TenantRoleBinding{
			RoleRef: rbacv1.RoleRef{APIGroup: rbacAPIGroup, Kind: "ClusterRole", Name: strings.Repeat("x", 200)},
		})
	}
	msg := refusedMessage(refusedBindings(tn, newBindableRoles(nil)))
	if !strings.HasPrefix(msg, "32 role binding(s) not created") || !strings.HasSuffix(msg, "and 29 more") {
		t.Errorf("summary = %q", msg)
	}
}

// rbacRule is one rule of the manager's generated ClusterRole.
type rbacRule struct {
	APIGroups     []string `json:"apiGroups"`
	Resources     []string `json:"resources"`
	ResourceNames []string `json:"resourceNames"`
	Verbs         []string `json:"verbs"`
}

func managerRules(t *testing.T) []rbacRule {
	t.Helper()
	raw, err := os.ReadFile("../../../../config/rbac/role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role struct {
		Rules []rbacRule `json:"rules"`
	}
	if err := yaml.Unmarshal(raw, &role); err != nil {
		t.Fatal(err)
	}
	return role.Rules
}

// TestRBACNamesMatchTheCode: the manager's RBAC names the ClusterRoles it may bind and
// the children it may change and delete; they must be exactly what the code binds by
// default and the names it gives its children. A broader rule (bind on every role,
// delete on every RoleBinding) is the hole this closes.
func TestRBACNamesMatchTheCode(t *testing.T) {
	rules := managerRules(t)
	grants := func(group, resource, verb string) [][]string {
		var names [][]string
		for _, r := range rules {
			if slices.Contains(r.APIGroups, group) && slices.Contains(r.Resources, resource) && (slices.Contains(r.Verbs, verb) || slices.Contains(r.Verbs, "*")) {
				names = append(names, r.ResourceNames)
			}
		}
		return names
	}
	sorted := func(s []string) []string { s = slices.Clone(s); slices.Sort(s); return s }

	wantBind := sorted(newBindableRoles(nil).names())
	for _, verb := range []string{"bind", "escalate"} {
		for _, resource := range []string{"roles", "clusterroles"} {
			got := grants(rbacAPIGroup, resource, verb)
			switch {
			case verb == "bind" && resource == "clusterroles":
				if len(got) != 1 || !slices.Equal(sorted(got[0]), wantBind) {
					t.Errorf("bind on clusterroles is granted on %v, want exactly %v", got, wantBind)
				}
			case len(got) > 0:
				t.Errorf("%s on %s is granted (%v): the manager must not have it", verb, resource, got)
			}
		}
	}

	children := map[string]struct{ group, resource string }{
		kindRoleBinding:   {rbacAPIGroup, "rolebindings"},
		kindResourceQuota: {"", "resourcequotas"},
		kindLimitRange:    {"", "limitranges"},
		kindNetworkPolicy: {"networking.k8s.io", "networkpolicies"},
	}
	for kind, res := range children {
		want := sorted(childNames()[kind])
		for _, verb := range []string{"get", "patch", "delete", "update"} {
			got := grants(res.group, res.resource, verb)
			if verb == "update" {
				if len(got) > 0 {
					t.Errorf("update on %s is granted: server-side apply needs patch only", res.resource)
				}
				continue
			}
			if len(got) != 1 || !slices.Equal(sorted(got[0]), want) {
				t.Errorf("%s on %s is granted on %v, want exactly the names Orderly gives them: %v", verb, res.resource, got, want)
			}
		}
		for _, name := range want {
			if !isChildName(kind, name) {
				t.Errorf("%s %q is in the RBAC but not a name Orderly gives", kind, name)
			}
		}
	}
	for _, name := range []string{"orderly-tenant-binding-32", "orderly-tenant-binding-01", "orderly-tenant-binding--1", "someone-elses"} {
		if isChildName(kindRoleBinding, name) {
			t.Errorf("%q must not count as one of Orderly's RoleBindings", name)
		}
	}
}

// The RBAC names one binding per possible index of additionalRoleBindings: the CRD's
// MaxItems must be the code's.
func TestMaxAdditionalRoleBindingsMatchesTheCRD(t *testing.T) {
	raw, err := os.ReadFile("../../../../config/crd/bases/tenancy.orderly.dev_tenants.yaml")
	if err != nil {
		t.Fatal(err)
	}
	type props struct {
		MaxItems   *int64           `json:"maxItems"`
		Properties map[string]props `json:"properties"`
	}
	var crd struct {
		Spec struct {
			Versions []struct {
				Schema struct {
					OpenAPIV3Schema props `json:"openAPIV3Schema"`
				} `json:"schema"`
			} `json:"versions"`
		} `json:"spec"`
	}
	if err := yaml.Unmarshal(raw, &crd); err != nil {
		t.Fatal(err)
	}
	got := crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"].Properties["additionalRoleBindings"].MaxItems
	if got == nil || *got != maxAdditionalRoleBindings {
		t.Errorf("CRD maxItems of additionalRoleBindings = %v, want %d", got, maxAdditionalRoleBindings)
	}
}

func TestForbiddenBindingExplainsTheFix(t *testing.T) {
	rb := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "orderly-tenant-binding-0"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "team-reader"}}
	if msg := forbiddenBinding(rb, nil); msg != "" {
		t.Errorf("no error, message %q", msg)
	}
	err := apierrors.NewForbidden(schema.GroupResource{Group: rbacAPIGroup, Resource: "rolebindings"}, rb.Name, nil)
	msg := forbiddenBinding(rb, fmt.Errorf("creating RoleBinding: %w", err))
	for _, want := range []string{"team-reader", "bind", "--tenant-bindable-clusterroles"} {
		if !strings.Contains(msg, want) {
			t.Errorf("message %q does not mention %q", msg, want)
		}
	}
}
