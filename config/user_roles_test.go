package config_test

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// Who may create each kind is decided once, here, for every kind Orderly serves:
// namespaced kinds are for the people of a namespace (an editor role aggregated into
// admin and edit, a viewer into view) unless they are listed as platform-only; kinds
// only Orderly writes are created by nobody; cluster-scoped kinds are never reached
// through the aggregated roles. docs/security.md names every kind.
var (
	// platformOnly are namespaced kinds that only platform administrators create.
	platformOnly = map[string]bool{"placementpolicies": true}
	// writtenByOrderly are kinds no person creates.
	writtenByOrderly = map[string]bool{"imagescans": true, "hostnameclaims": true}
)

const (
	aggregateAdmin = "rbac.authorization.k8s.io/aggregate-to-admin"
	aggregateEdit  = "rbac.authorization.k8s.io/aggregate-to-edit"
	aggregateView  = "rbac.authorization.k8s.io/aggregate-to-view"
)

func TestEveryKindHasItsUserRoles(t *testing.T) {
	roles := userRoles(t)
	grants := func(pred func(*rbacv1.ClusterRole) bool, group, resource, verb string) []string {
		var out []string
		for _, r := range roles {
			if !pred(r) {
				continue
			}
			for _, rule := range r.Rules {
				if slices.Contains(rule.APIGroups, group) && slices.Contains(rule.Resources, resource) && slices.Contains(rule.Verbs, verb) {
					out = append(out, r.Name)
					break
				}
			}
		}
		return out
	}
	aggregatedTo := func(label string) func(*rbacv1.ClusterRole) bool {
		return func(r *rbacv1.ClusterRole) bool { return r.Labels[label] == "true" }
	}
	aggregated := func(r *rbacv1.ClusterRole) bool {
		return r.Labels[aggregateAdmin] == "true" || r.Labels[aggregateEdit] == "true" || r.Labels[aggregateView] == "true"
	}
	named := func(name string) func(*rbacv1.ClusterRole) bool {
		return func(r *rbacv1.ClusterRole) bool { return r.Name == name }
	}
	everyRole := func(*rbacv1.ClusterRole) bool { return true }

	security, err := os.ReadFile("../docs/security.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, crd := range orderlyCRDs(t) {
		group, res, kind := crd.Spec.Group, crd.Spec.Names.Plural, crd.Spec.Names.Kind
		if !bytes.Contains(security, []byte("| `"+kind+"` |")) {
			t.Errorf("docs/security.md's table has no row for %s", kind)
		}
		if len(grants(named("orderly-platform-viewer"), group, res, "list")) == 0 && crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			t.Errorf("orderly-platform-viewer cannot list %s", res)
		}
		creators := grants(everyRole, group, res, "create")
		switch {
		case writtenByOrderly[res]:
			if len(creators) > 0 {
				t.Errorf("%s is written only by Orderly, but %v may create it", res, creators)
			}
		case crd.Spec.Scope == apiextensionsv1.ClusterScoped || platformOnly[res]:
			if !slices.Equal(creators, []string{"orderly-platform-admin"}) {
				t.Errorf("%s is for platform administrators, but the roles that may create it are %v", res, creators)
			}
		default:
			for _, label := range []string{aggregateAdmin, aggregateEdit} {
				if len(grants(aggregatedTo(label), group, res, "create")) == 0 {
					t.Errorf("%s is for the people of a namespace, but no role aggregated by %s may create it", res, label)
				}
			}
		}
		if crd.Spec.Scope == apiextensionsv1.NamespaceScoped && !writtenByOrderly[res] {
			for _, verb := range []string{"get", "list", "watch"} {
				if len(grants(aggregatedTo(aggregateView), group, res, verb)) == 0 {
					t.Errorf("no role aggregated into view may %s %s", verb, res)
				}
			}
		}
		if crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			for _, verb := range []string{"get", "list", "create", "update", "patch", "delete"} {
				if names := grants(aggregated, group, res, verb); len(names) > 0 {
					t.Errorf("%s is cluster-scoped, but the aggregated roles %v may %s it (through a ClusterRoleBinding of admin, edit or view)", res, names, verb)
				}
			}
		}
	}
}

func userRoles(t *testing.T) []*rbacv1.ClusterRole {
	t.Helper()
	raw, err := os.ReadFile("rbac/user_roles.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var out []*rbacv1.ClusterRole
	for _, doc := range strings.Split(string(raw), "\n---\n") {
		var r rbacv1.ClusterRole
		if err := yaml.Unmarshal([]byte(doc), &r); err != nil {
			t.Fatalf("rbac/user_roles.yaml: %v", err)
		}
		if r.Name != "" {
			out = append(out, &r)
		}
	}
	return out
}

func orderlyCRDs(t *testing.T) []*apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	paths, err := filepath.Glob("crd/bases/*.yaml")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no CRDs in crd/bases: %v", err)
	}
	var out []*apiextensionsv1.CustomResourceDefinition
	for _, p := range paths {
		raw, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var crd apiextensionsv1.CustomResourceDefinition
		if err := yaml.Unmarshal(raw, &crd); err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		out = append(out, &crd)
	}
	return out
}
