package tenant

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func q(s string) resource.Quantity { return resource.MustParse(s) }

func quantities(kv ...string) map[string]resource.Quantity {
	out := map[string]resource.Quantity{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[kv[i]] = q(kv[i+1])
	}
	return out
}

func TestShareHeadroom(t *testing.T) {
	tests := []struct {
		name      string
		total     string
		names     []string
		used      map[string]resource.Quantity
		caps      map[string]resource.Quantity
		wantLimit map[string]string
	}{
		{name: "nothing used: equal split", total: "4", names: []string{"b", "a"}, wantLimit: map[string]string{"a": "2", "b": "2"}},
		{name: "odd remainder goes to the first names", total: "5", names: []string{"c", "b", "a"}, wantLimit: map[string]string{"a": "2", "b": "2", "c": "1"}},
		{name: "used plus an equal share of what is left", total: "4", names: []string{"a", "b"}, used: quantities("a", "2"), wantLimit: map[string]string{"a": "3", "b": "1"}},
		{name: "one unit left goes to the first name", total: "4", names: []string{"a", "b"}, used: quantities("a", "3"), wantLimit: map[string]string{"a": "4", "b": "0"}},
		{name: "at the limit: every limit is its usage", total: "4", names: []string{"a", "b"}, used: quantities("a", "3", "b", "1"), wantLimit: map[string]string{"a": "3", "b": "1"}},
		{name: "over the limit: never below used", total: "4", names: []string{"a", "b"}, used: quantities("a", "5", "b", "1"), wantLimit: map[string]string{"a": "5", "b": "1"}},
		{name: "a cap below the equal share gives the rest to the others", total: "10", names: []string{"a", "b", "c"}, caps: quantities("a", "1", "b", "100", "c", "100"), wantLimit: map[string]string{"a": "1", "b": "5", "c": "4"}},
		{name: "a cap below used keeps the cap", total: "10", names: []string{"a", "b"}, used: quantities("a", "3"), caps: quantities("a", "2", "b", "2"), wantLimit: map[string]string{"a": "2", "b": "2"}},
		{name: "fractional cpu is shared in millicores", total: "1", names: []string{"a", "b", "c"}, used: quantities("a", "250m"), wantLimit: map[string]string{"a": "500m", "b": "250m", "c": "250m"}},
		{name: "memory keeps its binary format", total: "4Gi", names: []string{"a", "b"}, wantLimit: map[string]string{"a": "2Gi", "b": "2Gi"}},
		{name: "no namespaces", total: "4", names: nil, wantLimit: map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := shareHeadroom(q(tt.total), tt.names, tt.used, tt.caps)
			if len(got) != len(tt.wantLimit) {
				t.Fatalf("got %d limits, want %d: %v", len(got), len(tt.wantLimit), got)
			}
			var sum resource.Quantity
			for n, want := range tt.wantLimit {
				g, w := got[n], q(want)
				if g.Cmp(w) != 0 || g.String() != w.String() {
					t.Errorf("limit of %s = %s, want %s", n, g.String(), want)
				}
				sum.Add(g)
			}
			// Whatever the usage, the limits add up to the total when the tenant is
			// within it and no cap holds a share back.
			var used resource.Quantity
			for _, u := range tt.used {
				used.Add(u)
			}
			if len(tt.names) > 0 && tt.caps == nil && used.Cmp(q(tt.total)) <= 0 && sum.Cmp(q(tt.total)) != 0 {
				t.Errorf("limits add up to %s, want the total %s", sum.String(), tt.total)
			}
		})
	}
}

func TestShareHeadroomSumNeverExceedsTotal(t *testing.T) {
	for total := int64(0); total <= 12; total++ {
		for a := int64(0); a <= total; a++ {
			for b := int64(0); a+b <= total; b++ {
				got := shareHeadroom(*resource.NewQuantity(total, resource.DecimalSI), []string{"a", "b", "c"},
					map[string]resource.Quantity{"a": *resource.NewQuantity(a, resource.DecimalSI), "b": *resource.NewQuantity(b, resource.DecimalSI)}, nil)
				var sum int64
				for n, l := range got {
					sum += l.Value()
					if n == "a" && l.Value() < a || n == "b" && l.Value() < b {
						t.Fatalf("total %d used a=%d b=%d: limit of %s is %d, below its usage", total, a, b, n, l.Value())
					}
				}
				if sum != total {
					t.Fatalf("total %d used a=%d b=%d: limits add up to %d", total, a, b, sum)
				}
			}
		}
	}
}

func list(kv ...string) corev1.ResourceList {
	out := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		out[corev1.ResourceName(kv[i])] = q(kv[i+1])
	}
	return out
}

