package tenant

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func TestBuildChildren(t *testing.T) {
	base := func() *tenancyv1alpha1.Tenant {
		return &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	}
	tests := []struct {
		name             string
		tenant           func() *tenancyv1alpha1.Tenant
		wantBindings     []string
		wantQuota        bool
		wantLimitRange   bool
		wantNetPolPeers  int // 0 means no NetworkPolicy
		wantOwnerSubject *rbacv1.Subject
	}{
		{
			name:            "bare tenant gets only the isolation policy",
			tenant:          base,
			wantNetPolPeers: 1,
		},
		{
			name: "isolation None adds no policy",
			tenant: func() *tenancyv1alpha1.Tenant {
				t := base()
				t.Spec.NetworkPolicy.Isolation = tenancyv1alpha1.IsolationNone
				t.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{{}}
				return t
			},
		},
		{
			name: "everything",
			tenant: func() *tenancyv1alpha1.Tenant {
				t := base()
				t.Spec.Owners = []rbacv1.Subject{{Kind: rbacv1.UserKind, Name: "ann"}}
				t.Spec.AdditionalRoleBindings = []tenancyv1alpha1.TenantRoleBinding{
					{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.GroupKind, Name: "g"}}},
					{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "ci", Namespace: "ci"}}},
				}
				t.Spec.Quota = &tenancyv1alpha1.TenantQuota{Hard: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}}
				t.Spec.LimitRange = &tenancyv1alpha1.TenantLimitRange{Default: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
				t.Spec.NetworkPolicy.AllowFrom = []tenancyv1alpha1.TenantNamespaceSelector{{MatchLabels: map[string]string{tenancyv1alpha1.NamespaceNameLabel: "b"}}, {MatchLabels: map[string]string{tenancyv1alpha1.TenantLabel: "d"}}}
				return t
			},
			wantBindings:     []string{ownersBindingName, extraBindingPrefix + "0", extraBindingPrefix + "1"},
			wantQuota:        true,
			wantLimitRange:   true,
			wantNetPolPeers:  3,
			wantOwnerSubject: &rbacv1.Subject{Kind: rbacv1.UserKind, APIGroup: rbacAPIGroup, Name: "ann"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := buildChildren(tt.tenant(), "ns1", nil)
			var names []string
			for _, rb := range d.roleBindings {
				names = append(names, rb.Name)
				if rb.Namespace != "ns1" || rb.Labels[tenancyv1alpha1.TenantLabel] != "team" {
					t.Errorf("binding %s: namespace %q labels %v", rb.Name, rb.Namespace, rb.Labels)
				}
			}
			if len(names) != len(tt.wantBindings) {
				t.Fatalf("bindings = %v, want %v", names, tt.wantBindings)
			}
			for i := range names {
				if names[i] != tt.wantBindings[i] {
					t.Errorf("binding %d = %s, want %s", i, names[i], tt.wantBindings[i])
				}
			}
			if tt.wantOwnerSubject != nil && d.roleBindings[0].Subjects[0] != *tt.wantOwnerSubject {
				t.Errorf("owner subject = %+v, want %+v", d.roleBindings[0].Subjects[0], *tt.wantOwnerSubject)
			}
			if (d.quota != nil) != tt.wantQuota {
				t.Errorf("quota present = %v, want %v", d.quota != nil, tt.wantQuota)
			}
			if (d.limitRange != nil) != tt.wantLimitRange {
				t.Errorf("limitRange present = %v, want %v", d.limitRange != nil, tt.wantLimitRange)
			}
			if tt.wantNetPolPeers == 0 {
				if d.networkPolicy != nil {
					t.Errorf("unexpected NetworkPolicy")
				}
				return
			}
			np := d.networkPolicy
			if np == nil {
				t.Fatalf("no NetworkPolicy")
			}
			if len(np.Spec.PolicyTypes) != 1 || np.Spec.PolicyTypes[0] != networkingv1.PolicyTypeIngress {
				t.Errorf("policy types = %v: only Ingress may be restricted, DNS egress must stay open", np.Spec.PolicyTypes)
			}
			if got := len(np.Spec.Ingress[0].From); got != tt.wantNetPolPeers {
				t.Errorf("peers = %d, want %d", got, tt.wantNetPolPeers)
			}
			if got := np.Spec.Ingress[0].From[0].NamespaceSelector.MatchLabels[tenancyv1alpha1.TenantLabel]; got != "team" {
				t.Errorf("first peer selects tenant %q, want team", got)
			}
		})
	}
}

func TestRoleBindingReplacedOnlyWhenRoleRefChanges(t *testing.T) {
	cur := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}}
	want := &rbacv1.RoleBinding{RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}}
	if !roleRefChanged(cur, want) {
		t.Fatalf("a new roleRef must replace the binding: roleRef is immutable")
	}
	want.RoleRef = cur.RoleRef
	want.Subjects = []rbacv1.Subject{{Kind: "User", Name: "x"}}
	if roleRefChanged(cur, want) {
		t.Fatalf("new subjects must be applied in place, not replace the binding")
	}
}

func TestBuildChildrenDefaultsRequestsLikeTheAPIServer(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team"}}
	tn.Spec.LimitRange = &tenancyv1alpha1.TenantLimitRange{
		Default:        corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("1Gi")},
		DefaultRequest: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}
	got := buildChildren(tn, "ns", nil).limitRange.Spec.Limits[0].DefaultRequest
	if got.Cpu().String() != "100m" {
		t.Errorf("explicit request changed: cpu %s, want 100m", got.Cpu())
	}
	if got.Memory().String() != "1Gi" {
		t.Errorf("missing request not defaulted to the limit: memory %s, want 1Gi", got.Memory())
	}
	if _, ok := tn.Spec.LimitRange.DefaultRequest[corev1.ResourceMemory]; ok {
		t.Errorf("buildChildren mutated the Tenant's spec")
	}
}
