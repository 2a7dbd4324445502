package placement

import (
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
)

func hubDeployment() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apps/v1", "kind": "Deployment",
		"metadata": map[string]any{"name": "web", "namespace": "shop", "uid": "hub-uid", "resourceVersion": "7",
			"labels":      map[string]any{"app": "web"},
			"annotations": map[string]any{"kubectl.kubernetes.io/last-applied-configuration": "{}", "team": "a"}},
		"spec": map[string]any{"replicas": int64(3), "template": map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "web", "image": "web:1", "env": []any{map[string]any{"name": "A", "value": "1"}}}}}}},
		"status": map[string]any{"readyReplicas": int64(3)},
	}}
}

func TestMemberCopy(t *testing.T) {
	pp := &fleetv1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "shop", UID: "pp-uid"}}
	c := memberCopy(hubDeployment(), pp)
	if c.GetUID() != "" || c.GetResourceVersion() != "" {
		t.Errorf("hub identity copied: uid %q rv %q", c.GetUID(), c.GetResourceVersion())
	}
	if _, found := c.Object["status"]; found {
		t.Error("status copied")
	}
	l := c.GetLabels()
	if l["app"] != "web" || l[fleetv1alpha1.PolicyUIDLabel] != "pp-uid" || l[fleetv1alpha1.PolicyNameLabel] != "p" || l["app.kubernetes.io/managed-by"] != "orderly" {
		t.Errorf("labels %v", l)
	}
	a := c.GetAnnotations()
	if _, found := a["kubectl.kubernetes.io/last-applied-configuration"]; found || a["team"] != "a" {
		t.Errorf("annotations %v", a)
	}
	svc := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": "s", "namespace": "shop"},
		"spec":     map[string]any{"clusterIP": "10.0.0.1", "clusterIPs": []any{"10.0.0.1"}, "ports": []any{}}}}
	sc := memberCopy(svc, pp)
	if _, found, _ := unstructured.NestedString(sc.Object, "spec", "clusterIP"); found {
		t.Error("the hub's clusterIP copied to the member")
	}
}

func TestApplyOverrides(t *testing.T) {
	us := map[string]string{"region": "us"}
	json := func(s string) *apiextensionsv1.JSON { return &apiextensionsv1.JSON{Raw: []byte(s)} }
	tests := []struct {
		name      string
		overrides []fleetv1alpha1.Override
		wantImage string
		wantEnv   int
		wantErr   string
	}{
		{"matching cluster: image replaced", []fleetv1alpha1.Override{{
			ClusterSelector: metav1.LabelSelector{MatchLabels: us},
			Patches:         []fleetv1alpha1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/containers/0/image", Value: json(`"us/web:1"`)}},
		}}, "us/web:1", 1, ""},
		{"other cluster: untouched", []fleetv1alpha1.Override{{
			ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
			Patches:         []fleetv1alpha1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/containers/0/image", Value: json(`"eu/web:1"`)}},
		}}, "web:1", 1, ""},
		{"other resource name: untouched", []fleetv1alpha1.Override{{
			ResourceName: "api", ClusterSelector: metav1.LabelSelector{MatchLabels: us},
			Patches: []fleetv1alpha1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/containers/0/image", Value: json(`"us/web:1"`)}},
		}}, "web:1", 1, ""},
		{"env appended", []fleetv1alpha1.Override{{
			ClusterSelector: metav1.LabelSelector{MatchLabels: us},
			Patches:         []fleetv1alpha1.JSONPatch{{Op: "add", Path: "/spec/template/spec/containers/0/env/-", Value: json(`{"name":"REGION","value":"us"}`)}},
		}}, "web:1", 2, ""},
		{"a path the object does not have: error", []fleetv1alpha1.Override{{
			ClusterSelector: metav1.LabelSelector{MatchLabels: us},
			Patches:         []fleetv1alpha1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/containers/5/image", Value: json(`"x"`)}},
		}}, "", 0, "overrides[0] on Deployment web"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := hubDeployment()
			err := applyOverrides(obj, tt.overrides, us)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			containers, _, _ := unstructured.NestedSlice(obj.Object, "spec", "template", "spec", "containers")
			c := containers[0].(map[string]any)
			if c["image"] != tt.wantImage || len(c["env"].([]any)) != tt.wantEnv {
				t.Errorf("image %v env %v, want %s and %d entries", c["image"], c["env"], tt.wantImage, tt.wantEnv)
			}
		})
	}
}

func TestRestConfigFromRefusesPluginsAndFiles(t *testing.T) {
	const base = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: https://127.0.0.1:6443
    %s
users:
- name: u
  user:
    %s
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`
	tests := []struct {
		name, cluster, user, wantErr string
	}{
		{"token inline", "insecure-skip-tls-verify: true", "token: abc", ""},
		{"exec plugin", "insecure-skip-tls-verify: true", "exec: {command: /bin/sh, apiVersion: client.authentication.k8s.io/v1}", "exec plugin"},
		{"token file", "insecure-skip-tls-verify: true", "tokenFile: /etc/passwd", "files"},
		{"CA file", "certificate-authority: /etc/ca.crt", "token: abc", "CA file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := []byte(strings.NewReplacer("%s\nusers", tt.cluster+"\nusers").Replace(base))
			raw = []byte(strings.Replace(string(raw), "%s", tt.user, 1))
			_, err := restConfigFrom(raw, defaultTimings().RequestTimeout)
			if tt.wantErr == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want %q", err, tt.wantErr)
			}
		})
	}
}
