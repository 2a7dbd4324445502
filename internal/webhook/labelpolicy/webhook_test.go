package labelpolicy

import (
	"context"
	"encoding/json"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// The webhook never fills anything in in the manager's namespace or a kube-*
// namespace, even when a configuration (an old one, or one edited by hand) sends it a
// request from there.
func TestHandlerLeavesProtectedNamespacesAlone(t *testing.T) {
	p := &policyv1alpha1.LabelPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "cost"},
		Spec:       policyv1alpha1.LabelPolicySpec{Label: "cost-center", Action: policyv1alpha1.ActionDefault, DefaultValue: "shared"},
	}
	h := &Handler{Reader: fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(p).Build(), Namespace: "orderly-system"}
	ctx := context.WithValue(context.Background(), policyNameKey{}, "cost")
	for ns, wantPatched := range map[string]bool{"shop": true, "orderly-system": false, "kube-system": false, "kube-flannel": false} {
		d := appsv1.Deployment{TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}, ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}
		raw, err := json.Marshal(d)
		if err != nil {
			t.Fatal(err)
		}
		resp := h.Handle(ctx, admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
			Operation: admissionv1.Create, Namespace: ns, Name: "web",
			Kind:   metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"},
			Object: runtime.RawExtension{Raw: raw},
		}})
		if !resp.Allowed {
			t.Errorf("namespace %s: refused: %v", ns, resp.Result)
		}
		if patched := len(resp.Patches) > 0; patched != wantPatched {
			t.Errorf("namespace %s: patched %v, want %v (%v)", ns, patched, wantPatched, resp.Patches)
		}
	}
}
