//go:build e2e

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/charts"
	controllers "orderly.dev/orderly/internal/controller"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/test/launch"
)

// runTool runs a command as the cluster's administrator and returns its output.
func runTool(t *testing.T, stdin []byte, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), name, args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+devcluster.KubeconfigPath(clusterName),
		// helm keeps its cache and configuration there; the run's directory takes them.
		"HELM_CACHE_HOME="+filepath.Join(runDir, "helm", "cache"), "HELM_CONFIG_HOME="+filepath.Join(runDir, "helm", "config"),
		"HELM_DATA_HOME="+filepath.Join(runDir, "helm", "data"))
	cmd.Stdin = bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s%s", filepath.Base(name), strings.Join(args, " "), err, out, stderr.String())
	}
	return out
}

func kubectlBin(t *testing.T) string {
	t.Helper()
	bins, err := devcluster.EnsureBinaries(context.Background(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	return bins.Kubectl
}

func helmBin(t *testing.T) string {
	t.Helper()
	bin, err := charts.Helm(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// TestInstallManifestsAreAcceptedAndAgree: the chart's default manifests and
// `kubectl kustomize config/default` pass a server-side dry run against the cluster's
// API server (schemas, CEL, admission), and install the same thing: the same objects
// besides RBAC, the same permissions for the manager's ServiceAccount, the same
// ClusterRoles for people and the same manager Deployment.
func TestInstallManifestsAreAcceptedAndAgree(t *testing.T) {
	g := NewWithT(t)
	kubectl, helm := kubectlBin(t), helmBin(t)
	rendered, err := charts.Template(context.Background(), helm, managerNamespace)
	g.Expect(err).NotTo(HaveOccurred())
	kustomized := runTool(t, nil, kubectl, "kustomize", filepath.Join(charts.RepoRoot(), "config", "default"))
	fromKustomize, err := charts.Decode(kustomized)
	g.Expect(err).NotTo(HaveOccurred())

	// Dry runs: the API server validates every object as if it were applied. The
	// objects the suite installed already (the CRDs, config/rbac) are compared, not
	// fought over, so conflicts with their field managers are forced.
	var chartYAML bytes.Buffer
	for _, o := range rendered {
		b, err := o.MarshalJSON()
		g.Expect(err).NotTo(HaveOccurred())
		chartYAML.Write(b)
		chartYAML.WriteString("\n")
	}
	for name, manifest := range map[string][]byte{"chart": chartYAML.Bytes(), "config/default": kustomized} {
		out := runTool(t, manifest, kubectl, "apply", "--server-side", "--dry-run=server", "--force-conflicts", "--field-manager=orderly-e2e-install", "-f", "-")
		t.Logf("%s, server-side dry run:\n%s", name, out)
	}

	// The same objects, but for RBAC (compared by what it grants) and the Namespace
	// (`helm install --create-namespace` makes it).
	key := func(o *unstructured.Unstructured) string {
		return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
	}
	others := func(objs []*unstructured.Unstructured) []string {
		var out []string
		for _, o := range objs {
			if o.GetAPIVersion() != rbacv1.SchemeGroupVersion.String() && o.GetKind() != "Namespace" {
				out = append(out, key(o))
			}
		}
		slices.Sort(out)
		return out
	}
	g.Expect(others(rendered)).To(Equal(others(fromKustomize)))

	chartGrants, err := charts.Granted(rendered, managerNamespace, managerSA)
	g.Expect(err).NotTo(HaveOccurred())
	kustomizeGrants, err := charts.Granted(fromKustomize, managerNamespace, managerSA)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(charts.Diff(chartGrants, kustomizeGrants)).To(BeEmpty(), "the chart (+) and config/default (-) grant the manager different permissions")

	// The other ClusterRoles (for people, for scrapers) are the same, by name and rules.
	peoples := func(objs []*unstructured.Unstructured) map[string]rbacv1.ClusterRole {
		bound := map[string]bool{}
		for _, o := range objs {
			var b rbacv1.ClusterRoleBinding
			if o.GetKind() == "ClusterRoleBinding" && charts.Into(o, &b) == nil && slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
				return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == managerNamespace && s.Name == managerSA
			}) {
				bound[b.RoleRef.Name] = true
			}
		}
		out := map[string]rbacv1.ClusterRole{}
		for _, o := range objs {
			var r rbacv1.ClusterRole
			if o.GetKind() == "ClusterRole" && !bound[o.GetName()] && o.GetLabels()[tenancyv1alpha1.ResourcesAggregationLabel] == "" {
				g.Expect(charts.Into(o, &r)).To(Succeed())
				out[r.Name] = rbacv1.ClusterRole{Rules: r.Rules, AggregationRule: r.AggregationRule}
			}
		}
		return out
	}
	// What both aggregate into the manager's rights for Tenant spec.resources (the
	// roles have different names, so that a chart installed beside config/rbac does
	// not collide): the same rules.
	aggregated := func(objs []*unstructured.Unstructured) []rbacv1.PolicyRule {
		var out []rbacv1.PolicyRule
		for _, o := range objs {
			var r rbacv1.ClusterRole
			if o.GetKind() == "ClusterRole" && o.GetLabels()[tenancyv1alpha1.ResourcesAggregationLabel] == "true" {
				g.Expect(charts.Into(o, &r)).To(Succeed())
				out = append(out, r.Rules...)
			}
		}
		return out
	}
	g.Expect(aggregated(rendered)).NotTo(BeEmpty())
	g.Expect(aggregated(rendered)).To(Equal(aggregated(fromKustomize)))
	fromChart := peoples(rendered)
	g.Expect(fromChart).To(HaveKey("orderly-tenant-admin"))
	g.Expect(fromChart).To(HaveKey("orderly-metrics-reader"))
	g.Expect(fromChart).To(Equal(peoples(fromKustomize)))

	var a, b appsv1.Deployment
	g.Expect(charts.Into(charts.Find(rendered, "Deployment", "orderly-manager"), &a)).To(Succeed())
	g.Expect(charts.Into(charts.Find(fromKustomize, "Deployment", "orderly-manager"), &b)).To(Succeed())
	g.Expect(a.Spec.Replicas).To(Equal(b.Spec.Replicas))
	pa, pb := a.Spec.Template.Spec, b.Spec.Template.Spec
	g.Expect(pa.ServiceAccountName).To(Equal(pb.ServiceAccountName))
	g.Expect(pa.SecurityContext).To(Equal(pb.SecurityContext))
	ca, cb := pa.Containers[0], pb.Containers[0]
	g.Expect(ca.Image).To(Equal(cb.Image))
	g.Expect(ca.SecurityContext).To(Equal(cb.SecurityContext))
	g.Expect(ca.Resources).To(Equal(cb.Resources))
	g.Expect(ca.LivenessProbe.HTTPGet.Path).To(Equal(cb.LivenessProbe.HTTPGet.Path))
	g.Expect(ca.ReadinessProbe.HTTPGet.Path).To(Equal(cb.ReadinessProbe.HTTPGet.Path))
	// config/manager relies on the binary's defaults where the chart spells them out.
	for _, arg := range cb.Args {
		g.Expect(ca.Args).To(ContainElement(arg), "config/default's manager runs with %s; the chart's does not", arg)
	}
}

// TestHelmInstallRunsAsTheChartsServiceAccount installs the chart for real, runs the
// manager as the chart's ServiceAccount with the Deployment's own flags (kwok runs no
// container), so that the chart's RBAC is all it has, and sees a Tenant made Ready.
// Switching a controller off with `helm upgrade` takes its RBAC away.
func TestHelmInstallRunsAsTheChartsServiceAccount(t *testing.T) {
	g := NewWithT(t)
	ctx := context.Background()
	const ns, release = "orderly-helm-e2e", "orderly"
	helm := helmBin(t)
	// The suite's manager would reconcile the same objects: it stops for this test.
	withoutDefaultManager(t)

	// The suite's cluster has the ClusterRoles for people already (`orderly dev up`
	// installs them), so this release leaves them out; the CRDs, also there, are
	// skipped by helm as it skips existing CRDs.
	runTool(t, nil, helm, "install", release, charts.Dir(), "--namespace", ns, "--create-namespace", "--set", "rbac.userRoles=false",
		// kwok's nodes are tainted: without the toleration the pods are never scheduled.
		"--set", "tolerations[0].key=kwok.x-k8s.io/node,tolerations[0].operator=Exists,tolerations[0].effect=NoSchedule")
	t.Cleanup(func() {
		runTool(t, nil, helm, "uninstall", release, "--namespace", ns, "--wait")
		_ = k.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		// Nothing of the release is left cluster-wide.
		var roles rbacv1.ClusterRoleList
		NewWithT(t).Expect(k.List(context.Background(), &roles, client.MatchingLabels{"app.kubernetes.io/instance": release, "app.kubernetes.io/managed-by": "Helm"})).To(Succeed())
		NewWithT(t).Expect(roles.Items).To(BeEmpty())
	})

	var d appsv1.Deployment
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orderly-manager"}, &d)).To(Succeed())
	g.Expect(*d.Spec.Replicas).To(Equal(int32(2)))
	for _, name := range []string{"orderly-webhook", "orderly-metrics"} {
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.Service{})).To(Succeed())
	}
	// The pods pass admission and are scheduled with the chart's security context.
	g.Eventually(func(g Gomega) {
		g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orderly-manager"}, &d)).To(Succeed())
		g.Expect(d.Status.ReadyReplicas).To(Equal(int32(2)))
	}, timeout, poll).Should(Succeed())

	// The manager as the chart's ServiceAccount, with the Deployment's flags but for
	// the addresses the launcher picks and --metrics-secure (the launcher scrapes
	// plain HTTP); outside the cluster it is told its namespace.
	var args []string
	for _, a := range d.Spec.Template.Spec.Containers[0].Args {
		if a == "manager" || a == "--metrics-secure" || strings.HasPrefix(a, "--metrics-bind-address") || strings.HasPrefix(a, "--health-probe-bind-address") {
			continue
		}
		args = append(args, a)
	}
	m, err := launch.Start(ctx, launch.Options{
		Bin:        managerBin,
		Kubeconfig: serviceAccountKubeconfig(t, ns, "orderly-manager"),
		Args:       append(args, "--leader-election-namespace", ns),
		LogPath:    managerLog,
	})
	g.Expect(err).NotTo(HaveOccurred(), "the manager does not start (its caches need list and watch on every kind it watches)")
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Error(err)
		}
	})
	g.Expect(waitLeading(m.MetricsURL, leaderWait)).To(Succeed())

	tn := tenant("e2e-helm", "Delete", "e2e-helm-dev")
	g.Expect(k.Create(ctx, tn)).To(Succeed())
	t.Cleanup(func() {
		// Deleted while the manager runs: its finalizer needs it.
		_ = k.Delete(context.Background(), tn)
		NewWithT(t).Eventually(func() bool {
			return apierrors.IsNotFound(k.Get(context.Background(), client.ObjectKeyFromObject(tn), tn))
		}, timeout, poll).Should(BeTrue())
	})
	waitTenantReady(g, tn.Name)

	sa := fmt.Sprintf("system:serviceaccount:%s:orderly-manager", ns)
	may := func(group, resource, verb string) bool {
		review := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: sa, ResourceAttributes: &authorizationv1.ResourceAttributes{Group: group, Resource: resource, Verb: verb},
		}}
		g.Expect(k.Create(ctx, review)).To(Succeed())
		return review.Status.Allowed
	}
	g.Expect(may("delivery.orderly.dev", "canaries", "patch")).To(BeTrue())

	// Canary off: its role and binding go, and with them what only Canary needed.
	runTool(t, nil, helm, "upgrade", release, charts.Dir(), "--namespace", ns, "--reuse-values", "--set", "controllers.canary.enabled=false")
	g.Eventually(func() bool {
		return apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "orderly-manager-canary"}, &rbacv1.ClusterRole{}))
	}, timeout, poll).Should(BeTrue())
	g.Expect(apierrors.IsNotFound(k.Get(ctx, client.ObjectKey{Name: "orderly-manager-canary"}, &rbacv1.ClusterRoleBinding{}))).To(BeTrue())
	g.Eventually(func() bool { return may("delivery.orderly.dev", "canaries", "patch") }, timeout, poll).Should(BeFalse())
	g.Expect(may("tenancy.orderly.dev", "tenants", "patch")).To(BeTrue())
	g.Expect(k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "orderly-manager"}, &d)).To(Succeed())
	var running []string
	for _, c := range controllers.All {
		if c.Name != "canary" {
			running = append(running, c.Name)
		}
	}
	slices.Sort(running)
	g.Expect(d.Spec.Template.Spec.Containers[0].Args).To(ContainElement("--controllers=" + strings.Join(running, ",")))
}

