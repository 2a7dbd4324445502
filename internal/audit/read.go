package audit

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
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

// readers is how many lists the reader makes at once: the per-namespace lists of a
// cluster with a hundred operators are four hundred requests.
const readers = 8

// ContentType is how Read asks for built-in kinds (and CRDs): protobuf.
const ContentType = runtime.ContentTypeProtobuf

// monitoringGroup is the Prometheus Operator's API group.
const monitoringGroup = "monitoring.coreos.com"

// Read lists what the audit needs from the API server: CRDs, Deployments,
// StatefulSets and RBAC everywhere (the audit cannot run without them), then Leases,
// PodDisruptionBudgets, Pods (metadata only) and Services in the namespaces of the
// operators found, Leases in the namespaces where a RoleBinding lets an operator
// update them, and Prometheus Operator monitors in every namespace. A list of the
// second kind that fails (forbidden, say) is recorded in Snapshot.Unread, and the
// checks that needed it are reported unknown. It only reads.
func Read(ctx context.Context, cfg *rest.Config) (*Snapshot, error) {
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	// No client-side rate limit unless the caller set one, as everywhere in Orderly
	// (cmd/orderly/ratelimit.go): the API server's Priority and Fairness paces the
	// reads, which are bounded anyway (readers at a time). client-go's default of 5
	// a second would make the 400 lists of a cluster with 100 operators take 80 s.
	if cfg.QPS == 0 && cfg.RateLimiter == nil {
		cfg.QPS, cfg.Burst = -1, 0
	}
	// Built-in kinds, CRDs included, in protobuf: a cluster's CRDs are megabytes of
	// schemas, which decode several times faster so. Monitors (unstructured) are
	// read in JSON whatever this says.
	cfg.ContentType = ContentType
	cfg.AcceptContentTypes = ContentType + ",application/json"
	s := scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		return nil, fmt.Errorf("creating a Kubernetes client: %w", err)
	}
	return ReadWith(ctx, c)
}

// listJob is one list the reader makes; keep stores what it read.
type listJob struct {
	resource, namespace string
	list                client.ObjectList
	keep                func()
}

// runJobs makes the lists, readers at a time, and returns the errors by job.
func runJobs(ctx context.Context, c client.Reader, jobs []listJob) []error {
	errs := make([]error, len(jobs))
	sem := make(chan struct{}, readers)
	var wg sync.WaitGroup
	for i := range jobs {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			var opts []client.ListOption
			if jobs[i].namespace != "" {
				opts = append(opts, client.InNamespace(jobs[i].namespace))
			}
			errs[i] = c.List(ctx, jobs[i].list, opts...)
		})
	}
	wg.Wait()
	return errs
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
	core := []listJob{
		{resource: "customresourcedefinitions.apiextensions.k8s.io", list: &crds}, {resource: "deployments.apps", list: &deps},
		{resource: "statefulsets.apps", list: &sts}, {resource: "clusterroles.rbac.authorization.k8s.io", list: &crs},
		{resource: "clusterrolebindings.rbac.authorization.k8s.io", list: &crbs}, {resource: "roles.rbac.authorization.k8s.io", list: &roles},
		{resource: "rolebindings.rbac.authorization.k8s.io", list: &rbs},
	}
	for i, err := range runJobs(ctx, c, core) {
		if err != nil {
			return nil, fmt.Errorf("listing %s in every namespace (the audit needs it to find the operators): %w", core[i].resource, err)
		}
	}
	snap.CRDs, snap.Deployments, snap.StatefulSets = crds.Items, deps.Items, sts.Items
	snap.ClusterRoles, snap.ClusterRoleBindings, snap.Roles, snap.RoleBindings = crs.Items, crbs.Items, roles.Items, rbs.Items

	d := discover(snap)
	namespaces := d.readNamespaces()
	var (
		mu   sync.Mutex
		jobs []listJob
	)
	// keep appends a list's items under the lock: the jobs run at once.
	keep := func(dst *[]coordinationv1.Lease, l *coordinationv1.LeaseList) func() {
		return func() { mu.Lock(); *dst = append(*dst, l.Items...); mu.Unlock() }
	}
	addLeases := func(ns string) {
		l := &coordinationv1.LeaseList{}
		jobs = append(jobs, listJob{resource: resLeases, namespace: ns, list: l, keep: keep(&snap.Leases, l)})
	}
	for _, ns := range namespaces {
		addLeases(ns)
		pdbs, services := &policyv1.PodDisruptionBudgetList{}, &corev1.ServiceList{}
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		jobs = append(jobs,
			listJob{resource: resPDBs, namespace: ns, list: pdbs, keep: func() { mu.Lock(); snap.PDBs = append(snap.PDBs, pdbs.Items...); mu.Unlock() }},
			listJob{resource: resServices, namespace: ns, list: services, keep: func() { mu.Lock(); snap.Services = append(snap.Services, services.Items...); mu.Unlock() }},
			listJob{resource: resPods, namespace: ns, list: pods, keep: func() { mu.Lock(); snap.Pods = append(snap.Pods, pods.Items...); mu.Unlock() }})
	}
	// Operators that elect elsewhere (cert-manager in kube-system): their Leases only.
	for _, ns := range d.leaseOnlyNamespaces(namespaces) {
		addLeases(ns)
	}
	// Monitors in every namespace: one in the monitoring stack's namespace may select
	// an operator's through its namespaceSelector.
	monitorJobs := map[int]schema.GroupVersionKind{}
	for _, gvk := range monitorKinds(crds.Items) {
		list := &unstructured.UnstructuredList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		monitorJobs[len(jobs)] = gvk
		jobs = append(jobs, listJob{resource: monitorResource(gvk.Kind), list: list, keep: func() {
			mu.Lock()
			snap.Monitors = append(snap.Monitors, monitorsOf(gvk.Kind, list)...)
			mu.Unlock()
		}})
	}
	errs := runJobs(ctx, c, jobs)
	// Where monitors may not be listed in every namespace, they are listed in the
	// operators' namespaces, where most are.
	var fallback []listJob
	for i, err := range errs {
		if err == nil {
			jobs[i].keep()
			continue
		}
		snap.Unread = append(snap.Unread, Unread{Resource: jobs[i].resource, Namespace: jobs[i].namespace, Error: err.Error()})
		if gvk, ok := monitorJobs[i]; ok {
			for _, ns := range namespaces {
				list := &unstructured.UnstructuredList{}
				list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
				fallback = append(fallback, listJob{resource: monitorResource(gvk.Kind), namespace: ns, list: list, keep: func() {
					mu.Lock()
					snap.Monitors = append(snap.Monitors, monitorsOf(gvk.Kind, list)...)
					mu.Unlock()
				}})
			}
		}
	}
	for i, err := range runJobs(ctx, c, fallback) {
		if err != nil {
			snap.Unread = append(snap.Unread, Unread{Resource: fallback[i].resource, Namespace: fallback[i].namespace, Error: err.Error()})
			continue
		}
		fallback[i].keep()
	}
	sortSnapshot(snap)
	return snap, nil
}

