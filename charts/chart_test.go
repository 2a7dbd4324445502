package charts

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	controllers "orderly.dev/orderly/internal/controller"
)

// controllerNames are the names `orderly manager --controllers` takes, sorted.
func controllerNames() []string {
	var names []string
	for _, c := range controllers.All {
		names = append(names, c.Name)
	}
	slices.Sort(names)
	return names
}

func readFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(RepoRoot(), path))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The chart's copies of config/ are what config/ holds now: `make chart` was run.
func TestCopiesOfConfigAreCurrent(t *testing.T) {
	pairs := map[string]string{
		"config/prometheus/rules.yaml":       "charts/orderly/files/prometheus/rules.yaml",
		"config/grafana/orderly.json":        "charts/orderly/files/grafana/orderly.json",
		"config/rbac/tenant_admin_role.yaml": "charts/orderly/files/rbac/tenant_admin_role.yaml",
		"config/rbac/user_roles.yaml":        "charts/orderly/files/rbac/user_roles.yaml",
	}
	crds, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "crd", "bases", "*.yaml"))
	if err != nil || len(crds) == 0 {
		t.Fatalf("no CRDs in config/crd/bases (%v)", err)
	}
	for _, c := range crds {
		pairs["config/crd/bases/"+filepath.Base(c)] = "charts/orderly/crds/" + filepath.Base(c)
	}
	inChart, _ := filepath.Glob(filepath.Join(Dir(), "crds", "*"))
	if len(inChart) != len(crds) {
		t.Errorf("charts/orderly/crds holds %d files, config/crd/bases %d CRDs: run `make chart`", len(inChart), len(crds))
	}
	for from, to := range pairs {
		if !bytes.Equal(readFile(t, from), readFile(t, to)) {
			t.Errorf("%s differs from %s: run `make chart`", to, from)
		}
	}
}

// Every controller has its own role in the chart, and together with the manager's
// own (metrics-auth) they grant exactly what config/rbac/role.yaml grants: nothing
// lost in the split (a marker in a package that CHART_RBAC does not list) and nothing
// more.
func TestControllerRolesAddUpToManagerRole(t *testing.T) {
	want := map[string]bool{"metrics-auth": true, "tenant_admin_role": true, "user_roles": true}
	for _, name := range controllerNames() {
		want[name] = true
	}
	files, _ := filepath.Glob(filepath.Join(Dir(), "files", "rbac", "*.yaml"))
	have := map[string]bool{}
	for _, f := range files {
		have[strings.TrimSuffix(filepath.Base(f), ".yaml")] = true
	}
	for name := range want {
		if !have[name] {
			t.Errorf("charts/orderly/files/rbac/%s.yaml is missing: add the controller to CHART_RBAC in the Makefile and run `make chart`", name)
		}
	}
	for name := range have {
		if !want[name] {
			t.Errorf("charts/orderly/files/rbac/%s.yaml is not a controller's: remove it from CHART_RBAC", name)
		}
	}

	var split []Permission
	for name := range want {
		if name == "tenant_admin_role" || name == "user_roles" {
			continue
		}
		var role rbacv1.ClusterRole
		if err := yaml.Unmarshal(readFile(t, "charts/orderly/files/rbac/"+name+".yaml"), &role); err != nil {
			t.Fatal(err)
		}
		if len(role.Rules) == 0 {
			t.Errorf("files/rbac/%s.yaml grants nothing: its packages in CHART_RBAC have no +kubebuilder:rbac markers", name)
		}
		split = append(split, RulePermissions("", role.Rules)...)
	}
	var whole rbacv1.ClusterRole
	if err := yaml.Unmarshal(readFile(t, "config/rbac/role.yaml"), &whole); err != nil {
		t.Fatal(err)
	}
	if d := Diff(Sorted(split), Sorted(RulePermissions("", whole.Rules))); d != "" {
		t.Errorf("the chart's per-controller roles (+) and config/rbac/role.yaml (-) differ: run `make manifests chart`\n%s", d)
	}
}

