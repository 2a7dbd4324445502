package labelpolicy

import (
	"fmt"
	"regexp"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func tenant(name, uid, costCenter string) tenancyv1alpha1.Tenant {
	return tenancyv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(uid)},
		Spec:       tenancyv1alpha1.TenantSpec{CostCenter: costCenter},
	}
}

func tenantNS(name, tenantName, uid string, labels map[string]string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}, Annotations: map[string]string{}}}
	for k, v := range labels {
		ns.Labels[k] = v
	}
	if tenantName != "" {
		ns.Labels[tenancyv1alpha1.TenantLabel] = tenantName
	}
	if uid != "" {
		ns.Annotations[tenancyv1alpha1.OwnerUIDAnnotation] = uid
	}
	return ns
}

func TestTenantDefaults(t *testing.T) {
	got, total := tenantDefaults([]tenancyv1alpha1.Tenant{
		tenant("shop", "u-shop", "cc-shop"),
		tenant("free", "u-free", ""), // no costCenter: nothing to default to
		tenant("bank", "u-bank", "cc-bank"),
		tenant("new", "", "cc-new"), // no UID yet: no namespace can prove it belongs to it
	})
	want := []TenantDefault{{"bank", "u-bank", "cc-bank"}, {"shop", "u-shop", "cc-shop"}}
	if !equality.Semantic.DeepEqual(got, want) || total != 2 {
		t.Errorf("tenantDefaults = %v, %d; want %v, 2", got, total, want)
	}

	if idx := TenantIndex([]tenancyv1alpha1.Tenant{tenant("shop", "u-shop", "cc-shop"), tenant("free", "u-free", "")}); len(idx) != 1 || idx["shop"].CostCenter != "cc-shop" {
		t.Errorf("TenantIndex = %v; want shop only", idx)
	}

	many := make([]tenancyv1alpha1.Tenant, 0, maxTenantDefaults+5)
	for i := range maxTenantDefaults + 5 {
		many = append(many, tenant(fmt.Sprintf("t%05d", i), fmt.Sprintf("u%d", i), "cc"))
	}
	got, total = tenantDefaults(many)
	if len(got) != maxTenantDefaults || total != maxTenantDefaults+5 {
		t.Fatalf("tenantDefaults kept %d of %d; want %d of %d", len(got), total, maxTenantDefaults, maxTenantDefaults+5)
	}
	if got[len(got)-1].Tenant != fmt.Sprintf("t%05d", maxTenantDefaults-1) {
		t.Errorf("the last kept is %s; want the first %d by name", got[len(got)-1].Tenant, maxTenantDefaults)
	}
}

func TestTenantCostCenterAndDrift(t *testing.T) {
	tenants := tenantIndex([]TenantDefault{{"shop", "u-shop", "cc-shop"}})
	cases := []struct {
		name      string
		ns        *corev1.Namespace
		wantCC    string
		wantDrift *policyv1alpha1.TenantDrift
	}{
		{"label removed by hand", tenantNS("shop-a", "shop", "u-shop", nil),
			"cc-shop", &policyv1alpha1.TenantDrift{Namespace: "shop-a", Tenant: "shop", CostCenter: "cc-shop"}},
		{"label changed by hand", tenantNS("shop-b", "shop", "u-shop", map[string]string{"cost-center": "cc-other"}),
			"cc-shop", &policyv1alpha1.TenantDrift{Namespace: "shop-b", Tenant: "shop", CostCenter: "cc-shop", Value: "cc-other"}},
		{"in sync", tenantNS("shop-c", "shop", "u-shop", map[string]string{"cost-center": "cc-shop"}), "cc-shop", nil},
		{"an earlier Tenant of the same name", tenantNS("shop-d", "shop", "u-old", nil), "", nil},
		{"tenant label without the claim", tenantNS("shop-e", "shop", "", nil), "", nil},
		{"unknown tenant", tenantNS("x", "other", "u-shop", nil), "", nil},
		{"no tenant", tenantNS("y", "", "", map[string]string{"cost-center": "cc-y"}), "", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tenantCostCenter(tc.ns.Labels, tc.ns.Annotations, tenants); got != tc.wantCC {
				t.Errorf("tenantCostCenter = %q; want %q", got, tc.wantCC)
			}
			if got := driftOf(tc.ns, tenants); !equality.Semantic.DeepEqual(got, tc.wantDrift) {
				t.Errorf("driftOf = %+v; want %+v", got, tc.wantDrift)
			}
		})
	}
}

