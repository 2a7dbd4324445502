// Package charts holds what the tests of the Helm chart in charts/orderly share with the
// e2e install test: rendering the chart with the pinned helm, reading manifests, and
// the permissions a set of RBAC objects grants a ServiceAccount, so that the chart, the
// kustomization in config/default and config/rbac can be compared by what they grant.
package charts

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// RepoRoot is the repository's root directory.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..")
}

// Dir is the chart's directory.
func Dir() string { return filepath.Join(RepoRoot(), "charts", "orderly") }

// Helm returns the pinned helm (bin/helm), built by the Makefile's rule when it is
// missing or older than hack/tools/helm/go.mod, so that the rule stays the only one.
func Helm(ctx context.Context) (string, error) {
	root := RepoRoot()
	bin := filepath.Join(root, "bin", "helm")
	cmd := exec.CommandContext(ctx, "make", "--no-print-directory", "-C", root, bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building helm with `make %s`: %w\n%s", bin, err, out)
	}
	return bin, nil
}

// Template renders the chart as release "orderly" in namespace with `--set`
// assignments, and returns its objects (CRDs included, as `helm install` applies them).
func Template(ctx context.Context, helm, namespace string, set ...string) ([]*unstructured.Unstructured, error) {
	args := []string{"template", "orderly", Dir(), "--namespace", namespace, "--include-crds"}
	for _, s := range set {
		args = append(args, "--set", s)
	}
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, helm, args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return Decode(out)
}

// Decode reads a multi-document YAML stream into objects, skipping empty documents.
func Decode(b []byte) ([]*unstructured.Unstructured, error) {
	var objs []*unstructured.Unstructured
	d := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		var m map[string]any
		if err := d.Decode(&m); err != nil {
			if errors.Is(err, io.EOF) {
				return objs, nil
			}
			return nil, err
		}
		if len(m) == 0 {
			continue
		}
		objs = append(objs, &unstructured.Unstructured{Object: m})
	}
}

// Find returns the object of kind and name, or nil.
func Find(objs []*unstructured.Unstructured, kind, name string) *unstructured.Unstructured {
	for _, o := range objs {
		if o.GetKind() == kind && o.GetName() == name {
			return o
		}
	}
	return nil
}

// Into converts an object into a typed one.
func Into(o *unstructured.Unstructured, into any) error {
	b, err := json.Marshal(o.Object)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, into)
}

// Permission is one verb on one thing, as RBAC grants it: the unit in which two sets
// of rules are compared (rules can be grouped in many ways that grant the same).
type Permission struct {
	// Namespace is where a Role grants it; empty for a ClusterRole.
	Namespace      string
	APIGroup       string
	Resource       string
	ResourceName   string
	NonResourceURL string
	Verb           string
	// Aggregation is the label selectors of an aggregated ClusterRole: whatever rules
	// the cluster aggregates into it (the role itself declares none).
	Aggregation string
}

func (p Permission) String() string {
	switch {
	case p.Aggregation != "":
		return "aggregated from " + p.Aggregation
	case p.NonResourceURL != "":
		return p.Verb + " " + p.NonResourceURL
	}
	s := fmt.Sprintf("%s %s.%s", p.Verb, p.Resource, p.APIGroup)
	if p.ResourceName != "" {
		s += "/" + p.ResourceName
	}
	if p.Namespace != "" {
		s += " in " + p.Namespace
	}
	return s
}

// RulePermissions flattens rules into permissions, in namespace ("" for cluster-wide).
func RulePermissions(namespace string, rules []rbacv1.PolicyRule) []Permission {
	var out []Permission
	for _, r := range rules {
		for _, v := range r.Verbs {
			for _, u := range r.NonResourceURLs {
				out = append(out, Permission{Namespace: namespace, NonResourceURL: u, Verb: v})
			}
			for _, g := range r.APIGroups {
				for _, res := range r.Resources {
					if len(r.ResourceNames) == 0 {
						out = append(out, Permission{Namespace: namespace, APIGroup: g, Resource: res, Verb: v})
					}
					for _, n := range r.ResourceNames {
						out = append(out, Permission{Namespace: namespace, APIGroup: g, Resource: res, ResourceName: n, Verb: v})
					}
				}
			}
		}
	}
	return out
}

