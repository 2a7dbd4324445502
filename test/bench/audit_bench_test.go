//go:build bench

package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"orderly.dev/orderly/internal/audit"
	"orderly.dev/orderly/internal/scheme"
)

// BenchmarkAudit: `orderly audit` on a cluster grown to 58 CRDs and 11 workloads (the
// size it was first tried at), then to 300 CRDs and 100 operator workloads
// (BENCH_AUDIT_CRDS, BENCH_AUDIT_OPERATORS), of generated operators: each a
// Deployment with its ServiceAccount, ClusterRole and bindings, a leader election
// Role, a metrics Service, some a PodDisruptionBudget, and its API group of CRDs
// whose schemas are about the size of real operators'. The baseline lists the same
// objects straight from the API server, as many at a time as the audit does (the
// RBAC, CRDs and workloads everywhere; Leases, PodDisruptionBudgets, Services and
// Pods' metadata in the operators' namespaces), with a client of its own. Each
// figure is the median of seven runs, the measures interleaved, with their range.
func BenchmarkAudit(b *testing.B) {
	ctx := context.Background()
	log.SetLogger(zap.New(zap.WriteTo(os.Stderr)))
	kubeconfig := benchCluster(ctx, b, "orderly-bench-audit", 1)
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	s := scheme.New()
	utilruntime.Must(apiextensionsv1.AddToScheme(s))
	c, err := client.New(unlimited(cfg), client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	gen := &operatorGenerator{c: c}
	for _, size := range []struct{ crds, workloads int }{
		{58, 11},
		{envInt("BENCH_AUDIT_CRDS", 300), envInt("BENCH_AUDIT_OPERATORS", 100)},
	} {
		crds, workloads := gen.grow(ctx, b, size.crds, size.workloads)
		// The four measures interleaved, so that the API server's own load after the
		// cluster grew (OpenAPI for new CRDs, controllers) weighs on all alike.
		var (
			baselines, processes, inside, reads, grades []time.Duration
			report                                      audit.Report
			snap                                        *audit.Snapshot
		)
		for range runs {
			baselines = append(baselines, baselineLists(ctx, b, cfg, s, gen.namespaces))
			start := time.Now()
			report = runAudit(b, kubeconfig)
			processes = append(processes, time.Since(start))
			inside = append(inside, time.Duration(report.Stats.Seconds*float64(time.Second)))
			start = time.Now()
			if snap, err = audit.Read(ctx, cfg); err != nil {
				b.Fatal(err)
			}
			reads = append(reads, time.Since(start))
			start = time.Now()
			audit.Audit(snap, audit.Options{})
			grades = append(grades, time.Since(start))
		}
		baseline, process := median(baselines), median(processes)
		if report.Stats.CRDs != crds || report.Stats.Workloads != workloads || len(report.Operators) < gen.operators {
			b.Fatalf("the audit saw %d CRDs, %d workloads and graded %d operators; the cluster has %d, %d and %d generated operators",
				report.Stats.CRDs, report.Stats.Workloads, len(report.Operators), crds, workloads, gen.operators)
		}
		fmt.Printf("\nAudit benchmark: %d CRDs (%.1f MB of them listed) and %d workloads, %d operators graded; median (min-max) of %d runs\n",
			crds, float64(gen.crdBytes(ctx, b))/(1<<20), workloads, len(report.Operators), runs)
		fmt.Printf("  baseline: the same objects listed straight from the API server  %s  (%d lists, 8 at a time)\n", spread(baselines), 7+4*len(gen.namespaces))
		fmt.Printf("  orderly audit -o json, as a process (and its JSON decoded)      %s\n", spread(processes))
		fmt.Printf("    reading and grading, as the process measured it (stats)      %s\n", spread(inside))
		fmt.Printf("  in this process: reading (audit.Read)                          %s\n", spread(reads))
		fmt.Printf("                   grading (audit.Audit)                         %s\n", spread(grades))
		fmt.Printf("  ratio audit/baseline (medians)                                 %6.2fx\n", process.Seconds()/baseline.Seconds())
		b.ReportMetric(process.Seconds(), fmt.Sprintf("s/audit-%dcrds", crds))
		b.ReportMetric(process.Seconds()/baseline.Seconds(), fmt.Sprintf("ratio-%dcrds", crds))
	}
}

// runs is how many times each figure is measured; the median is printed.
const runs = 7

func median(ds []time.Duration) time.Duration {
	slices.Sort(ds)
	return ds[len(ds)/2]
}

// spread writes the median of ds and its range: on a shared machine the range says
// how far a single figure can be trusted.
func spread(ds []time.Duration) string {
	m := median(ds)
	return fmt.Sprintf("%6.3fs (%.3f-%.3f)", m.Seconds(), ds[0].Seconds(), ds[len(ds)-1].Seconds())
}

func runAudit(b *testing.B, kubeconfig string) audit.Report {
	b.Helper()
	cmd := exec.Command(os.Getenv("ORDERLY_BIN"), "audit", "--kubeconfig", kubeconfig, "-o", "json") //nolint:gosec // the binary under test
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("orderly audit: %v\n%s", err, stderr.String())
	}
	var r audit.Report
	if err := json.Unmarshal(out, &r); err != nil {
		b.Fatalf("orderly audit printed no JSON report: %v", err)
	}
	return r
}