func TestFirstDriftIsBoundedAndSorted(t *testing.T) {
	var all []policyv1alpha1.TenantDrift
	for i := 30; i > 0; i-- {
		all = append(all, policyv1alpha1.TenantDrift{Namespace: fmt.Sprintf("ns-%02d", i)})
	}
	got := firstDrift(all)
	if len(got) != maxTenantDrift || got[0].Namespace != "ns-01" || got[maxTenantDrift-1].Namespace != "ns-20" {
		t.Errorf("firstDrift = %v", got)
	}
	if firstDrift(nil) != nil {
		t.Error("firstDrift(nil) is not nil")
	}
}

func TestMutateDefaultFromTenant(t *testing.T) {
	fromTenant := func(p *policyv1alpha1.LabelPolicy) { p.Spec.DefaultFromTenant = true; p.Spec.DefaultValue = "shared" }
	tenants := tenantIndex([]TenantDefault{{"shop", "u-shop", "cc-shop"}})
	shopNS := tenantNS("shop-a", "shop", "u-shop", map[string]string{"cost-center": "drifted"})
	cases := []struct {
		name    string
		p       *policyv1alpha1.LabelPolicy
		ns      *corev1.Namespace
		own     map[string]any
		wantOwn string
	}{
		{"the Tenant before the namespace label", testPolicy(policyv1alpha1.ActionDefault, fromTenant), shopNS, nil, "cc-shop"},
		{"the Tenant when the namespace label was removed", testPolicy(policyv1alpha1.ActionDefault, fromTenant), tenantNS("shop-b", "shop", "u-shop", nil), nil, "cc-shop"},
		{"the workload's own label first", testPolicy(policyv1alpha1.ActionDefault, fromTenant), shopNS, map[string]any{"cost-center": "mine"}, "mine"},
		{"not the Tenant's namespace: its own label", testPolicy(policyv1alpha1.ActionDefault, fromTenant), tenantNS("shop-c", "shop", "u-old", map[string]string{"cost-center": "ns-cc"}), nil, "ns-cc"},
		{"no tenant: defaultValue", testPolicy(policyv1alpha1.ActionDefault, fromTenant), tenantNS("plain", "", "", nil), nil, "shared"},
		{"without defaultFromTenant: the namespace label", testPolicy(policyv1alpha1.ActionDefault), shopNS, nil, "drifted"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			obj := deploymentObject(tc.own, nil)
			Mutate(tc.p, MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: obj,
				NamespaceLabels: tc.ns.Labels, NamespaceAnnotations: tc.ns.Annotations, Tenants: tenants})
			if got := getString(obj, "metadata", "labels", "cost-center"); got != tc.wantOwn {
				t.Errorf("label = %q; want %q", got, tc.wantOwn)
			}
		})
	}
}

func TestRemediationPrefersTheTenant(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionAudit, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.DefaultFromTenant = true
		p.Spec.Remediate = policyv1alpha1.RemediateLabelOnly
		p.Spec.AllowedPattern = "cc-.*"
	})
	w := workload{kind: "Deployment", namespace: "shop-a", name: "web"}
	ns := map[string]string{"cost-center": "cc-ns"}
	cases := []struct{ tenantCC, wantFix string }{
		{"cc-shop", "cc-shop"},
		{"", "cc-ns"},
		{"not-allowed", "cc-ns"}, // never writes a value the policy would refuse
	}
	for _, tc := range cases {
		v, fix := verdictFrom(p, mustPattern(t, p), nil, w, ns, tc.tenantCC)
		if v == nil || fix != tc.wantFix {
			t.Errorf("tenant %q: violation %v, fix %q; want a violation fixed with %q", tc.tenantCC, v, fix, tc.wantFix)
		}
	}
}

func mustPattern(t *testing.T, p *policyv1alpha1.LabelPolicy) *regexp.Regexp {
	t.Helper()
	re, err := CompilePattern(p)
	if err != nil {
		t.Fatal(err)
	}
	return re
}