// sortSnapshot orders what the jobs read in any order, so that the audit of a
// cluster is the same from one run to the next.
func sortSnapshot(s *Snapshot) {
	byKey := func(a, b metav1.Object) int {
		return cmp.Or(cmp.Compare(a.GetNamespace(), b.GetNamespace()), cmp.Compare(a.GetName(), b.GetName()))
	}
	slices.SortFunc(s.Leases, func(a, b coordinationv1.Lease) int { return byKey(&a, &b) })
	slices.SortFunc(s.PDBs, func(a, b policyv1.PodDisruptionBudget) int { return byKey(&a, &b) })
	slices.SortFunc(s.Services, func(a, b corev1.Service) int { return byKey(&a, &b) })
	slices.SortFunc(s.Pods, func(a, b metav1.PartialObjectMetadata) int { return byKey(&a, &b) })
	slices.SortFunc(s.Monitors, func(a, b Monitor) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Namespace, b.Namespace), cmp.Compare(a.Name, b.Name))
	})
	s.Monitors = slices.CompactFunc(s.Monitors, func(a, b Monitor) bool {
		return a.Kind == b.Kind && a.Namespace == b.Namespace && a.Name == b.Name
	})
	slices.SortFunc(s.Unread, func(a, b Unread) int {
		return cmp.Or(cmp.Compare(a.Resource, b.Resource), cmp.Compare(a.Namespace, b.Namespace))
	})
}

// monitorKinds are the ServiceMonitor and PodMonitor kinds installed, each at a
// served version.
func monitorKinds(crds []apiextensionsv1.CustomResourceDefinition) []schema.GroupVersionKind {
	var out []schema.GroupVersionKind
	for _, crd := range crds {
		if crd.Spec.Group != monitoringGroup || (crd.Spec.Names.Kind != "ServiceMonitor" && crd.Spec.Names.Kind != "PodMonitor") {
			continue
		}
		for _, v := range crd.Spec.Versions {
			if v.Served {
				out = append(out, schema.GroupVersionKind{Group: monitoringGroup, Version: v.Name, Kind: crd.Spec.Names.Kind})
				break
			}
		}
	}
	slices.SortFunc(out, func(a, b schema.GroupVersionKind) int { return cmp.Compare(a.Kind, b.Kind) })
	return out
}

func monitorResource(kind string) string {
	if kind == "PodMonitor" {
		return resPodMonitors
	}
	return resServiceMonitors
}

// monitorsOf reads the selectors of listed monitors.
func monitorsOf(kind string, list *unstructured.UnstructuredList) []Monitor {
	var out []Monitor
	for _, u := range list.Items {
		m := Monitor{Kind: kind, Namespace: u.GetNamespace(), Name: u.GetName()}
		raw, ok, _ := unstructured.NestedMap(u.Object, "spec", "selector")
		// Without a selector, or with one that does not parse, a monitor is left out:
		// it cannot be shown to scrape the operator.
		if !ok || runtime.DefaultUnstructuredConverter.FromUnstructured(raw, &m.Selector) != nil {
			continue
		}
		m.AnyNamespace, _, _ = unstructured.NestedBool(u.Object, "spec", "namespaceSelector", "any")
		m.MatchNames, _, _ = unstructured.NestedStringSlice(u.Object, "spec", "namespaceSelector", "matchNames")
		out = append(out, m)
	}
	return out
}