// Granted returns, sorted and without duplicates, the permissions that the
// ClusterRoleBindings and RoleBindings among objs grant the ServiceAccount
// namespace/name through the ClusterRoles and Roles among objs.
func Granted(objs []*unstructured.Unstructured, namespace, name string) ([]Permission, error) {
	clusterRoles, roles := map[string]rbacv1.ClusterRole{}, map[string]rbacv1.Role{}
	for _, o := range objs {
		switch o.GetKind() {
		case "ClusterRole":
			var r rbacv1.ClusterRole
			if err := Into(o, &r); err != nil {
				return nil, err
			}
			clusterRoles[r.Name] = r
		case "Role":
			var r rbacv1.Role
			if err := Into(o, &r); err != nil {
				return nil, err
			}
			roles[r.Namespace+"/"+r.Name] = r
		}
	}
	clusterRole := func(ns, roleName string) ([]Permission, error) {
		r, ok := clusterRoles[roleName]
		if !ok {
			return nil, fmt.Errorf("a binding refers to ClusterRole %q, which is not among the objects", roleName)
		}
		perms := RulePermissions(ns, r.Rules)
		if r.AggregationRule != nil {
			b, err := json.Marshal(r.AggregationRule.ClusterRoleSelectors)
			if err != nil {
				return nil, err
			}
			perms = append(perms, Permission{Namespace: ns, Aggregation: string(b)})
		}
		return perms, nil
	}
	var out []Permission
	for _, o := range objs {
		var subjects []rbacv1.Subject
		var ref rbacv1.RoleRef
		switch o.GetKind() {
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			if err := Into(o, &b); err != nil {
				return nil, err
			}
			subjects, ref = b.Subjects, b.RoleRef
		case "RoleBinding":
			var b rbacv1.RoleBinding
			if err := Into(o, &b); err != nil {
				return nil, err
			}
			subjects, ref = b.Subjects, b.RoleRef
		default:
			continue
		}
		if !slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == namespace && s.Name == name
		}) {
			continue
		}
		ns := o.GetNamespace() // "" for a ClusterRoleBinding
		switch ref.Kind {
		case "ClusterRole":
			perms, err := clusterRole(ns, ref.Name)
			if err != nil {
				return nil, err
			}
			out = append(out, perms...)
		case "Role":
			r, ok := roles[ns+"/"+ref.Name]
			if !ok {
				return nil, fmt.Errorf("RoleBinding %s/%s refers to Role %q, which is not among the objects", ns, o.GetName(), ref.Name)
			}
			out = append(out, RulePermissions(ns, r.Rules)...)
		}
	}
	return Sorted(out), nil
}

// Sorted sorts permissions and drops duplicates.
func Sorted(perms []Permission) []Permission {
	slices.SortFunc(perms, func(a, b Permission) int { return cmp.Compare(a.String(), b.String()) })
	return slices.Compact(perms)
}

// Diff says what a grants that b does not, and the other way round, one per line.
func Diff(a, b []Permission) string {
	var lines []string
	for _, p := range a {
		if !slices.Contains(b, p) {
			lines = append(lines, "+ "+p.String())
		}
	}
	for _, p := range b {
		if !slices.Contains(a, p) {
			lines = append(lines, "- "+p.String())
		}
	}
	return strings.Join(lines, "\n")
}

// ReadManifests decodes the YAML files given (paths relative to the repository root).
func ReadManifests(paths ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		b, err := os.ReadFile(filepath.Join(RepoRoot(), p))
		if err != nil {
			return nil, err
		}
		objs, err := Decode(b)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", p, err)
		}
		out = append(out, objs...)
	}
	return out, nil
}
