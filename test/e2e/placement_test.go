//go:build e2e

package e2e

// Multi-cluster placement with the real binary: the run's cluster is the hub, two
// more local clusters (each with a kwok node, so Deployments become ready) are the
// members eu and us. Divide 60/40, an image override on us only, drift repaired on a
// member, us's API server killed → after unhealthyFor its replicas run on eu; started
// again → its Deployment is still there (never deleted) and replicas come back at
// returnRate.

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/scheme"
)

const placementWait = 3 * time.Minute

// upMembers starts one local cluster with one kwok node per region, one after the
// other (started at once, two clusters' components can pick the same free port),
// and returns their names and kubeconfig paths. They go when the test ends.
func upMembers(t *testing.T, ctx context.Context, regions ...string) (names, paths []string) {
	t.Helper()
	for _, region := range regions {
		name := devcluster.RunName("orderly-e2e-member-" + region)
		t.Cleanup(func() { _ = devcluster.Down(context.Background(), name, os.Stderr) })
		path, err := devcluster.Up(ctx, devcluster.Options{Name: name, Nodes: 1}, os.Stderr)
		if err != nil {
			t.Fatalf("starting member cluster %s: %v", name, err)
		}
		names, paths = append(names, name), append(paths, path)
	}
	return names, paths
}

// registerPlacementMember registers a member cluster on the hub (kubeconfig Secret
// in the manager's namespace, ClusterProfile) and returns a client to it.
func registerPlacementMember(t *testing.T, ctx context.Context, path, profile, region string) client.Client {
	t.Helper()
	kc, err := clientcmd.LoadFromFile(path)
	if err != nil {
		t.Fatal(err)
	}
	// Orderly takes only inline credentials: put the files' contents in.
	if err := clientcmdapi.FlattenConfig(kc); err != nil {
		t.Fatal(err)
	}
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := clientcmd.RESTConfigFromKubeConfig(raw)
	if err != nil {
		t.Fatal(err)
	}
	mc, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	secret := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "kubeconfig-" + profile, Namespace: managerNamespace,
			Annotations: map[string]string{fleetv1alpha1.ClusterProfileAnnotation: "fleet/" + profile, fleetv1alpha1.AllowedNamespacesAnnotation: "shop-e2e"}},
		Data: map[string][]byte{fleetv1alpha1.KubeconfigKey: raw},
	}
	if err := k.Create(ctx, secret); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete(context.Background(), secret) })
	cp := &clusterinventoryv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: profile, Namespace: "fleet", Labels: map[string]string{"region": region, "e2e": "placement"},
			Annotations: map[string]string{fleetv1alpha1.KubeconfigSecretAnnotation: secret.Name}},
		Spec: clusterinventoryv1alpha1.ClusterProfileSpec{ClusterManager: clusterinventoryv1alpha1.ClusterManager{Name: "e2e"}},
	}
	if err := k.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete(context.Background(), cp) })
	return mc
}

