package audit

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/internal/scheme"
)

// requestTimeout bounds each list: a slow API server fails the audit rather than
// hanging it.
const requestTimeout = 30 * time.Second

// monitoringGroup is the Prometheus Operator's API group.
const monitoringGroup = "monitoring.coreos.com"

// Read lists what the audit needs from the API server: CRDs, Deployments,
// StatefulSets and RBAC everywhere, then Leases, PodDisruptionBudgets, Pods (metadata
// only), Services and Prometheus Operator monitors in the namespaces of the
// controllers found, and Leases in the namespaces where a RoleBinding lets a
// controller update them. It only reads.
func Read(ctx context.Context, cfg *rest.Config) (*Snapshot, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	s := scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating a Kubernetes client: %w", err)
	}
	return ReadWith(ctx, c)
}

// ReadWith is Read with a client of the caller's, whose scheme knows apiextensions v1.
func ReadWith(ctx context.Context, c client.Reader) (*Snapshot, error) {
	snap := &Snapshot{}
	var (
		crds  apiextensionsv1.CustomResourceDefinitionList
		deps  appsv1.DeploymentList
		sts   appsv1.StatefulSetList
		crs   rbacv1.ClusterRoleList
		crbs  rbacv1.ClusterRoleBindingList
		roles rbacv1.RoleList
		rbs   rbacv1.RoleBindingList
	)
	for _, l := range []struct {
		what string
		list client.ObjectList
	}{
		{"CustomResourceDefinitions", &crds}, {"Deployments", &deps}, {"StatefulSets", &sts},
		{"ClusterRoles", &crs}, {"ClusterRoleBindings", &crbs}, {"Roles", &roles}, {"RoleBindings", &rbs},
	} {
		if err := c.List(ctx, l.list); err != nil {
			return nil, fmt.Errorf("listing %s: %w", l.what, err)
		}
	}
	snap.CRDs, snap.Deployments, snap.StatefulSets = crds.Items, deps.Items, sts.Items
	snap.ClusterRoles, snap.ClusterRoleBindings, snap.Roles, snap.RoleBindings = crs.Items, crbs.Items, roles.Items, rbs.Items

	monitorKinds := map[string]string{} // kind → a served version, when its CRD is installed
	for _, crd := range crds.Items {
		if crd.Spec.Group != monitoringGroup || (crd.Spec.Names.Kind != "ServiceMonitor" && crd.Spec.Names.Kind != "PodMonitor") {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				monitorKinds[crd.Spec.Names.Kind] = v.Name
				break
			}
		}
	}

	for _, ns := range ControllerNamespaces(snap) {
		var (
			leases   coordinationv1.LeaseList
			pdbs     policyv1.PodDisruptionBudgetList
			services corev1.ServiceList
			pods     metav1.PartialObjectMetadataList
		)
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		for _, l := range []struct {
			what string
			list client.ObjectList
		}{{"Leases", &leases}, {"PodDisruptionBudgets", &pdbs}, {"Services", &services}, {"Pods", &pods}} {
			if err := c.List(ctx, l.list, client.InNamespace(ns)); err != nil {
				return nil, fmt.Errorf("listing %s in namespace %s: %w", l.what, ns, err)
			}
		}
		snap.Leases = append(snap.Leases, leases.Items...)
		snap.PDBs = append(snap.PDBs, pdbs.Items...)
		snap.Services = append(snap.Services, services.Items...)
		snap.Pods = append(snap.Pods, pods.Items...)
		for kind, version := range monitorKinds {
			ms, err := readMonitors(ctx, c, ns, schema.GroupVersionKind{Group: monitoringGroup, Version: version, Kind: kind})
			if err != nil {
				return nil, err
			}
			snap.Monitors = append(snap.Monitors, ms...)
		}
	}
	// Operators that elect elsewhere (cert-manager in kube-system): their Leases only.
	for _, ns := range LeaseNamespaces(snap) {
		var leases coordinationv1.LeaseList
		if err := c.List(ctx, &leases, client.InNamespace(ns)); err != nil {
			return nil, fmt.Errorf("listing Leases in namespace %s: %w", ns, err)
		}
		snap.Leases = append(snap.Leases, leases.Items...)
	}
	return snap, nil
}

func readMonitors(ctx context.Context, c client.Reader, ns string, gvk schema.GroupVersionKind) ([]Monitor, error) {
	var list unstructured.UnstructuredList
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return nil, fmt.Errorf("listing %s in namespace %s: %w", gvk.Kind, ns, err)
	}
	var out []Monitor
	for _, u := range list.Items {
		m := Monitor{Kind: gvk.Kind, Namespace: u.GetNamespace(), Name: u.GetName()}
		raw, ok, _ := unstructured.NestedMap(u.Object, "spec", "selector")
		// Without a selector, or with one that does not parse, a monitor is left out:
		// it cannot be shown to scrape the operator.
		if !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &m.Selector) != nil {
			continue
		}
		out = append(out, m)
	}
	return out, nil
}
