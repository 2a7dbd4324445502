//go:build e2e

package attack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/scheme"
)

// member is one member cluster: a kube-apiserver and etcd (envtest), enough to hold
// the copies Orderly places there.
type member struct {
	client     client.Client
	kubeconfig []byte
}

// startMember starts a member cluster for the test and returns a client to it and an
// inline kubeconfig for Orderly.
func startMember(t *testing.T, name string) *member {
	t.Helper()
	assets, err := devcluster.EnsureEnvtestAssets(context.Background(), os.Stderr)
	if err != nil {
		t.Fatal(err)
	}
	e := &envtest.Environment{BinaryAssetsDirectory: assets}
	cfg, err := e.Start()
	if err != nil {
		t.Fatalf("starting member %s: %v", name, err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return &member{client: c, kubeconfig: inlineKubeconfig(t, cfg)}
}

// inlineKubeconfig writes cfg's address and client certificate as a kubeconfig.
func inlineKubeconfig(t *testing.T, cfg *rest.Config) []byte {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["member"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["orderly"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["member"] = &clientcmdapi.Context{Cluster: "member", AuthInfo: "orderly"}
	kc.CurrentContext = "member"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return raw
}

// register makes m the ClusterProfile ns/name (labelled), reached through a
// kubeconfig Secret in the manager's namespace that admits the namespaces allowed.
func register(t *testing.T, m *member, ns, name, secret string, lbls map[string]string, allowed ...string) {
	t.Helper()
	create(t, admin, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: managerNamespace, Name: secret,
		Annotations: map[string]string{fleetv1alpha1.ClusterProfileAnnotation: ns + "/" + name, fleetv1alpha1.AllowedNamespacesAnnotation: strings.Join(allowed, ",")}},
		Data: map[string][]byte{fleetv1alpha1.KubeconfigKey: m.kubeconfig}})
	create(t, admin, &clusterinventoryv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls, Annotations: map[string]string{fleetv1alpha1.KubeconfigSecretAnnotation: secret}},
		Spec:       clusterinventoryv1alpha1.ClusterProfileSpec{ClusterManager: clusterinventoryv1alpha1.ClusterManager{Name: "attack"}},
	})
}