// serviceAccountKubeconfig writes a kubeconfig that carries a token of the
// ServiceAccount ns/name, so that whoever uses it has that RBAC and nothing more.
func serviceAccountKubeconfig(t *testing.T, ns, name string) string {
	t.Helper()
	tok, err := clientset.CoreV1().ServiceAccounts(ns).CreateToken(context.Background(), name,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To(int64(3600))}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("requesting a token for %s/%s: %v", ns, name, err)
	}
	raw, err := clientcmd.LoadFromFile(devcluster.KubeconfigPath(clusterName))
	if err != nil {
		t.Fatal(err)
	}
	cfg := clientcmdapi.NewConfig()
	cfg.Clusters["local"] = raw.Clusters[raw.Contexts[raw.CurrentContext].Cluster]
	cfg.AuthInfos[name] = &clientcmdapi.AuthInfo{Token: tok.Status.Token}
	cfg.Contexts[name] = &clientcmdapi.Context{Cluster: "local", AuthInfo: name}
	cfg.CurrentContext = name
	path := filepath.Join(t.TempDir(), name+".kubeconfig")
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestSamplesAreAccepted: every sample in config/samples (what `make run` applies and
// the docs point to) passes a server-side dry run: schemas, CEL rules and admission.
// The samples' namespaces are created for real first, as `make run` does (a dry run
// creates nothing to put objects in).
//
// The v1beta1 samples go through the CRDs' conversion: a test before this one may have
// run a manager with a webhook that pointed the CRDs at itself, so the test first waits
// until the suite's manager (which serves none) has set their strategy back to None.
func TestSamplesAreAccepted(t *testing.T) {
	g := NewWithT(t)
	for _, name := range []string{"devdatabases.data.orderly.dev", "sleepschedules.power.orderly.dev"} {
		g.Eventually(func(g Gomega) {
			crd := &unstructured.Unstructured{}
			crd.SetAPIVersion("apiextensions.k8s.io/v1")
			crd.SetKind("CustomResourceDefinition")
			g.Expect(k.Get(context.Background(), client.ObjectKey{Name: name}, crd)).To(Succeed())
			strategy, _, _ := unstructured.NestedString(crd.Object, "spec", "conversion", "strategy")
			g.Expect(strategy).To(Equal("None"), "conversion of %s", name)
		}, 2*time.Minute, time.Second).Should(Succeed())
	}
	kubectl, dir := kubectlBin(t), filepath.Join(charts.RepoRoot(), "config", "samples")
	runTool(t, nil, kubectl, "apply", "-f", filepath.Join(dir, "00-namespaces.yaml"))
	out := runTool(t, nil, kubectl, "apply", "--dry-run=server", "-f", dir)
	t.Logf("config/samples, server-side dry run:\n%s", out)
}