// baselineLists lists what the audit reads, eight lists at a time, into the same
// types, with a client made for the run as `orderly audit` makes one (so discovery is
// measured too) and the same encoding (audit.ContentType), and does nothing with them.
func baselineLists(ctx context.Context, b *testing.B, cfg *rest.Config, s *runtime.Scheme, namespaces []string) time.Duration {
	b.Helper()
	start := time.Now()
	cfg = unlimited(cfg)
	cfg.ContentType, cfg.AcceptContentTypes = audit.ContentType, audit.ContentType+",application/json"
	c, err := client.New(cfg, client.Options{Scheme: s})
	if err != nil {
		b.Fatal(err)
	}
	type job struct {
		list client.ObjectList
		ns   string
	}
	jobs := []job{
		{&apiextensionsv1.CustomResourceDefinitionList{}, ""}, {&appsv1.DeploymentList{}, ""}, {&appsv1.StatefulSetList{}, ""},
		{&rbacv1.ClusterRoleList{}, ""}, {&rbacv1.ClusterRoleBindingList{}, ""}, {&rbacv1.RoleList{}, ""}, {&rbacv1.RoleBindingList{}, ""},
	}
	for _, ns := range namespaces {
		pods := &metav1.PartialObjectMetadataList{}
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		jobs = append(jobs, job{&coordinationv1.LeaseList{}, ns}, job{&policyv1.PodDisruptionBudgetList{}, ns}, job{&corev1.ServiceList{}, ns}, job{pods, ns})
	}
	if err := parallel(len(jobs), 8, func(i int) error {
		if jobs[i].ns == "" {
			return c.List(ctx, jobs[i].list)
		}
		return c.List(ctx, jobs[i].list, client.InNamespace(jobs[i].ns))
	}); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

// operatorGenerator installs generated operators into the benchmark's cluster.
type operatorGenerator struct {
	c client.Client
	// operators is how many it made; namespaces are theirs.
	operators  int
	mu         sync.Mutex
	namespaces []string
}

// counts returns the CRDs and workloads in the cluster.
func (g *operatorGenerator) counts(ctx context.Context, b *testing.B) (crds, workloads int) {
	b.Helper()
	var cl apiextensionsv1.CustomResourceDefinitionList
	var dl appsv1.DeploymentList
	var sl appsv1.StatefulSetList
	for _, l := range []client.ObjectList{&cl, &dl, &sl} {
		if err := g.c.List(ctx, l); err != nil {
			b.Fatal(err)
		}
	}
	return len(cl.Items), len(dl.Items) + len(sl.Items)
}

func (g *operatorGenerator) crdBytes(ctx context.Context, b *testing.B) int {
	b.Helper()
	var cl apiextensionsv1.CustomResourceDefinitionList
	if err := g.c.List(ctx, &cl); err != nil {
		b.Fatal(err)
	}
	raw, err := json.Marshal(cl)
	if err != nil {
		b.Fatal(err)
	}
	return len(raw)
}

// grow adds operators until the cluster holds wantCRDs CRDs and wantWorkloads
// workloads (the CRDs shared out among the new operators), waits until the CRDs are
// established and the Deployments' pods exist, and returns the counts.
func (g *operatorGenerator) grow(ctx context.Context, b *testing.B, wantCRDs, wantWorkloads int) (int, int) {
	b.Helper()
	crds, workloads := g.counts(ctx, b)
	newOps, newCRDs := wantWorkloads-workloads, wantCRDs-crds
	if newOps <= 0 || newCRDs < newOps {
		b.Fatalf("the cluster has %d CRDs and %d workloads already: cannot grow it to %d and %d", crds, workloads, wantCRDs, wantWorkloads)
	}
	first := g.operators
	if err := parallel(newOps, 8, func(i int) error {
		// The CRDs shared out: the first operators get one more.
		n := newCRDs / newOps
		if i < newCRDs%newOps {
			n++
		}
		return g.install(ctx, first+i, n)
	}); err != nil {
		b.Fatal(err)
	}
	g.operators += newOps
	deadline := time.Now().Add(30 * time.Minute)
	for {
		var cl apiextensionsv1.CustomResourceDefinitionList
		var pods metav1.PartialObjectMetadataList
		pods.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("PodList"))
		if err := g.c.List(ctx, &cl); err != nil {
			b.Fatal(err)
		}
		if err := g.c.List(ctx, &pods, client.MatchingLabels{"bench.orderly.dev/operator": "true"}); err != nil {
			b.Fatal(err)
		}
		established := 0
		for _, crd := range cl.Items {
			for _, cond := range crd.Status.Conditions {
				if cond.Type == apiextensionsv1.Established && cond.Status == apiextensionsv1.ConditionTrue {
					established++
				}
			}
		}
		if established == len(cl.Items) && len(pods.Items) >= g.operators {
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("after 30 minutes %d of %d CRDs established, %d pods for %d operators", established, len(cl.Items), len(pods.Items), g.operators)
		}
		time.Sleep(time.Second)
	}
	return g.counts(ctx, b)
}