// PlacementPolicy and member clusters: the platform places team-a's labelled
// ConfigMaps on member one (which admits team-a and team-b) and team-b's on member two
// (team-b only), whose ClusterProfile has the same name as member one's in another
// namespace. Mallory tries to change the placement, to read the members' inventory and
// credentials, to get her objects onto a member that does not admit her namespace,
// and to get team-b's objects copied; and member two's profile must never be taken
// for member one's.
func TestAttackPlacement(t *testing.T) {
	ctx := context.Background()
	g := NewWithT(t)
	for _, ns := range []string{"fleet", "fleet-b"} {
		namespace(t, ns, nil)
	}
	one, two := startMember(t, "one"), startMember(t, "two")
	register(t, one, "fleet", "east", "attack-member-one", map[string]string{"attack-region": "east"}, teamA, teamB)
	register(t, two, "fleet-b", "east", "attack-member-two", map[string]string{"attack-region": "east-b"}, teamB)
	drainOnCleanup(t, &fleetv1alpha1.PlacementPolicyList{})

	placed := map[string]string{"attack-placed": "yes"}
	policy := func(ns, region string) *fleetv1alpha1.PlacementPolicy {
		pp := &fleetv1alpha1.PlacementPolicy{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "attack-" + region}, Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", LabelSelector: &metav1.LabelSelector{MatchLabels: placed}}},
			ClusterSelector:   &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "attack-region", Operator: metav1.LabelSelectorOpIn, Values: []string{"east", "east-b"}}}},
		}}
		create(t, admin, pp)
		return pp
	}
	configMap := func(c client.Client, ns, name string) {
		create(t, c, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: placed}, Data: map[string]string{"owner": ns}})
	}
	on := func(m *member, ns, name string) func() error {
		return func() error {
			return m.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		}
	}
	absent := func(g Gomega, m *member, ns, name string) {
		g.ExpectWithOffset(1, apierrors.IsNotFound(on(m, ns, name)())).To(BeTrue(), "%s/%s is on the member", ns, name)
	}

	aPolicy := policy(teamA, "a")
	bPolicy := policy(teamB, "b")
	configMap(attacker, teamA, "mallorys")
	configMap(victim, teamB, "bobs")
	// Controls: each team's objects reach the members that admit its namespace.
	g.Eventually(on(one, teamA, "mallorys"), timeout, poll).Should(Succeed())
	g.Eventually(on(one, teamB, "bobs"), timeout, poll).Should(Succeed())
	g.Eventually(on(two, teamB, "bobs"), timeout, poll).Should(Succeed())

	t.Run("changing or making a placement", func(t *testing.T) {
		g := NewWithT(t)
		// She may read her namespace's policy (the viewer role), not change it.
		g.Expect(attacker.Get(ctx, client.ObjectKeyFromObject(aPolicy), &fleetv1alpha1.PlacementPolicy{})).To(Succeed())
		for _, patch := range []string{
			`{"spec":{"clusterSelector":null}}`,
			`{"spec":{"resourceSelectors":[{"apiVersion":"v1","kind":"Secret","labelSelector":{}}]}}`,
			`{"spec":{"deletionPolicy":"Orphan"}}`,
		} {
			forbiddenByRBAC(g, attacker.Patch(ctx, aPolicy.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(patch))))
		}
		forbiddenByRBAC(g, attacker.Get(ctx, client.ObjectKeyFromObject(bPolicy), &fleetv1alpha1.PlacementPolicy{}))
	})

	t.Run("reading the members' inventory and credentials", func(t *testing.T) {
		g := NewWithT(t)
		forbiddenByRBAC(g, attacker.List(ctx, &clusterinventoryv1alpha1.ClusterProfileList{}))
		forbiddenByRBAC(g, attacker.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: "east"}, &clusterinventoryv1alpha1.ClusterProfile{}))
		forbiddenByRBAC(g, attacker.Get(ctx, client.ObjectKey{Namespace: managerNamespace, Name: "attack-member-one"}, &corev1.Secret{}))
		forbiddenByRBAC(g, attacker.Create(ctx, &clusterinventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: teamA, Name: "east",
			Labels: map[string]string{"attack-region": "east"}, Annotations: map[string]string{fleetv1alpha1.KubeconfigSecretAnnotation: "attack-member-two"}}}, client.DryRunAll))
		// Control: the platform reads them.
		g.Expect(admin.List(ctx, &clusterinventoryv1alpha1.ClusterProfileList{})).To(Succeed())
	})

	t.Run("a member that does not admit her namespace", func(t *testing.T) {
		g := NewWithT(t)
		g.Eventually(func(g Gomega) {
			get(g, aPolicy)
			g.Expect(aPolicy.Status.ObservedGeneration).To(Equal(aPolicy.Generation))
			c := conditionOf(aPolicy.Status.Conditions, "Scheduled")
			g.Expect(c.Message).To(ContainSubstring("east"), "the cluster left out is named")
		}, timeout, poll).Should(Succeed())
		absent(g, two, teamA, "mallorys")
		g.Expect(apierrors.IsNotFound(two.client.Get(ctx, client.ObjectKey{Name: teamA}, &corev1.Namespace{}))).To(BeTrue(), "team-a's namespace was created on member two")
	})

	t.Run("team-b's objects through her namespace's policy", func(t *testing.T) {
		g := NewWithT(t)
		// Team-b's object, labelled as her policy selects, is team-b's policy's only:
		// nothing of team-b's lands in team-a's namespace on any member.
		for _, m := range []*member{one, two} {
			absent(g, m, teamA, "bobs")
		}
	})

	t.Run("a ClusterProfile of the same name in another namespace", func(t *testing.T) {
		g := NewWithT(t)
		// Team-a's copies are on member one only: fleet-b/east (member two) has the same
		// name as fleet/east but is another cluster, which does not admit team-a.
		g.Consistently(on(two, teamA, "mallorys"), 5*time.Second, poll).ShouldNot(Succeed())
		// Team-b's policy sees two clusters, by namespace and name.
		g.Eventually(func(g Gomega) {
			u := &unstructured.Unstructured{}
			u.SetGroupVersionKind(fleetv1alpha1.GroupVersion.WithKind("PlacementPolicy"))
			g.Expect(admin.Get(ctx, client.ObjectKeyFromObject(bPolicy), u)).To(Succeed())
			clusters, _, _ := unstructured.NestedSlice(u.Object, "status", "clusters")
			var keys []string
			for _, c := range clusters {
				m, _ := c.(map[string]any)
				keys = append(keys, fmt.Sprintf("%v/%v", m["namespace"], m["name"]))
			}
			g.Expect(keys).To(ConsistOf("fleet/east", "fleet-b/east"))
		}, timeout, poll).Should(Succeed())
	})
}