func placementWaitFor(t *testing.T, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(placementWait)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// placementNamespace holds the placed workload, on the hub and on the members.
const placementNamespace = "shop-e2e"

// memberReplicas checks the member's copy of the Deployment "web".
func memberReplicas(ctx context.Context, c client.Client, want int32, ready bool) func() error {
	return func() error {
		var d appsv1.Deployment
		if err := c.Get(ctx, client.ObjectKey{Namespace: placementNamespace, Name: "web"}, &d); err != nil {
			return err
		}
		if got := ptr.Deref(d.Spec.Replicas, 1); got != want {
			return fmt.Errorf("%d replicas, want %d", got, want)
		}
		if ready && d.Status.ReadyReplicas != want {
			return fmt.Errorf("%d of %d ready", d.Status.ReadyReplicas, want)
		}
		return nil
	}
}

func TestPlacementDivideFailoverReturn(t *testing.T) {
	ctx := context.Background()
	for _, ns := range []string{"fleet", "shop-e2e"} {
		if err := k.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !isAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	names, paths := upMembers(t, ctx, "eu", "us")
	eu := registerPlacementMember(t, ctx, paths[0], "eu", "eu")
	us := registerPlacementMember(t, ctx, paths[1], "us", "us")
	usCluster := names[1]

	const ns = placementNamespace
	l := map[string]string{"app": "web"}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: l},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](10),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "shop/web:1"}}},
			},
		},
	}
	if err := k.Create(ctx, dep); err != nil {
		t.Fatal(err)
	}
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			ClusterSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"e2e": "placement"}},
			Strategy:          fleetv1alpha1.StrategyDivide,
			WeightLabel:       "region",
			Weights:           []fleetv1alpha1.Weight{{LabelValue: "eu", Weight: 60}, {LabelValue: "us", Weight: 40}},
			Overrides: []fleetv1alpha1.Override{{
				ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"region": "us"}},
				Patches: []fleetv1alpha1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/containers/0/image",
					Value: &apiextensionsv1.JSON{Raw: []byte(`"registry.us.example/shop/web:1"`)}}},
			}},
			Failover: fleetv1alpha1.Failover{UnhealthyFor: metav1.Duration{Duration: 15 * time.Second}, ReturnRate: 2},
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = k.Delete(context.Background(), pp) })

	placementWaitFor(t, "60/40, ready on the members", func() error {
		if err := memberReplicas(ctx, eu, 6, true)(); err != nil {
			return fmt.Errorf("eu: %w", err)
		}
		if err := memberReplicas(ctx, us, 4, true)(); err != nil {
			return fmt.Errorf("us: %w", err)
		}
		return nil
	})
	var euDep, usDep appsv1.Deployment
	if err := eu.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &euDep); err != nil {
		t.Fatal(err)
	}
	if err := us.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &usDep); err != nil {
		t.Fatal(err)
	}
	if img := euDep.Spec.Template.Spec.Containers[0].Image; img != "shop/web:1" {
		t.Errorf("eu image %s, want the hub's", img)
	}
	if img := usDep.Spec.Template.Spec.Containers[0].Image; img != "registry.us.example/shop/web:1" {
		t.Errorf("us image %s, want the override", img)
	}

	// Drift on a member is repaired.
	euDep.Spec.Template.Spec.Containers[0].Image = "drifted:1"
	if err := eu.Update(ctx, &euDep, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	placementWaitFor(t, "drift repaired on eu", func() error {
		var d appsv1.Deployment
		if err := eu.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != "shop/web:1" {
			return fmt.Errorf("image %s", img)
		}
		return nil
	})

	// us's API server dies: after unhealthyFor its 4 replicas run on eu.
	t.Cleanup(func() { _ = devcluster.StartStopped(context.Background(), usCluster, os.Stderr) })
	if err := devcluster.StopComponent(ctx, usCluster, "kube-apiserver"); err != nil {
		t.Fatal(err)
	}
	placementWaitFor(t, "failover to eu", func() error {
		if err := memberReplicas(ctx, eu, 10, true)(); err != nil {
			return fmt.Errorf("eu: %w", err)
		}
		return nil
	})

	// us comes back: its Deployment was never deleted, and replicas return at 2 a minute.
	if err := devcluster.StartStopped(ctx, usCluster, os.Stderr); err != nil {
		t.Fatal(err)
	}
	placementWaitFor(t, "us returning with the first 2 replicas", func() error {
		var got fleetv1alpha1.PlacementPolicy
		if err := k.Get(ctx, client.ObjectKeyFromObject(pp), &got); err != nil {
			return err
		}
		for _, c := range got.Status.Clusters {
			if c.Name == "us" && c.Phase != fleetv1alpha1.ClusterReturning {
				return fmt.Errorf("us is %s", c.Phase)
			}
		}
		if err := memberReplicas(ctx, us, 2, false)(); err != nil {
			return fmt.Errorf("us: %w", err)
		}
		return memberReplicas(ctx, eu, 8, false)()
	})
	var back appsv1.Deployment
	if err := us.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &back); err != nil || back.UID != usDep.UID {
		t.Fatalf("us's Deployment was deleted or replaced on reconnect: before %s, after %s (%v)", usDep.UID, back.UID, err)
	}
	placementWaitFor(t, "us back to 4 after a minute", func() error {
		if err := memberReplicas(ctx, us, 4, false)(); err != nil {
			return fmt.Errorf("us: %w", err)
		}
		return memberReplicas(ctx, eu, 6, false)()
	})
}