func TestPlanQuotas(t *testing.T) {
	total := &tenancyv1alpha1.TenantTotalQuota{Hard: list("pods", "4")}
	tests := []struct {
		name     string
		perNS    corev1.ResourceList
		observed []observedQuota
		want     map[string]string // namespace -> pods limit
	}{
		{
			name:     "new quotas get their share at once",
			observed: []observedQuota{{name: "a"}, {name: "b"}},
			want:     map[string]string{"a": "2", "b": "2"},
		},
		{
			name: "usage in a: b is lowered at once, a is not raised yet",
			observed: []observedQuota{
				{name: "a", exists: true, spec: list("pods", "2"), status: list("pods", "2"), used: list("pods", "2")},
				{name: "b", exists: true, spec: list("pods", "2"), status: list("pods", "2")},
			},
			want: map[string]string{"a": "2", "b": "1"},
		},
		{
			name: "the lowered limit is not enforced yet: a waits",
			observed: []observedQuota{
				{name: "a", exists: true, spec: list("pods", "2"), status: list("pods", "2"), used: list("pods", "2")},
				{name: "b", exists: true, spec: list("pods", "1"), status: list("pods", "2")},
			},
			want: map[string]string{"a": "2", "b": "1"},
		},
		{
			name: "the lowered limit is enforced: a is raised",
			observed: []observedQuota{
				{name: "a", exists: true, spec: list("pods", "2"), status: list("pods", "2"), used: list("pods", "2")},
				{name: "b", exists: true, spec: list("pods", "1"), status: list("pods", "1")},
			},
			want: map[string]string{"a": "3", "b": "1"},
		},
		{
			// b admitted a pod against its old enforced limit before the lowered one
			// was enforced: nothing is left for a, and b's raise to what it uses
			// waits until its quota is synced.
			name: "usage in b grew meanwhile: a gets nothing more",
			observed: []observedQuota{
				{name: "a", exists: true, spec: list("pods", "2"), status: list("pods", "2"), used: list("pods", "2")},
				{name: "b", exists: true, spec: list("pods", "1"), status: list("pods", "2"), used: list("pods", "2")},
			},
			want: map[string]string{"a": "2", "b": "1"},
		},
		{
			name: "a quota without status yet holds raises back",
			observed: []observedQuota{
				{name: "a", exists: true, spec: list("pods", "1"), status: list("pods", "1")},
				{name: "b", exists: true, spec: list("pods", "1")},
			},
			want: map[string]string{"a": "1", "b": "1"},
		},
		{
			name:  "quota.hard caps the share",
			perNS: list("pods", "1"),
			observed: []observedQuota{
				{name: "a"}, {name: "b"},
			},
			want: map[string]string{"a": "1", "b": "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan := planQuotas(total, tt.perNS, tt.observed)
			for n, want := range tt.want {
				got := plan[n]["pods"]
				if got.Cmp(q(want)) != 0 {
					t.Errorf("pods of %s = %s, want %s", n, got.String(), want)
				}
			}
		})
	}
	if plan := planQuotas(nil, nil, []observedQuota{{name: "a"}}); len(plan["a"]) != 0 {
		t.Errorf("without totalQuota the plan sets %v, want nothing", plan["a"])
	}
}

// The sum of the enforced limits (status.hard) never exceeds the total when quotas
// move as the plan says and the quota controller copies spec to status in any order.
func TestPlanQuotasNeverRaisesBeforeLowersAreEnforced(t *testing.T) {
	total := &tenancyv1alpha1.TenantTotalQuota{Hard: list("pods", "4")}
	obs := []observedQuota{
		{name: "a", exists: true, spec: list("pods", "2"), status: list("pods", "2"), used: list("pods", "0")},
		{name: "b", exists: true, spec: list("pods", "2"), status: list("pods", "2"), used: list("pods", "0")},
	}
	enforcedSum := func() int64 {
		var s int64
		for _, o := range obs {
			st := o.status["pods"]
			u := o.used["pods"]
			s += max(st.Value(), u.Value())
		}
		return s
	}
	// Steps: admit a pod where the enforced limit allows (a first, then b), plan,
	// sync one quota; over and over.
	for step := range 40 {
		i := step % 2
		st, u := obs[i].status["pods"], obs[i].used["pods"]
		if u.Value() < st.Value() {
			obs[i].used = list("pods", resource.NewQuantity(u.Value()+1, resource.DecimalSI).String())
		}
		plan := planQuotas(total, nil, obs)
		for j := range obs {
			obs[j].spec = plan[obs[j].name]
		}
		// The quota controller syncs one quota (not necessarily the lowered one).
		k := (step / 2) % 2
		obs[k].status = obs[k].spec.DeepCopy()
		if s := enforcedSum(); s > 4 {
			t.Fatalf("step %d: enforced limits add up to %d, over the total 4: %+v", step, s, obs)
		}
	}
	var used int64
	for _, o := range obs {
		u := o.used["pods"]
		used += u.Value()
	}
	if used != 4 {
		t.Errorf("the tenant got to use %d pods, want all 4 of its total", used)
	}
}

