package labelpolicy

import (
	"encoding/json"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// FuzzMutate fills a policy's label in on any object, as the webhook does where the
// API server has no MutatingAdmissionPolicy. Properties: no panic; nothing changes
// but the policy's label on the object and its pod template; a value filled in is the
// object's own, the namespace's or the default; and Mutate says it changed something
// exactly when it did.
func FuzzMutate(f *testing.F) {
	dep, _ := json.Marshal(deploymentObject(map[string]any{"app": "web"}, nil))
	f.Add(dep, uint8(0), uint8(1), true, "shared", "ns-cc", false)
	f.Add(dep, uint8(0), uint8(0), true, "", "", true)
	f.Add([]byte(`{"metadata":{"ownerReferences":[{"kind":"ReplicaSet"}]}}`), uint8(5), uint8(1), false, "shared", "", false)
	f.Add([]byte(`{"metadata":{"labels":"x"},"spec":{"template":7}}`), uint8(0), uint8(1), true, "shared", "", true)
	f.Add([]byte(`{"spec":{"jobTemplate":{"spec":{"template":{"metadata":{"labels":{"cost-center":"mine"}}}}}}}`), uint8(4), uint8(1), true, "d", "n", false)
	all := []policyv1alpha1.Kind{policyv1alpha1.KindDeployment, policyv1alpha1.KindStatefulSet, policyv1alpha1.KindDaemonSet,
		policyv1alpha1.KindJob, policyv1alpha1.KindCronJob, policyv1alpha1.KindPod}
	f.Fuzz(func(t *testing.T, raw []byte, kind, action uint8, propagate bool, defaultValue, nsValue string, update bool) {
		var obj map[string]any
		if json.Unmarshal(raw, &obj) != nil || obj == nil {
			return
		}
		p := testPolicy([]policyv1alpha1.Action{policyv1alpha1.ActionDeny, policyv1alpha1.ActionDefault, policyv1alpha1.ActionAudit}[int(action)%3])
		p.Spec.DefaultValue, p.Spec.PropagateToPodTemplate = defaultValue, propagate
		req := MutationRequest{Kind: all[int(kind)%len(all)], Update: update, Object: obj, NamespaceLabels: map[string]string{"cost-center": nsValue}}
		var old map[string]any
		_ = json.Unmarshal(raw, &old)
		if update {
			req.OldObject = old
		}
		paths := [][]string{{"metadata", "labels"}}
		if info, ok := kinds[req.Kind]; ok && info.templatePath != nil {
			paths = append(paths, append(append([]string{}, info.templatePath...), "metadata", "labels"))
		}
		// What the API server sends: metadata, labels and a pod template are objects
		// where they are present, and labels are strings.
		for _, path := range paths {
			for i := 1; i <= len(path); i++ {
				if v, found, _ := unstructured.NestedFieldNoCopy(obj, path[:i]...); found {
					if _, ok := v.(map[string]any); !ok {
						return
					}
				}
			}
			if _, _, err := unstructured.NestedStringMap(obj, path...); err != nil {
				return
			}
		}
		before := runtimeCopy(obj)
		changed := Mutate(p, req)
		if changed != !reflect.DeepEqual(before, obj) {
			t.Fatalf("Mutate says changed = %v, but the object went from %v to %v", changed, before, obj)
		}
		own := getString(before, "metadata", "labels", p.Spec.Label)
		for _, path := range paths {
			v, found, _ := unstructured.NestedString(obj, append(path, p.Spec.Label)...)
			was, _, _ := unstructured.NestedString(before, append(path, p.Spec.Label)...)
			if found && v != was && v != own && v != nsValue && v != defaultValue {
				t.Fatalf("label set to %q, which is neither the object's, the namespace's nor the default", v)
			}
		}
		// Without the policy's label (and the maps made only to hold it), nothing differs.
		strip := func(m map[string]any) map[string]any {
			m = runtimeCopy(m)
			for _, path := range paths {
				unstructured.RemoveNestedField(m, append(path, p.Spec.Label)...)
				for i := len(path); i > 0; i-- {
					if v, found, _ := unstructured.NestedMap(m, path[:i]...); found && len(v) == 0 {
						unstructured.RemoveNestedField(m, path[:i]...)
					}
				}
			}
			return m
		}
		if !reflect.DeepEqual(strip(before), strip(obj)) {
			t.Fatalf("Mutate changed more than the policy's label:\nbefore %v\nafter  %v", before, obj)
		}
	})
}

func runtimeCopy(m map[string]any) map[string]any {
	return (&unstructured.Unstructured{Object: m}).DeepCopy().Object
}