// Every value in values.yaml is in the table of charts/orderly/README.md with its
// default, and the table documents no value that does not exist.
func TestEveryValueIsDocumented(t *testing.T) {
	var values map[string]any
	if err := yaml.Unmarshal(readFile(t, "charts/orderly/values.yaml"), &values); err != nil {
		t.Fatal(err)
	}
	rows := map[string]any{} // key -> documented default
	row := regexp.MustCompile("^\\| `([^`]+)` \\| `([^`]*)` \\| (.+) \\|$")
	for _, line := range strings.Split(string(readFile(t, "charts/orderly/README.md")), "\n") {
		m := row.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		var def any
		if err := yaml.Unmarshal([]byte(m[2]), &def); err != nil {
			t.Errorf("README.md: the default of %s, %s, is not YAML: %v", m[1], m[2], err)
		}
		if strings.TrimSpace(m[3]) == "" {
			t.Errorf("README.md: %s has no description", m[1])
		}
		rows[m[1]] = def
	}
	// A row documents a value and everything below it (resources, say); the leaves
	// of values.yaml are scalars, lists and empty maps.
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		if def, ok := rows[prefix]; ok {
			if !reflect.DeepEqual(normalize(t, def), normalize(t, v)) {
				t.Errorf("README.md says %s defaults to %v; values.yaml says %v", prefix, def, v)
			}
			delete(rows, prefix)
			return
		}
		m, ok := v.(map[string]any)
		if !ok || len(m) == 0 {
			t.Errorf("values.yaml: %s is not documented in the table of charts/orderly/README.md", prefix)
			return
		}
		for k, sub := range m {
			walk(strings.TrimPrefix(prefix+"."+k, "."), sub)
		}
	}
	walk("", values)
	for key := range rows {
		t.Errorf("README.md documents %s, which values.yaml does not have", key)
	}
}

