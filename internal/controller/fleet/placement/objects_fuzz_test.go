package placement

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
)

// apiOverridePath is the CRD's rule for an override patch's path.
var apiOverridePath = regexp.MustCompile(`^/spec/replicas$|^/spec/template/spec/(initContainers|containers)/[0-9]+/(image|env|env/-|env/[0-9]+|env/[0-9]+/value)$`)

// FuzzApplyOverrides applies any override (op, path, value; up to two patches, for
// the cluster or another one) to a member's copy of a Deployment. Properties: it
// never panics; a refusal is an error that names the override; and for patches the
// API server admits, the copy's identity (apiVersion, kind, name, namespace) and its
// metadata (the ownership labels Orderly decides by) are unchanged, and nothing
// outside spec appears.
func FuzzApplyOverrides(f *testing.F) {
	for _, s := range [][6]string{
		{"replace", "/spec/template/spec/containers/0/image", `"us/web:1"`, "", "", ""},
		{"add", "/spec/template/spec/containers/0/env/-", `{"name":"REGION","value":"us"}`, "", "", ""},
		{"replace", "/spec/template/spec/containers/5/image", `"x"`, "", "", ""},
		{"replace", "/spec/replicas", `7`, "remove", "/spec/template/spec/containers/0/env/0", ""},
		{"replace", "/metadata/name", `"other"`, "", "", ""},
		{"add", "/metadata/labels/app.kubernetes.io~1managed-by", `"someone"`, "", "", ""},
		{"move", "/spec/replicas", ``, "", "", ""},
		{"add", "/spec/template/spec/containers/99999999999/env/-", `{}`, "", "", ""},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5], true)
	}
	us := map[string]string{"region": "us"}
	f.Fuzz(func(t *testing.T, op1, path1, value1, op2, path2, value2 string, matching bool) {
		sel := metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}}
		if matching {
			sel.MatchLabels = us
		}
		o := fleetv1alpha1.Override{ClusterSelector: sel}
		admitted := true
		for _, p := range [][3]string{{op1, path1, value1}, {op2, path2, value2}} {
			if p[0] == "" && p[1] == "" {
				continue
			}
			jp := fleetv1alpha1.JSONPatch{Op: p[0], Path: p[1]}
			if p[2] != "" {
				jp.Value = &apiextensionsv1.JSON{Raw: []byte(p[2])}
			}
			admitted = admitted && (p[0] == "add" || p[0] == "replace" || p[0] == "remove") && apiOverridePath.MatchString(p[1]) && (p[2] == "" || json.Valid([]byte(p[2])))
			o.Patches = append(o.Patches, jp)
		}
		obj := hubDeployment()
		before := hubDeployment()
		err := applyOverrides(obj, []fleetv1alpha1.Override{o}, us)
		if err != nil {
			if !strings.Contains(err.Error(), "overrides[0]") {
				t.Fatalf("the error %q does not name the override", err)
			}
			return
		}
		if !admitted {
			return
		}
		if obj.GetAPIVersion() != before.GetAPIVersion() || obj.GetKind() != before.GetKind() || obj.GetName() != before.GetName() || obj.GetNamespace() != before.GetNamespace() {
			t.Fatalf("an override changed the copy's identity: %v", obj.Object)
		}
		if !reflect.DeepEqual(obj.Object["metadata"], before.Object["metadata"]) {
			t.Fatalf("an override changed the copy's metadata: %v", obj.Object["metadata"])
		}
		for k := range obj.Object {
			if k != "apiVersion" && k != "kind" && k != "metadata" && k != "spec" && k != "status" {
				t.Fatalf("an override added %s", k)
			}
		}
	})
}