// install makes operator i with n CRDs in its own API group. Operators differ as real
// ones do: every third has two replicas and a PodDisruptionBudget, every fourth
// creates pods in every namespace and reads Secrets, every fifth has alpha kinds.
func (g *operatorGenerator) install(ctx context.Context, i, n int) error {
	name := fmt.Sprintf("op%03d", i)
	ns := name + "-system"
	group := name + ".bench.example.com"
	labels := map[string]string{"app.kubernetes.io/name": name, "bench.orderly.dev/operator": "true"}
	var plurals []string
	objs := []client.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}}
	for k := range n {
		kind := fmt.Sprintf("Kind%02d", k)
		plural := strings.ToLower(kind) + "s"
		plurals = append(plurals, plural)
		version := "v1"
		if i%5 == 4 {
			version = "v1alpha1"
		}
		objs = append(objs, &apiextensionsv1.CustomResourceDefinition{
			ObjectMeta: metav1.ObjectMeta{Name: plural + "." + group, Labels: map[string]string{"app.kubernetes.io/name": name}},
			Spec: apiextensionsv1.CustomResourceDefinitionSpec{
				Group: group, Scope: apiextensionsv1.NamespaceScoped,
				Names: apiextensionsv1.CustomResourceDefinitionNames{Kind: kind, ListKind: kind + "List", Plural: plural, Singular: strings.ToLower(kind)},
				Versions: []apiextensionsv1.CustomResourceDefinitionVersion{{
					Name: version, Served: true, Storage: true,
					Subresources: &apiextensionsv1.CustomResourceSubresources{Status: &apiextensionsv1.CustomResourceSubresourceStatus{}},
					Schema:       &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: benchSchema(k)},
				}},
			},
		})
	}
	objs = append(objs,
		&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
		&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: benchRules(i, group, plurals)},
		&rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name}, RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}},
		&rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-leader-election"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"get", "list", "watch", "create", "update", "patch"}}}},
		&rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-leader-election"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name + "-leader-election"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: ns, Name: name}}},
		&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-metrics-service"},
			Spec: corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Name: "https", Port: 8443, TargetPort: intstr.FromInt32(8443)}}}},
	)
	replicas := int32(1)
	if i%3 == 0 {
		replicas = 2
		objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: policyv1.PodDisruptionBudgetSpec{MaxUnavailable: ptrTo(intstr.FromInt32(1)), Selector: &metav1.LabelSelector{MatchLabels: labels}}})
	}
	probe := &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8081)}}}
	objs = append(objs, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name + "-controller-manager", Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{ServiceAccountName: name, Containers: []corev1.Container{{
					Name: "manager", Image: fmt.Sprintf("example.com/%s:v1.%d.0", name, i),
					Args:          []string{"--leader-elect", "--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"},
					LivenessProbe: probe, ReadinessProbe: probe,
					Resources: corev1.ResourceRequirements{
						Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
						Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
					},
				}}},
			},
		},
	})
	for _, o := range objs {
		if err := g.c.Create(ctx, o); err != nil {
			return fmt.Errorf("creating %T %s: %w", o, o.GetName(), err)
		}
	}
	g.mu.Lock()
	g.namespaces = append(g.namespaces, ns)
	g.mu.Unlock()
	return nil
}