// normalize makes YAML numbers comparable whichever way they were read.
func normalize(t *testing.T, v any) any {
	b, err := yaml.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	var out any
	if err := yaml.Unmarshal(b, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

func template(t *testing.T, set ...string) []*unstructured.Unstructured {
	t.Helper()
	ctx := context.Background()
	helm, err := Helm(ctx)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Template(ctx, helm, "orderly-system", set...)
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

func deployment(t *testing.T, objs []*unstructured.Unstructured) *appsv1.Deployment {
	t.Helper()
	o := Find(objs, "Deployment", "orderly-manager")
	if o == nil {
		t.Fatal("the chart renders no Deployment orderly-manager")
	}
	var d appsv1.Deployment
	if err := Into(o, &d); err != nil {
		t.Fatal(err)
	}
	return &d
}

// The defaults: every controller with its role, the manager highly available and
// locked down.
func TestTemplateDefaults(t *testing.T) {
	objs := template(t)
	if Find(objs, "ConfigMap", "orderly-grafana-dashboard") != nil {
		t.Error("the Grafana dashboard's ConfigMap is rendered by default; metrics.grafanaDashboard.enabled is false")
	}
	d := deployment(t, objs)
	if *d.Spec.Replicas != 2 {
		t.Errorf("replicas: %d, want 2", *d.Spec.Replicas)
	}
	pod := d.Spec.Template.Spec
	if pod.ServiceAccountName != "orderly-manager" {
		t.Errorf("serviceAccountName %q", pod.ServiceAccountName)
	}
	if psc := pod.SecurityContext; psc == nil || psc.RunAsNonRoot == nil || !*psc.RunAsNonRoot ||
		psc.SeccompProfile == nil || psc.SeccompProfile.Type != corev1.SeccompProfileTypeRuntimeDefault {
		t.Errorf("pod securityContext %+v: want runAsNonRoot and seccomp RuntimeDefault", psc)
	}
	c := pod.Containers[0]
	if sc := c.SecurityContext; sc == nil || sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation ||
		sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem ||
		sc.Capabilities == nil || !slices.Equal(sc.Capabilities.Drop, []corev1.Capability{"ALL"}) {
		t.Errorf("container securityContext %+v: want no privilege escalation, a read-only root filesystem, all capabilities dropped", sc)
	}
	if c.LivenessProbe == nil || c.ReadinessProbe == nil || c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" {
		t.Errorf("probes: liveness %+v, readiness %+v", c.LivenessProbe, c.ReadinessProbe)
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}
	if c.Image != "orderly:dev" {
		t.Errorf("image %q, want orderly:dev (the chart's appVersion)", c.Image)
	}
	for _, arg := range []string{"manager", "--controllers=" + strings.Join(controllerNames(), ","), "--leader-elect=true", "--metrics-secure",
		"--metrics-bind-address=:8443", "--webhook-service=orderly-webhook", "--webhook-secret=orderly-webhook-tls", "--tenant-bindable-clusterroles=edit,view"} {
		if !slices.Contains(c.Args, arg) {
			t.Errorf("args %q lack %q", c.Args, arg)
		}
	}
	if Find(objs, "PodDisruptionBudget", "orderly-manager") == nil {
		t.Error("no PodDisruptionBudget")
	}
	for _, svc := range []string{"orderly-webhook", "orderly-metrics"} {
		if Find(objs, "Service", svc) == nil {
			t.Errorf("no Service %s", svc)
		}
	}
	for _, name := range append(controllerNames(), "metrics-auth") {
		if Find(objs, "ClusterRole", "orderly-manager-"+name) == nil || Find(objs, "ClusterRoleBinding", "orderly-manager-"+name) == nil {
			t.Errorf("no ClusterRole and ClusterRoleBinding orderly-manager-%s", name)
		}
	}
	for _, kind := range []string{"ServiceMonitor", "PrometheusRule", "Certificate", "Issuer"} {
		for _, o := range objs {
			if o.GetKind() == kind {
				t.Errorf("%s %s rendered by default", kind, o.GetName())
			}
		}
	}
	// The rendered RBAC grants the ServiceAccount what config/rbac grants the manager.
	granted, err := Granted(objs, "orderly-system", "orderly-manager")
	if err != nil {
		t.Fatal(err)
	}
	configRBAC, err := ReadManifests(configRBACFiles(t)...)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Granted(configRBAC, "orderly-system", "orderly-manager")
	if err != nil {
		t.Fatal(err)
	}
	if d := Diff(granted, want); d != "" {
		t.Errorf("the chart (+) and config/rbac (-) grant orderly-manager different permissions:\n%s", d)
	}
}

func configRBACFiles(t *testing.T) []string {
	files, err := filepath.Glob(filepath.Join(RepoRoot(), "config", "rbac", "*.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, f := range files {
		out = append(out, "config/rbac/"+filepath.Base(f))
	}
	return out
}

// A controller switched off is not run and gets no RBAC: what the ServiceAccount is
// granted shrinks by exactly what no other controller needs.
func TestDisabledControllerGetsNoRBAC(t *testing.T) {
	all := template(t)
	for _, name := range controllerNames() {
		t.Run(name, func(t *testing.T) {
			objs := template(t, "controllers."+name+".enabled=false")
			if o := Find(objs, "ClusterRole", "orderly-manager-"+name); o != nil {
				t.Errorf("ClusterRole %s rendered", o.GetName())
			}
			if o := Find(objs, "ClusterRoleBinding", "orderly-manager-"+name); o != nil {
				t.Errorf("ClusterRoleBinding %s rendered", o.GetName())
			}
			var others []string
			for _, n := range controllerNames() {
				if n != name {
					others = append(others, n)
				}
			}
			c := deployment(t, objs).Spec.Template.Spec.Containers[0]
			if !slices.Contains(c.Args, "--controllers="+strings.Join(others, ",")) {
				t.Errorf("args %q: want --controllers=%s", c.Args, strings.Join(others, ","))
			}
			// What only this controller needed is gone; what the others need stays.
			var withOthers []*unstructured.Unstructured
			for _, o := range all {
				if !strings.HasPrefix(o.GetName(), "orderly-manager-"+name) {
					withOthers = append(withOthers, o)
				}
			}
			want, err := Granted(withOthers, "orderly-system", "orderly-manager")
			if err != nil {
				t.Fatal(err)
			}
			got, err := Granted(objs, "orderly-system", "orderly-manager")
			if err != nil {
				t.Fatal(err)
			}
			if d := Diff(got, want); d != "" {
				t.Errorf("with %s off, the ServiceAccount is granted (+) more or (-) less than the other controllers' roles:\n%s", name, d)
			}
		})
	}
	// The webhook's Service is always there (the conversion webhook of the kinds
	// served in two versions), the kinds' aggregated role goes with SleepSchedule.
	if Find(template(t, "controllers.labelpolicy.enabled=false", "controllers.imagepolicy.webhook=false"), "Service", "orderly-webhook") == nil {
		t.Error("Service orderly-webhook not rendered with LabelPolicy off and no ImagePolicy webhook: the conversion webhook needs it")
	}
	if Find(template(t, "controllers.labelpolicy.enabled=false"), "Service", "orderly-webhook") == nil {
		t.Error("Service orderly-webhook not rendered for ImagePolicy's webhook")
	}
	if Find(template(t, "controllers.sleepschedule.enabled=false"), "ClusterRole", "orderly-manager-sleepschedule-kinds") != nil {
		t.Error("ClusterRole orderly-manager-sleepschedule-kinds rendered with SleepSchedule off")
	}
	var off []string
	for _, n := range controllerNames() {
		off = append(off, "controllers."+n+".enabled=false")
	}
	helm, err := Helm(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Template(context.Background(), helm, "orderly-system", off...); err == nil || !strings.Contains(err.Error(), "enable at least one controller") {
		t.Errorf("every controller off: want the chart to refuse, got %v", err)
	}
}

func TestTemplateOptions(t *testing.T) {
	t.Run("cert-manager with a self-signed Issuer", func(t *testing.T) {
		objs := template(t, "webhook.certManager.enabled=true")
		cert := Find(objs, "Certificate", "orderly-webhook")
		if cert == nil || Find(objs, "Issuer", "orderly-selfsigned") == nil {
			t.Fatal("want a Certificate orderly-webhook and an Issuer orderly-selfsigned")
		}
		dns, _, _ := unstructured.NestedStringSlice(cert.Object, "spec", "dnsNames")
		if !slices.Contains(dns, "orderly-webhook.orderly-system.svc") {
			t.Errorf("dnsNames %q lack the webhook Service", dns)
		}
		pod := deployment(t, objs).Spec.Template.Spec
		c := pod.Containers[0]
		if !slices.Contains(c.Args, "--webhook-cert-dir=/etc/orderly/webhook-certs") || slices.Contains(c.Args, "--webhook-secret=orderly-webhook-tls") {
			t.Errorf("args %q: want --webhook-cert-dir and no --webhook-secret", c.Args)
		}
		if len(c.VolumeMounts) != 1 || c.VolumeMounts[0].MountPath != "/etc/orderly/webhook-certs" ||
			len(pod.Volumes) != 1 || pod.Volumes[0].Secret == nil || pod.Volumes[0].Secret.SecretName != "orderly-webhook-cert" {
			t.Errorf("want the Secret orderly-webhook-cert mounted at /etc/orderly/webhook-certs; mounts %+v, volumes %+v", c.VolumeMounts, pod.Volumes)
		}
	})
	t.Run("cert-manager with the cluster's issuer", func(t *testing.T) {
		objs := template(t, "webhook.certManager.enabled=true", "webhook.certManager.issuerRef.name=corp-ca", "webhook.certManager.issuerRef.kind=ClusterIssuer")
		if Find(objs, "Issuer", "orderly-selfsigned") != nil {
			t.Error("an Issuer rendered although issuerRef names one")
		}
		ref, _, _ := unstructured.NestedStringMap(Find(objs, "Certificate", "orderly-webhook").Object, "spec", "issuerRef")
		if ref["name"] != "corp-ca" || ref["kind"] != "ClusterIssuer" {
			t.Errorf("issuerRef %v", ref)
		}
	})
	t.Run("ServiceMonitor, PrometheusRule and metrics readers", func(t *testing.T) {
		objs := template(t, "metrics.serviceMonitor.enabled=true", "metrics.prometheusRule.enabled=true",
			"metrics.readers[0].name=prometheus", "metrics.readers[0].namespace=monitoring")
		sm := Find(objs, "ServiceMonitor", "orderly")
		if sm == nil {
			t.Fatal("no ServiceMonitor")
		}
		if jl, _, _ := unstructured.NestedString(sm.Object, "spec", "jobLabel"); jl != "app.kubernetes.io/name" {
			t.Errorf("jobLabel %q: the rules select job=\"orderly\"", jl)
		}
		rule := Find(objs, "PrometheusRule", "orderly")
		if rule == nil {
			t.Fatal("no PrometheusRule")
		}
		var rules map[string]any
		if err := yaml.Unmarshal(readFile(t, "config/prometheus/rules.yaml"), &rules); err != nil {
			t.Fatal(err)
		}
		groups, _, _ := unstructured.NestedSlice(rule.Object, "spec", "groups")
		if !reflect.DeepEqual(normalize(t, groups), normalize(t, rules["groups"])) {
			t.Error("the PrometheusRule's groups are not config/prometheus/rules.yaml's")
		}
		var b rbacv1.ClusterRoleBinding
		if o := Find(objs, "ClusterRoleBinding", "orderly-metrics-reader"); o == nil || Into(o, &b) != nil ||
			b.RoleRef.Name != "orderly-metrics-reader" || len(b.Subjects) != 1 || b.Subjects[0].Namespace != "monitoring" || b.Subjects[0].Name != "prometheus" {
			t.Errorf("want monitoring/prometheus bound to orderly-metrics-reader, got %+v", b)
		}
	})
	t.Run("image by digest and more bindable ClusterRoles", func(t *testing.T) {
		objs := template(t, "image.repository=registry.example/orderly", "image.digest=sha256:0123", "controllers.tenant.bindableClusterRoles={edit,view,auditor}")
		c := deployment(t, objs).Spec.Template.Spec.Containers[0]
		if c.Image != "registry.example/orderly@sha256:0123" {
			t.Errorf("image %q", c.Image)
		}
		granted, err := Granted(objs, "orderly-system", "orderly-manager")
		if err != nil {
			t.Fatal(err)
		}
		if !slices.Contains(granted, Permission{APIGroup: rbacv1.GroupName, Resource: "clusterroles", ResourceName: "auditor", Verb: "bind"}) {
			t.Error("no bind on the ClusterRole auditor that Tenants may bind")
		}
		if !slices.Contains(c.Args, "--tenant-bindable-clusterroles=edit,view,auditor") {
			t.Errorf("args %q", c.Args)
		}
	})
	t.Run("the Grafana dashboard for the sidecar", func(t *testing.T) {
		var want any
		if err := json.Unmarshal(readFile(t, "config/grafana/orderly.json"), &want); err != nil {
			t.Fatal(err)
		}
		dashboard := func(objs []*unstructured.Unstructured) *corev1.ConfigMap {
			t.Helper()
			o := Find(objs, "ConfigMap", "orderly-grafana-dashboard")
			if o == nil {
				t.Fatal("no ConfigMap orderly-grafana-dashboard")
			}
			var cm corev1.ConfigMap
			if err := Into(o, &cm); err != nil {
				t.Fatal(err)
			}
			var got any
			if err := json.Unmarshal([]byte(cm.Data["orderly.json"]), &got); err != nil {
				t.Fatalf("orderly.json is not JSON: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Error("the ConfigMap's orderly.json is not config/grafana/orderly.json")
			}
			return &cm
		}
		cm := dashboard(template(t, "metrics.grafanaDashboard.enabled=true"))
		if cm.Labels["grafana_dashboard"] != "1" || cm.Namespace != "orderly-system" || len(cm.Annotations) != 0 {
			t.Errorf("by default: labels %v, namespace %q, annotations %v; want grafana_dashboard: \"1\" in the release's namespace", cm.Labels, cm.Namespace, cm.Annotations)
		}
		cm = dashboard(template(t, "metrics.grafanaDashboard.enabled=true", "metrics.grafanaDashboard.labelKey=dashboards",
			"metrics.grafanaDashboard.labelValue=orderly", "metrics.grafanaDashboard.namespace=monitoring", "metrics.grafanaDashboard.annotations.grafana_folder=Orderly"))
		if cm.Labels["dashboards"] != "orderly" || cm.Labels["grafana_dashboard"] != "" || cm.Namespace != "monitoring" || cm.Annotations["grafana_folder"] != "Orderly" {
			t.Errorf("labels %v, namespace %q, annotations %v", cm.Labels, cm.Namespace, cm.Annotations)
		}
	})
	t.Run("no people's roles", func(t *testing.T) {
		objs := template(t, "rbac.userRoles=false")
		if Find(objs, "ClusterRole", "orderly-tenant-admin") != nil || Find(objs, "ClusterRole", "orderly-platform-admin") != nil {
			t.Error("people's ClusterRoles rendered with rbac.userRoles=false")
		}
	})
}

// config/default reaches config/crd and config/rbac through kustomizations that list
// their files (written by `make chart`): a CRD or RBAC file not listed would be missing
// from `kubectl apply -k config/default` (and from the e2e comparison with the chart).
func TestKustomizationsListEveryFile(t *testing.T) {
	for kustomization, glob := range map[string]string{
		"config/crd/kustomization.yaml": "config/crd/bases/*.yaml",
		"config/rbac/Kustomization":     "config/rbac/*.yaml",
	} {
		var k struct {
			Resources []string `json:"resources"`
		}
		if err := yaml.Unmarshal(readFile(t, kustomization), &k); err != nil {
			t.Fatal(err)
		}
		files, err := filepath.Glob(filepath.Join(RepoRoot(), glob))
		if err != nil {
			t.Fatal(err)
		}
		dir := filepath.Dir(filepath.Join(RepoRoot(), kustomization))
		var want []string
		for _, f := range files {
			rel, err := filepath.Rel(dir, f)
			if err != nil {
				t.Fatal(err)
			}
			want = append(want, rel)
		}
		slices.Sort(want)
		got := slices.Sorted(slices.Values(k.Resources))
		if !slices.Equal(got, want) {
			t.Errorf("%s lists %q; the files are %q: run `make chart`", kustomization, got, want)
		}
	}
}

// Without leader election, two replicas would both reconcile: the chart refuses it.
// One replica gets no PodDisruptionBudget, which would block every node drain.
func TestTemplateSingleReplica(t *testing.T) {
	helm, err := Helm(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Template(context.Background(), helm, "orderly-system", "leaderElection.enabled=false"); err == nil || !strings.Contains(err.Error(), "needs replicas: 1") {
		t.Errorf("leader election off with 2 replicas: want the chart to refuse, got %v", err)
	}
	objs := template(t, "leaderElection.enabled=false", "replicas=1")
	if !slices.Contains(deployment(t, objs).Spec.Template.Spec.Containers[0].Args, "--leader-elect=false") {
		t.Error("want --leader-elect=false")
	}
	if Find(objs, "PodDisruptionBudget", "orderly-manager") != nil {
		t.Error("a PodDisruptionBudget for one replica")
	}
}
