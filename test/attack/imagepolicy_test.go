//go:build e2e

package attack

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"strings"
	"testing"

	. "github.com/onsi/gomega"
	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
)

// ImagePolicy and ImageScan: the platform allows images from three registries in both
// teams' namespaces. Mallory runs an image from elsewhere, adds one to a running pod
// as an ephemeral container (`kubectl debug`), tries to except herself (the policy,
// a clean ImageScan of her own, the generated admission objects), and has the image
// scanner resolve an image on a registry she controls while naming team-b's pull
// Secret: the scanner must send there her own credentials only, never team-b's nor the
// platform's registry credentials.

// scannerRegistries are two loopback registries that ask for Basic credentials and
// record what they are sent: the attacker's own (she chose its address) and the
// platform's private registry. They start before the manager, which is told they
// speak plain HTTP and given the platform registry's credentials.
type scannerRegistries struct {
	attacker, platform *captureServer
}

// platformRegistrySecret is the manager's --imagescan-registry-secret.
const platformRegistrySecret = "attack-platform-registry"

// registry answers as a registry that wants Basic credentials and holds nothing.
func registry(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Docker-Distribution-API-Version", "registry/2.0")
	if r.Header.Get("Authorization") == "" {
		w.Header().Set("WWW-Authenticate", `Basic realm="attack"`)
		w.WriteHeader(http.StatusUnauthorized)
		return
	}
	if r.URL.Path == "/v2/" || r.URL.Path == "/v2" {
		w.WriteHeader(http.StatusOK)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(http.StatusNotFound)
	_, _ = fmt.Fprint(w, `{"errors":[{"code":"MANIFEST_UNKNOWN","message":"manifest unknown"}]}`)
}

func startScannerRegistries() *scannerRegistries {
	return &scannerRegistries{attacker: startCapture(registry), platform: startCapture(registry)}
}

func (s *scannerRegistries) managerFlags() []string {
	return []string{"--imagescan-insecure-registries=" + s.attacker.Host + "," + s.platform.Host,
		"--imagescan-registry-secret=" + platformRegistrySecret}
}

func (s *scannerRegistries) close() {
	s.attacker.Close()
	s.platform.Close()
}

// dockerConfig is a kubernetes.io/dockerconfigjson Secret with user:password for host.
func dockerConfig(ns, name, host, user, password string) *corev1.Secret {
	auth := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Type: corev1.SecretTypeDockerConfigJson,
		StringData: map[string]string{corev1.DockerConfigJsonKey: fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, host, auth)}}
}

// grantDebug lets user add ephemeral containers in ns (`kubectl debug`), whether or
// not the roles she holds include it, so that what refuses her image is admission.
func grantDebug(t *testing.T, ns, user string) {
	t.Helper()
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "attack-debug"}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{""}, Resources: []string{"pods/ephemeralcontainers"}, Verbs: []string{"get", "update", "patch"}}}}
	create(t, admin, role)
	create(t, admin, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "attack-debug"},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name},
		Subjects: []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}}})
}

// debug adds an ephemeral container of image to pod as c, through the
// pods/ephemeralcontainers subresource, as `kubectl debug` does.
// A conflict (the kwok node wrote the pod's status meanwhile) is retried on a fresh
// read.
func debug(ctx context.Context, c client.Client, pod *corev1.Pod, image string) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &corev1.Pod{}
		if err := admin.Get(ctx, client.ObjectKeyFromObject(pod), p); err != nil {
			return err
		}
		p.Spec.EphemeralContainers = append(p.Spec.EphemeralContainers, corev1.EphemeralContainer{EphemeralContainerCommon: corev1.EphemeralContainerCommon{
			Name: fmt.Sprintf("debug-%d", len(p.Spec.EphemeralContainers)), Image: image}})
		return c.SubResource("ephemeralcontainers").Update(ctx, p)
	})
}