func TestQuotaHard(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{Spec: tenancyv1alpha1.TenantSpec{
		Quota:      &tenancyv1alpha1.TenantQuota{Hard: list("pods", "3", "requests.cpu", "2")},
		TotalQuota: &tenancyv1alpha1.TenantTotalQuota{Hard: list("pods", "10", "requests.memory", "4Gi")},
	}}
	got := quotaHard(tn, list("pods", "5", "requests.memory", "1Gi"))
	want := list("pods", "3", "requests.cpu", "2", "requests.memory", "1Gi")
	if len(got) != len(want) {
		t.Fatalf("quotaHard = %v, want %v", got, want)
	}
	for r, w := range want {
		if g := got[r]; g.Cmp(w) != 0 {
			t.Errorf("%s = %s, want %s", r, g.String(), w.String())
		}
	}
	// A namespace the plan has not seen gets none of the total.
	if g := quotaHard(tn, nil)["requests.memory"]; !g.IsZero() {
		t.Errorf("unplanned namespace gets requests.memory %s, want 0", g.String())
	}
	if quotaHard(&tenancyv1alpha1.Tenant{}, nil) != nil {
		t.Errorf("a Tenant without quota or totalQuota wants a quota")
	}
}

func TestSetQuotaStatus(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{
		ObjectMeta: metav1.ObjectMeta{Generation: 2},
		Spec: tenancyv1alpha1.TenantSpec{
			Quota:      &tenancyv1alpha1.TenantQuota{Hard: list("requests.cpu", "2")},
			TotalQuota: &tenancyv1alpha1.TenantTotalQuota{Hard: list("pods", "4")},
		},
	}
	st := tenancyv1alpha1.TenantStatus{Namespaces: []tenancyv1alpha1.TenantNamespaceStatus{{Name: "a"}, {Name: "b"}, {Name: "c"}}}
	qs := quotaState{observed: map[string]observedQuota{
		"a": {name: "a", exists: true, spec: list("pods", "3", "requests.cpu", "2", "secrets", "9"), used: list("pods", "3", "requests.cpu", "500m", "secrets", "1")},
		"b": {name: "b", exists: true, spec: list("pods", "1", "requests.cpu", "2"), used: list("pods", "1")},
		"c": {name: "c"},
	}}
	setQuotaStatus(tn, &st, qs)
	a := st.Namespaces[0].Quota
	if a == nil || len(a.Hard) != 2 || len(a.Used) != 2 {
		t.Fatalf("namespace a's quota = %+v, want pods and requests.cpu only", a)
	}
	if u := a.Used["requests.cpu"]; u.Cmp(q("500m")) != 0 {
		t.Errorf("a uses requests.cpu %s, want 500m", u.String())
	}
	if st.Namespaces[2].Quota != nil {
		t.Errorf("namespace c has no quota yet, status says %+v", st.Namespaces[2].Quota)
	}
	if u := st.TotalQuota.Used["pods"]; u.Cmp(q("4")) != 0 {
		t.Errorf("total pods used = %s, want 4", u.String())
	}
	c := meta.FindStatusCondition(st.Conditions, tenancyv1alpha1.ConditionTotalQuotaAvailable)
	if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonTotalQuotaReached {
		t.Fatalf("condition = %+v, want False/%s", c, ReasonTotalQuotaReached)
	}

	qs.observed["a"] = observedQuota{name: "a", exists: true, spec: list("pods", "3"), used: list("pods", "1")}
	setQuotaStatus(tn, &st, qs)
	if c := meta.FindStatusCondition(st.Conditions, tenancyv1alpha1.ConditionTotalQuotaAvailable); c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("with 2 of 4 pods used the condition is %+v, want True", c)
	}

	tn.Spec.TotalQuota = nil
	setQuotaStatus(tn, &st, qs)
	if st.TotalQuota != nil || meta.FindStatusCondition(st.Conditions, tenancyv1alpha1.ConditionTotalQuotaAvailable) != nil {
		t.Errorf("without totalQuota status still reports it: %+v", st)
	}
}

func TestChildMetadataKeepsQuotaUsageBounded(t *testing.T) {
	in := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: quotaName, Namespace: "a", Annotations: map[string]string{"big": "x"}},
		Spec:       corev1.ResourceQuotaSpec{Hard: list("pods", "2"), Scopes: []corev1.ResourceQuotaScope{corev1.ResourceQuotaScopeBestEffort}},
		Status:     corev1.ResourceQuotaStatus{Hard: list("pods", "2"), Used: list("pods", "1")},
	}
	for i := range 100 {
		in.Status.Used[corev1.ResourceName("zz/x"+resource.NewQuantity(int64(i), resource.DecimalSI).String())] = q("1")
	}
	out, err := childMetadata(in)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.ResourceQuota)
	if got.Annotations["big"] != "" || len(got.Spec.Scopes) != 0 {
		t.Errorf("the cached quota keeps more than limits and usage: %+v", got)
	}
	if u := got.Status.Used["pods"]; u.Cmp(q("1")) != 0 || len(got.Status.Used) != quotaCacheResources {
		t.Errorf("cached used = %d entries (pods %s), want %d with pods 1", len(got.Status.Used), u.String(), quotaCacheResources)
	}
	if h := got.Spec.Hard["pods"]; h.Cmp(q("2")) != 0 {
		t.Errorf("cached spec.hard pods = %s, want 2", h.String())
	}
}
