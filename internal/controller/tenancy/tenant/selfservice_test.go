package tenant

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

// The owners' ClusterRole grants what self-service needs and nothing that reaches
// other namespaces or other Tenants: no list or watch, no wildcard, and every
// Tenant and delete rule narrowed by name.
func TestOwnerRoleGrantsNothingMore(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "payments"}}
	for _, tc := range []struct {
		name        string
		disabled    bool
		selfService []string
		wantRules   int
	}{
		{name: "without self-service: get on the Tenant only", disabled: true, wantRules: 1},
		{name: "no namespaces yet", wantRules: 3},
		{name: "two namespaces", selfService: []string{"payments-a", "payments-b"}, wantRules: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			role := ownerRole(tn, !tc.disabled, tc.selfService)
			if role.Name != "orderly-tenant:payments" {
				t.Errorf("name %q", role.Name)
			}
			if len(role.Rules) != tc.wantRules {
				t.Fatalf("rules %+v, want %d", role.Rules, tc.wantRules)
			}
			for _, r := range role.Rules {
				for _, v := range r.Verbs {
					if v == "*" || v == "list" || v == "watch" || v == "update" || v == "patch" || v == "escalate" || v == "bind" {
						t.Errorf("rule %+v grants %s", r, v)
					}
				}
				if slices.Contains(r.Resources, "*") || slices.Contains(r.APIGroups, "*") {
					t.Errorf("rule %+v has a wildcard", r)
				}
				if slices.Contains(r.Resources, "tenants") && !slices.Equal(r.ResourceNames, []string{"payments"}) {
					t.Errorf("rule %+v on tenants is not narrowed to the Tenant", r)
				}
				if slices.Contains(r.Verbs, "delete") && !slices.Equal(r.ResourceNames, tc.selfService) {
					t.Errorf("delete rule %+v is not narrowed to the self-service namespaces", r)
				}
			}
		})
	}
}

// Each Tenant's binding judges only the namespaces labelled with its name, against
// that Tenant, and denies when the Tenant is gone.
func TestSelfServiceBindingSelectsByTheTenantLabel(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "payments"}}
	b := selfServiceBinding(tn)
	if b.Name != "orderly-tenant-self-service-payments" || b.Spec.PolicyName != selfServicePolicyName {
		t.Errorf("binding %s of %s", b.Name, b.Spec.PolicyName)
	}
	if b.Spec.ParamRef == nil || b.Spec.ParamRef.Name != "payments" || b.Spec.ParamRef.Selector != nil {
		t.Errorf("paramRef %+v", b.Spec.ParamRef)
	}
	if got := b.Spec.MatchResources.ObjectSelector.MatchLabels; got[tenancyv1alpha1.TenantLabel] != "payments" || len(got) != 1 {
		t.Errorf("objectSelector %v", got)
	}
	if a := b.Spec.ParamRef.ParameterNotFoundAction; a == nil || *a != "Deny" {
		t.Errorf("parameterNotFoundAction %v", a)
	}
}

// The policy keeps the manager's namespace out of self-service names, and its rules
// on reserved metadata match the Tenant CRD's.
func TestSelfServicePolicyNamesTheManagerNamespace(t *testing.T) {
	p := selfServicePolicy("orderly-system")
	var all strings.Builder
	for _, v := range p.Spec.Validations {
		all.WriteString(v.Expression)
	}
	for _, want := range []string{`object.metadata.name != "orderly-system"`, `startsWith('kube-')`, reservedKeyCEL, "pod-security.kubernetes.io/enforce"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("validations do not contain %s", want)
		}
	}
	if p.Spec.ParamKind == nil || p.Spec.ParamKind.Kind != "Tenant" || p.Spec.ParamKind.APIVersion != "tenancy.orderly.dev/v1alpha1" {
		t.Errorf("paramKind %+v", p.Spec.ParamKind)
	}
}

func TestAdmittedSince(t *testing.T) {
	since := metav1.NewTime(time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name    string
		created time.Time
		since   *metav1.Time
		want    bool
	}{
		{"before the binding", since.Add(-time.Second), &since, false},
		{"in the same second", since.Time, &since, true},
		{"after", since.Add(time.Minute), &since, true},
		{"no binding", since.Add(time.Minute), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(tc.created)}}
			if got := admittedSince(ns, tc.since); got != tc.want {
				t.Errorf("admittedSince = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestAllowedSummary(t *testing.T) {
	for _, tc := range []struct {
		name    string
		allowed tenancyv1alpha1.TenantAllowed
		want    string
	}{
		{"empty", tenancyv1alpha1.TenantAllowed{}, "Nothing is restricted: every list of spec.allowed is empty"},
		{"two lists", tenancyv1alpha1.TenantAllowed{StorageClasses: []string{"fast"}, Registries: []string{"ghcr.io/acme/", "*.example.com/"}},
			"The tenant's workloads may use only: storage classes fast; registries ghcr.io/acme/, *.example.com/"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := allowedSummary(&tc.allowed); got != tc.want {
				t.Errorf("allowedSummary = %q, want %q", got, tc.want)
			}
		})
	}
}

// Each Tenant's allowed binding judges the writes in its namespaces only, against it.
func TestAllowedBindingSelectsTheTenantsNamespaces(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "payments"}}
	b := allowedBinding(tn)
	if b.Spec.ParamRef == nil || b.Spec.ParamRef.Name != "payments" || b.Spec.PolicyName != allowedPolicyName {
		t.Errorf("binding %+v", b.Spec)
	}
	if got := b.Spec.MatchResources.NamespaceSelector.MatchLabels; got[tenancyv1alpha1.TenantLabel] != "payments" || len(got) != 1 {
		t.Errorf("namespaceSelector %v", got)
	}
}
