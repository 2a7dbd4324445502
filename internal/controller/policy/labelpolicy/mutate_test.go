package labelpolicy

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

func deploymentObject(own, tmpl map[string]any) map[string]any {
	md := map[string]any{"name": "web"}
	if own != nil {
		md["labels"] = own
	}
	tm := map[string]any{}
	if tmpl != nil {
		tm["labels"] = tmpl
	}
	return map[string]any{"metadata": md, "spec": map[string]any{"replicas": int64(1), "template": map[string]any{"metadata": tm}}}
}

func TestMutate(t *testing.T) {
	withDefault := func(p *policyv1alpha1.LabelPolicy) { p.Spec.DefaultValue = "shared" }
	propagate := func(p *policyv1alpha1.LabelPolicy) { p.Spec.PropagateToPodTemplate = true }
	cases := []struct {
		name        string
		p           *policyv1alpha1.LabelPolicy
		req         MutationRequest
		wantChanged bool
		wantOwn     string
		wantTmpl    string
	}{
		{"default from namespace", testPolicy(policyv1alpha1.ActionDefault, withDefault),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(nil, nil), NamespaceLabels: map[string]string{"cost-center": "ns-cc"}},
			true, "ns-cc", ""},
		{"default value when the namespace has none", testPolicy(policyv1alpha1.ActionDefault, withDefault),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(map[string]any{"app": "web"}, nil)},
			true, "shared", ""},
		{"own label kept", testPolicy(policyv1alpha1.ActionDefault, withDefault),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(map[string]any{"cost-center": "mine"}, nil), NamespaceLabels: map[string]string{"cost-center": "ns-cc"}},
			false, "mine", ""},
		{"nothing to fill in", testPolicy(policyv1alpha1.ActionDefault),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(nil, nil)},
			false, "", ""},
		{"deny fills nothing in", testPolicy(policyv1alpha1.ActionDeny, withDefault),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(nil, nil), NamespaceLabels: map[string]string{"cost-center": "ns-cc"}},
			false, "", ""},
		{"a trusted controller's pods are left alone", testPolicy(policyv1alpha1.ActionDefault, withDefault),
			MutationRequest{Kind: policyv1alpha1.KindPod, Object: map[string]any{"metadata": map[string]any{"ownerReferences": []any{
				map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u", "controller": true}}}}},
			false, "", ""},
		{"a pod owned by anything else is defaulted like a bare pod", testPolicy(policyv1alpha1.ActionDefault, withDefault),
			MutationRequest{Kind: policyv1alpha1.KindPod, Object: map[string]any{"metadata": map[string]any{"ownerReferences": []any{
				map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "name": "mine", "uid": "u", "controller": true},
				map[string]any{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-1", "uid": "u"}}}}},
			true, "shared", ""},
		{"bare pod defaulted", testPolicy(policyv1alpha1.ActionDefault, withDefault, propagate),
			MutationRequest{Kind: policyv1alpha1.KindPod, Object: map[string]any{"metadata": map[string]any{"name": "p"}}},
			true, "shared", ""},
		{"propagated on create", testPolicy(policyv1alpha1.ActionDefault, withDefault, propagate),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(nil, map[string]any{"app": "web"})},
			true, "shared", "shared"},
		{"deny propagates the workload's own label", testPolicy(policyv1alpha1.ActionDeny, propagate),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(map[string]any{"cost-center": "mine"}, nil)},
			true, "mine", "mine"},
		{"template's own label kept", testPolicy(policyv1alpha1.ActionDeny, propagate),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(map[string]any{"cost-center": "mine"}, map[string]any{"cost-center": "tmpl"})},
			false, "mine", "tmpl"},
		{"update leaving the template alone does not touch it", testPolicy(policyv1alpha1.ActionDeny, propagate),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Update: true,
				Object: deploymentObject(map[string]any{"cost-center": "mine"}, nil), OldObject: deploymentObject(map[string]any{"cost-center": "mine"}, nil)},
			false, "mine", ""},
		{"update changing the template labels it", testPolicy(policyv1alpha1.ActionDeny, propagate),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Update: true,
				Object: deploymentObject(map[string]any{"cost-center": "mine"}, map[string]any{"v": "2"}), OldObject: deploymentObject(map[string]any{"cost-center": "mine"}, nil)},
			true, "mine", "mine"},
		{"kinds not matched are not propagated", testPolicy(policyv1alpha1.ActionDeny, propagate, func(p *policyv1alpha1.LabelPolicy) {
			p.Spec.Match.Kinds = []policyv1alpha1.Kind{policyv1alpha1.KindJob}
		}),
			MutationRequest{Kind: policyv1alpha1.KindDeployment, Object: deploymentObject(map[string]any{"cost-center": "mine"}, nil)},
			false, "mine", ""},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			changed := Mutate(tc.p, tc.req)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			own, _, _ := unstructured.NestedString(tc.req.Object, "metadata", "labels", "cost-center")
			tmpl, _, _ := unstructured.NestedString(tc.req.Object, "spec", "template", "metadata", "labels", "cost-center")
			if own != tc.wantOwn || tmpl != tc.wantTmpl {
				t.Errorf("labels: own %q, template %q; want %q, %q", own, tmpl, tc.wantOwn, tc.wantTmpl)
			}
		})
	}
}

func TestMutateCronJobTemplate(t *testing.T) {
	p := testPolicy(policyv1alpha1.ActionDefault, func(p *policyv1alpha1.LabelPolicy) {
		p.Spec.DefaultValue = "shared"
		p.Spec.PropagateToPodTemplate = true
	})
	obj := map[string]any{"metadata": map[string]any{"name": "nightly"}, "spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": map[string]any{"spec": map[string]any{}}}}}}
	if !Mutate(p, MutationRequest{Kind: policyv1alpha1.KindCronJob, Object: obj}) {
		t.Fatal("nothing changed")
	}
	got, _, _ := unstructured.NestedString(obj, "spec", "jobTemplate", "spec", "template", "metadata", "labels", "cost-center")
	if got != "shared" {
		t.Errorf("CronJob pod template label = %q", got)
	}
}