// benchRules are operator i's ClusterRole: its group's kinds, their status and
// finalizers, Events, and for some, Secrets and pods everywhere.
func benchRules(i int, group string, plurals []string) []rbacv1.PolicyRule {
	var status, finalizers []string
	for _, p := range plurals {
		status, finalizers = append(status, p+"/status"), append(finalizers, p+"/finalizers")
	}
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{group}, Resources: plurals, Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{group}, Resources: status, Verbs: []string{"get", "update", "patch"}},
		{APIGroups: []string{group}, Resources: finalizers, Verbs: []string{"update"}},
		{APIGroups: []string{""}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}},
	}
	if i%4 == 1 {
		rules = append(rules,
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
			rbacv1.PolicyRule{APIGroups: []string{""}, Resources: []string{"pods"}, Verbs: []string{"get", "list", "watch", "create", "delete"}})
	}
	return rules
}

// benchSchema is a schema of about the size of a real operator's kind (80 fields
// of spec, most described, a nested object and a list), with a CEL rule.
func benchSchema(k int) *apiextensionsv1.JSONSchemaProps {
	fields := map[string]apiextensionsv1.JSONSchemaProps{}
	for f := range 80 {
		fields[fmt.Sprintf("field%02d", f)] = apiextensionsv1.JSONSchemaProps{
			Type:        []string{"string", "integer", "boolean"}[f%3],
			Description: fmt.Sprintf("Field %d of kind %d: what it sets, its default and when a change to it takes effect, as an operator's API reference says.", f, k),
		}
	}
	fields["template"] = apiextensionsv1.JSONSchemaProps{Type: "object", Description: "A nested object.", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"labels": {Type: "object", AdditionalProperties: &apiextensionsv1.JSONSchemaPropsOrBool{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
		"items":  {Type: "array", Items: &apiextensionsv1.JSONSchemaPropsOrArray{Schema: &apiextensionsv1.JSONSchemaProps{Type: "string"}}},
	}}
	return &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Properties: fields,
			XValidations: apiextensionsv1.ValidationRules{{Rule: "!has(self.field01) || self.field01 >= 0", Message: "field01 is not negative"}}},
		"status": {Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"phase": {Type: "string"}, "observedGeneration": {Type: "integer"}}},
	}}
}
