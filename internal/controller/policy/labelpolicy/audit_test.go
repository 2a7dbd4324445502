package labelpolicy

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// The audit used to keep every violation of the cluster in memory and cut the list to
// 20 at the end; it now keeps the 20 it reports while it streams through the pages.
func TestTopViolationsHoldsOnlyWhatIsReported(t *testing.T) {
	var all []policyv1alpha1.Violation
	for i := range 5000 {
		all = append(all, policyv1alpha1.Violation{Kind: []string{"Deployment", "Job", "Pod"}[i%3], Namespace: fmt.Sprintf("ns-%03d", i%211), Name: fmt.Sprintf("w-%05d", i), Reason: policyv1alpha1.ViolationMissing})
	}
	rand.Shuffle(len(all), func(i, j int) { all[i], all[j] = all[j], all[i] })
	top := newTopViolations()
	for _, v := range all {
		top.add(v)
	}
	if top.peak > maxTopViolations {
		t.Errorf("held %d violations at once, want at most %d", top.peak, maxTopViolations)
	}
	want := slices.SortedFunc(slices.Values(all), violationOrder)[:maxTopViolations]
	if got := top.sorted(); !slices.Equal(got, want) {
		t.Errorf("top = %v\nwant %v", got, want)
	}

	few := newTopViolations()
	for _, v := range all[:3] {
		few.add(v)
	}
	if got := few.sorted(); !slices.Equal(got, slices.SortedFunc(slices.Values(all[:3]), violationOrder)) {
		t.Errorf("with fewer than 20: %v", got)
	}
	if got := newTopViolations().sorted(); got != nil {
		t.Errorf("no violations: %v, want nil", got)
	}
}

// An audit of many violating workloads reports them all in its counts, lists the
// first 20 in order, holds no more than 20 at any time, and never looks at the
// protected namespaces.
func TestAuditKeepsOnlyWhatIsReported(t *testing.T) {
	const managerNS = "orderly-system"
	objs := []client.Object{}
	for _, ns := range []string{"a", "b", "c", managerNS, "kube-system", "kube-addons"} {
		objs = append(objs, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
	}
	perNS := 150
	for _, ns := range []string{"c", "a", "b", managerNS, "kube-system", "kube-addons"} {
		for i := range perNS {
			objs = append(objs, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("d-%03d", perNS-i)}})
		}
	}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(objs...).Build()
	r := &Reconciler{Client: c, APIReader: c, Namespace: managerNS}
	p := testPolicy(policyv1alpha1.ActionAudit, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.Match.Kinds = []policyv1alpha1.Kind{policyv1alpha1.KindDeployment}
	})

	res, err := r.audit(context.Background(), p, nil, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.violations != int32(3*perNS) {
		t.Errorf("violations = %d, want %d (the protected namespaces are not audited)", res.violations, 3*perNS)
	}
	for _, ns := range []string{managerNS, "kube-system", "kube-addons"} {
		if n, ok := res.byNamespace[ns]; ok {
			t.Errorf("namespace %s audited: %d violations", ns, n)
		}
	}
	if res.retainedPeak > maxTopViolations {
		t.Errorf("the audit held %d violations at once, want at most %d", res.retainedPeak, maxTopViolations)
	}
	if len(res.top) != maxTopViolations {
		t.Fatalf("%d top violations, want %d", len(res.top), maxTopViolations)
	}
	for i, v := range res.top {
		want := policyv1alpha1.Violation{Kind: "Deployment", Namespace: "a", Name: fmt.Sprintf("d-%03d", i+1), Reason: policyv1alpha1.ViolationMissing}
		if v != want {
			t.Errorf("top[%d] = %+v, want %+v", i, v, want)
		}
	}
}