func TestCompileDefaultFromTenant(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDefault, func(p *policyv1alpha1.LabelPolicy) { p.Spec.DefaultFromTenant = true })
	opts := Options{TenantDefaults: []TenantDefault{{"bank", "u-bank", "cc-bank"}, {`q"t`, "u-q", "cc-q"}}}
	c := CompileWith(p, policyv1alpha1.AdmissionModeNative, nil, "", opts)
	vars := c.MAP.Spec.Variables
	if len(vars) != 3 || vars[0].Name != "tenants" || vars[1].Name != "tenantCostCenter" || vars[2].Name != "value" {
		t.Fatalf("variables = %+v; want tenants, tenantCostCenter, value (in the order they refer to each other)", vars)
	}
	if want := `{"bank": ["u-bank", "cc-bank"], "q\"t": ["u-q", "cc-q"]}`; vars[0].Expression != want {
		t.Errorf("tenants = %s; want %s", vars[0].Expression, want)
	}
	for _, want := range []string{`namespaceObject.metadata.annotations["tenancy.orderly.dev/owner-uid"] == variables.tenants[`, `namespaceObject.metadata.labels["tenancy.orderly.dev/tenant"]`} {
		if !strings.Contains(vars[1].Expression, want) {
			t.Errorf("tenantCostCenter %s lacks %s", vars[1].Expression, want)
		}
	}
	// The Tenant comes after the workload's own label and before the namespace's.
	v := vars[2].Expression
	if i, j := strings.Index(v, "variables.tenantCostCenter"), strings.Index(v, "namespaceObject.metadata.labels[\"cost-center\"]"); i < 0 || j < 0 || i > j {
		t.Errorf("value = %s; want the Tenant's costCenter before the namespace label", v)
	}

	for name, pol := range map[string]*policyv1alpha1.LabelPolicy{
		"no Tenants":           p,
		"no defaultFromTenant": testPolicy(policyv1alpha1.ActionDefault),
		"Deny, propagating": testPolicy(policyv1alpha1.ActionDeny, func(p *policyv1alpha1.LabelPolicy) {
			p.Spec.DefaultFromTenant = true
			p.Spec.PropagateToPodTemplate = true
		}),
	} {
		o := opts
		if name == "no Tenants" {
			o = Options{}
		}
		c := CompileWith(pol, policyv1alpha1.AdmissionModeNative, nil, "", o)
		if len(c.MAP.Spec.Variables) != 1 || c.MAP.Spec.Variables[0].Name != "value" || strings.Contains(c.MAP.Spec.Variables[0].Expression, "tenant") {
			t.Errorf("%s: variables = %+v; want only value, without Tenants", name, c.MAP.Spec.Variables)
		}
	}
}

func TestStatusTenantDrift(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDefault, func(p *policyv1alpha1.LabelPolicy) { p.Spec.DefaultFromTenant = true })
	drift := []policyv1alpha1.TenantDrift{{Namespace: "shop-a", Tenant: "shop", CostCenter: "cc-shop"}}
	st := computeStatus(p, observation{mode: policyv1alpha1.AdmissionModeNative, tenantDefaults: 1000, tenantDefaultsTotal: 1200,
		audit: &auditResult{drift: drift, driftCount: 7, tenantsRead: true}})
	if !equality.Semantic.DeepEqual(st.TenantDrift, drift) || st.TenantDriftNamespaces != 7 || st.TenantDefaults != 1000 {
		t.Errorf("status = %+v %d %d", st.TenantDrift, st.TenantDriftNamespaces, st.TenantDefaults)
	}
	c := meta.FindStatusCondition(st.Conditions, policyv1alpha1.ConditionDefaultingAvailable)
	if c == nil || !strings.Contains(c.Message, "1000 of 1200 Tenants") {
		t.Errorf("DefaultingAvailable = %+v; want it to say that Tenants were left out", c)
	}

	// Switched off: the drift of an earlier audit is not left behind.
	p.Spec.DefaultFromTenant = false
	p.Status = st
	st = computeStatus(p, observation{mode: policyv1alpha1.AdmissionModeNative})
	if st.TenantDrift != nil || st.TenantDriftNamespaces != 0 || st.TenantDefaults != 0 {
		t.Errorf("without defaultFromTenant: %+v %d %d", st.TenantDrift, st.TenantDriftNamespaces, st.TenantDefaults)
	}
}
