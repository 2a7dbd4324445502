package tenant

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
)

func TestClaimedByUIDNotByName(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "uid-now"}}
	ns := func(labels, annotations map[string]string) *corev1.Namespace {
		return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels, Annotations: annotations}}
	}
	tests := []struct {
		name      string
		ns        *corev1.Namespace
		wantClaim bool
		wantOwned bool
	}{
		{"records this Tenant's UID", ns(map[string]string{tenancyv1alpha1.TenantLabel: "team"}, map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: "uid-now"}), true, true},
		{"lost its label, still this Tenant's", ns(nil, map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: "uid-now"}), true, true},
		{"an earlier Tenant of the same name", ns(map[string]string{tenancyv1alpha1.TenantLabel: "team"}, map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: "uid-before"}), false, false},
		{"labelled by hand, no UID", ns(map[string]string{tenancyv1alpha1.TenantLabel: "team"}, nil), false, false},
		{"annotated for adoption by this Tenant", ns(nil, map[string]string{tenancyv1alpha1.AdoptAnnotation: "team"}), true, false},
		{"annotated for adoption by another", ns(nil, map[string]string{tenancyv1alpha1.AdoptAnnotation: "other"}), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := claimedBy(tt.ns, tn); got != tt.wantClaim {
				t.Errorf("claimedBy = %v, want %v", got, tt.wantClaim)
			}
			if got := ownedBy(tt.ns, tn); got != tt.wantOwned {
				t.Errorf("ownedBy = %v, want %v", got, tt.wantOwned)
			}
		})
	}
	if ownedBy(ns(nil, map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: ""}), &tenancyv1alpha1.Tenant{}) {
		t.Errorf("a Tenant without a UID owns a namespace recording none")
	}
	msg := conflictMessage(ns(map[string]string{tenancyv1alpha1.TenantLabel: "team"}, map[string]string{tenancyv1alpha1.OwnerUIDAnnotation: "uid-before"}), tn)
	if !strings.Contains(msg, "an earlier Tenant named") || !strings.Contains(msg, tenancyv1alpha1.AdoptAnnotation+"=team") {
		t.Errorf("conflict message %q does not explain the earlier Tenant and the way out", msg)
	}
}

func TestTenantMaySetNamespaceMetadata(t *testing.T) {
	labels := []struct {
		key, value string
		want       bool
	}{
		{"environment", "dev", true},
		{"example.com/team", "payments", true},
		{"kubernetes.io.example.com/x", "y", true},
		{"notorderly.dev/x", "y", true},
		{tenancyv1alpha1.TenantLabel, "other", false},
		{tenancyv1alpha1.CostCenterLabel, "cc", false},
		{"tenancy.orderly.dev/anything", "x", false},
		{"orderly.dev/aggregate-to-tenant-admin", "true", false},
		{"app.kubernetes.io/managed-by", "orderly", false},
		{"kubernetes.io/metadata.name", "other-ns", false},
		{"node-role.kubernetes.io/control-plane", "", false},
		{"k8s.io/x", "y", false},
		{"sub.k8s.io/x", "y", false},
		{"pod-security.kubernetes.io/enforce", "privileged", false},
		{"pod-security.kubernetes.io/enforce", "baseline", false},
		{"pod-security.kubernetes.io/enforce-version", "v1.20", false},
		{"pod-security.kubernetes.io/enforce", "restricted", true},
		{"pod-security.kubernetes.io/warn", "restricted", true},
		{"pod-security.kubernetes.io/audit", "restricted", true},
	}
	for _, tt := range labels {
		if got := tenantMaySetLabel(tt.key, tt.value); got != tt.want {
			t.Errorf("label %s=%s allowed = %v, want %v", tt.key, tt.value, got, tt.want)
		}
	}
	annotations := []struct {
		key  string
		want bool
	}{
		{"team.example.com/contact", true},
		{"description", true},
		{tenancyv1alpha1.OriginAnnotation, false},
		{tenancyv1alpha1.AdoptAnnotation, false},
		{tenancyv1alpha1.OwnerUIDAnnotation, false},
		{legacyManagedKeysAnnotation, false},
		{"scheduler.alpha.kubernetes.io/node-selector", false},
		{"scheduler.alpha.kubernetes.io/defaultTolerations", false},
	}
	for _, tt := range annotations {
		if got := tenantMaySetAnnotation(tt.key); got != tt.want {
			t.Errorf("annotation %s allowed = %v, want %v", tt.key, got, tt.want)
		}
	}
}

// A Tenant stored before the API refused reserved keys still cannot set them.
func TestDesiredNamespaceIgnoresReservedKeys(t *testing.T) {
	tn := &tenancyv1alpha1.Tenant{ObjectMeta: metav1.ObjectMeta{Name: "team", UID: "u1"}}
	spec := &tenancyv1alpha1.TenantNamespace{
		Name: "ns",
		Labels: map[string]string{
			"environment":                        "dev",
			"pod-security.kubernetes.io/enforce": "privileged",
			"pod-security.kubernetes.io/warn":    "restricted",
			"tenancy.orderly.dev/tenant":         "other",
		},
		Annotations: map[string]string{
			"note":                                        "kept",
			tenancyv1alpha1.OriginAnnotation:              tenancyv1alpha1.OriginCreated,
			tenancyv1alpha1.AdoptAnnotation:               "other",
			"scheduler.alpha.kubernetes.io/node-selector": "node-role.kubernetes.io/control-plane=",
		},
	}
	adopted := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Annotations: map[string]string{
		tenancyv1alpha1.OwnerUIDAnnotation: "u1", tenancyv1alpha1.OriginAnnotation: tenancyv1alpha1.OriginAdopted,
	}}}
	got := desiredNamespace(tn, spec, adopted)
	wantLabels := map[string]string{"environment": "dev", "pod-security.kubernetes.io/warn": "restricted", tenancyv1alpha1.TenantLabel: "team"}
	if len(got.Labels) != len(wantLabels) {
		t.Errorf("labels = %v, want %v", got.Labels, wantLabels)
	}
	for k, v := range wantLabels {
		if got.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, got.Labels[k], v)
		}
	}
	wantAnnotations := map[string]string{"note": "kept", tenancyv1alpha1.OwnerUIDAnnotation: "u1", tenancyv1alpha1.OriginAnnotation: tenancyv1alpha1.OriginAdopted}
	if len(got.Annotations) != len(wantAnnotations) {
		t.Errorf("annotations = %v, want %v", got.Annotations, wantAnnotations)
	}
	for k, v := range wantAnnotations {
		if got.Annotations[k] != v {
			t.Errorf("annotation %s = %q, want %q", k, got.Annotations[k], v)
		}
	}
}

func TestReservedNamespaces(t *testing.T) {
	r := &Reconciler{ManagerNamespace: "orderly-system"}
	for name, want := range map[string]bool{"kube-system": true, "kube-public": true, "orderly-system": true, "payments-dev": false, "kubernetes": false} {
		if got := r.reserved(name) != ""; got != want {
			t.Errorf("reserved(%q) = %v, want %v", name, got, want)
		}
	}
	if (&Reconciler{}).reserved("") != "" {
		t.Errorf("no manager namespace configured: the empty name is not reserved")
	}
}