func TestAttackImagePolicy(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	attackerRegistry, platformRegistry := registries.attacker, registries.platform
	p := &policyv1alpha1.ImagePolicy{ObjectMeta: metav1.ObjectMeta{Name: "attack-images"}, Spec: policyv1alpha1.ImagePolicySpec{
		Match: policyv1alpha1.ImagePolicyMatch{NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{
			Key: teamLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{"a", "b"}}}}},
		AllowedRegistries: []string{"registry.attack.test/*", attackerRegistry.Host + "/*", platformRegistry.Host + "/*"},
		MaxSeverity:       policyv1alpha1.MaxSeverityCritical,
		Unscanned:         &policyv1alpha1.UnscannedPolicy{Action: policyv1alpha1.UnscannedAllow},
		Action:            policyv1alpha1.ImageActionDeny,
	}}
	create(t, admin, p)
	pod := func(name, image string, pullSecrets ...string) *corev1.Pod {
		pd := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: name}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: image}}, Tolerations: kwokTolerations}}
		for _, s := range pullSecrets {
			pd.Spec.ImagePullSecrets = append(pd.Spec.ImagePullSecrets, corev1.LocalObjectReference{Name: s})
		}
		return pd
	}
	// The native policy reaches admission a moment after the policy is written.
	g.Eventually(func(g Gomega) {
		refused(g, attacker.Create(ctx, pod("probe", "docker.io/library/nginx:1"), client.DryRunAll), "docker.io/library/nginx")
	}, timeout, poll).Should(Succeed())

	t.Run("an image from a registry the policy does not allow", func(t *testing.T) {
		g := NewWithT(t)
		d := deployment(teamA, "outsider")
		d.Spec.Template.Spec.Containers[0].Image = "docker.io/library/nginx:1"
		refused(g, attacker.Create(ctx, d), "docker.io/library/nginx")
		refused(g, attacker.Create(ctx, pod("outsider", "ghcr.io/mallory/tool:1")), "ghcr.io/mallory/tool")
		// Control: an allowed registry.
		ok := deployment(teamA, "insider")
		ok.Spec.Template.Spec.Containers[0].Image = "registry.attack.test/app:1"
		g.Expect(attacker.Create(ctx, ok, client.DryRunAll)).To(Succeed())
	})

	t.Run("an ephemeral container with a disallowed image", func(t *testing.T) {
		g := NewWithT(t)
		grantDebug(t, teamA, attackerUser)
		target := pod("debuggee", "registry.attack.test/app:1")
		create(t, attacker, target)
		refused(g, debug(ctx, attacker, target, "docker.io/library/busybox:1"), "docker.io/library/busybox")
		get(g, target)
		g.Expect(target.Spec.EphemeralContainers).To(BeEmpty())
		// Control: a debug image from an allowed registry.
		g.Expect(debug(ctx, attacker, target, "registry.attack.test/debug:1")).To(Succeed())
	})

	t.Run("excepting herself", func(t *testing.T) {
		g := NewWithT(t)
		for _, patch := range []string{
			`{"spec":{"match":{"excludedNamespaces":["` + teamA + `"]}}}`,
			`{"spec":{"allowedRegistries":["*"]}}`,
			`{"spec":{"action":"Audit"}}`,
			`{"spec":{"ignore":[{"id":"CVE-2024-0001","reason":"mallory"}]}}`,
		} {
			forbiddenByRBAC(g, attacker.Patch(ctx, p.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))))
		}
		forbiddenByRBAC(g, attacker.Create(ctx, &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Name: "sha256-mallory-clean"},
			Spec: policyv1alpha1.ImageScanSpec{Repository: "docker.io/library/nginx"}}, client.DryRunAll))
		var scans policyv1alpha1.ImageScanList
		forbiddenByRBAC(g, attacker.List(ctx, &scans))
		g.Expect(admin.List(ctx, &scans)).To(Succeed())
		for _, sc := range scans.Items {
			forbiddenByRBAC(g, attacker.Status().Patch(ctx, sc.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(`{"status":{"vulnerabilities":null}}`))))
			forbiddenByRBAC(g, attacker.Delete(ctx, sc.DeepCopy()))
		}
		for _, o := range []client.Object{
			&admissionv1.ValidatingAdmissionPolicy{ObjectMeta: metav1.ObjectMeta{Name: "orderly-imagepolicy-" + p.Name}},
			&admissionv1.ValidatingAdmissionPolicyBinding{ObjectMeta: metav1.ObjectMeta{Name: "orderly-imagepolicy-" + p.Name}},
		} {
			forbiddenByRBAC(g, attacker.Delete(ctx, o))
		}
		// Control: the platform's exclusion lets her image in.
		g.Expect(admin.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"match":{"excludedNamespaces":["`+teamA+`"]}}}`)))).To(Succeed())
		t.Cleanup(func() {
			_ = admin.Patch(context.Background(), p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"match":{"excludedNamespaces":null}}}`)))
		})
		g.Eventually(func() error {
			return attacker.Create(ctx, pod("excluded", "docker.io/library/nginx:1"), client.DryRunAll)
		}, timeout, poll).Should(Succeed())
		g.Expect(admin.Patch(ctx, p, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"match":{"excludedNamespaces":null}}}`)))).To(Succeed())
		g.Eventually(func(g Gomega) {
			refused(g, attacker.Create(ctx, pod("excluded", "docker.io/library/nginx:1"), client.DryRunAll), "docker.io/library/nginx")
		}, timeout, poll).Should(Succeed())
	})

	t.Run("the scanner sends only her own credentials to her registry", func(t *testing.T) {
		g := NewWithT(t)
		const (
			bobsPassword     = "bob-registry-password"
			platformPassword = "platform-registry-password"
			mallorysPassword = "mallory-registry-password"
			teamBRepo        = "teamb/app"
			evilRepo         = "evil/app"
			evilWithOwnCreds = "evil/own"
			platformRepo     = "platform/base"
		)
		// Team-b's pull Secret for the same registry (the attacker's address stands in
		// for a registry both use), the platform's for its own registry.
		create(t, victim, dockerConfig(teamB, "regcred", attackerRegistry.Host, "bob", bobsPassword))
		create(t, admin, dockerConfig(managerNamespace, platformRegistrySecret, platformRegistry.Host, "platform", platformPassword))
		create(t, attacker, dockerConfig(teamA, "mallory-regcred", attackerRegistry.Host, "mallory", mallorysPassword))
		bPod := pod("app", attackerRegistry.Host+"/"+teamBRepo+":1", "regcred")
		bPod.Namespace = teamB
		create(t, victim, bPod)
		// Hers: one names team-b's pull Secret (she has none of that name), one her
		// own; and one on the platform's registry with none.
		create(t, attacker, pod("evil", attackerRegistry.Host+"/"+evilRepo+":1", "regcred"))
		create(t, attacker, pod("evil-own", attackerRegistry.Host+"/"+evilWithOwnCreds+":1", "mallory-regcred"))
		create(t, attacker, pod("base", platformRegistry.Host+"/"+platformRepo+":1"))

		basic := func(user, password string) string {
			return "Basic " + base64.StdEncoding.EncodeToString([]byte(user+":"+password))
		}
		authFor := func(c *captureServer, repo string) []string {
			var out []string
			for _, r := range c.requests() {
				if strings.Contains(r.URI, "/"+repo+"/") {
					out = append(out, r.Header.Get("Authorization"))
				}
			}
			return out
		}
		// Controls: each credential reaches its own registry for its own repository.
		g.Eventually(func() []string { return authFor(attackerRegistry, teamBRepo) }, timeout, poll).Should(ContainElement(basic("bob", bobsPassword)))
		g.Eventually(func() []string { return authFor(attackerRegistry, evilWithOwnCreds) }, timeout, poll).Should(ContainElement(basic("mallory", mallorysPassword)))
		g.Eventually(func() []string { return authFor(platformRegistry, platformRepo) }, timeout, poll).Should(ContainElement(basic("platform", platformPassword)))
		g.Eventually(func() []string { return authFor(attackerRegistry, evilRepo) }, timeout, poll).ShouldNot(BeEmpty())
		// Her repositories never got team-b's credentials; her registry never got the
		// platform's, nor the manager's token.
		for _, repo := range []string{evilRepo, evilWithOwnCreds} {
			for _, a := range authFor(attackerRegistry, repo) {
				g.Expect(a).To(BeElementOf("", basic("mallory", mallorysPassword)), "sent for %s", repo)
			}
		}
		neverContains(g, attackerRegistry, map[string]string{"the platform's registry password": platformPassword, "the manager's token": managerToken(t)})
		neverContains(g, platformRegistry, map[string]string{"team-b's registry password": bobsPassword, "her registry password": mallorysPassword})
	})
}
