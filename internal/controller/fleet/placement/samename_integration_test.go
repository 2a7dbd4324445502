//go:build integration

package placement

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
)

// TestSameNameProfileInAnotherNamespace: a second ClusterProfile named like a real
// member (eu1) in another namespace, without credentials, is a cluster of its own:
// the real member keeps its connection, its place in the policy's status and its
// drift repair, whether the copy is selected or not, names the real member's Secret
// or not, and when it goes.
func TestSameNameProfileInAnotherNamespace(t *testing.T) {
	ctx := context.Background()
	const ns, impostorNS = "twin", "elsewhere" // "elsewhere" sorts before "fleet"
	genuine := types.NamespacedName{Namespace: fleetNamespace, Name: "eu1"}
	impostor := types.NamespacedName{Namespace: impostorNS, Name: "eu1"}
	makeNamespace(t, ns)
	makeNamespace(t, impostorNS)
	if err := k.Create(ctx, deployment(ns, "web", "web:1", 0)); err != nil {
		t.Fatal(err)
	}
	if err := k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"from": "hub"}}); err != nil {
		t.Fatal(err)
	}
	if err := k.Create(ctx, &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"},
			},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu", "env": "test"}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	eu := members["eu1"].client

	// realPlaced: the policy Ready with the real member listed, healthy and synced,
	// and, when the impostor is selected, the impostor as a cluster of its own.
	realPlaced := func(impostorSelected bool) func() error {
		return func() error {
			pp := getPolicy(t, ns, "web")
			want := 1
			if impostorSelected {
				want = 2
			}
			if len(pp.Status.Clusters) != want || pp.Status.SelectedClusters != int32(want) {
				return fmt.Errorf("clusters %+v (selected %d), want %d", pp.Status.Clusters, pp.Status.SelectedClusters, want)
			}
			r := clusterStatus(pp, genuine)
			if r == nil || r.Phase != fleetv1alpha1.ClusterHealthy || r.Error != "" || r.LastSync == nil || r.Applied != 2 {
				return fmt.Errorf("%s: %+v, want Healthy, synced, 2 applied, no error", genuine, r)
			}
			if impostorSelected {
				i := clusterStatus(pp, impostor)
				if i == nil || i.Phase != fleetv1alpha1.ClusterUnreachable || !strings.Contains(i.Error, "no working credentials") {
					return fmt.Errorf("%s: %+v, want Unreachable for want of credentials", impostor, i)
				}
				// Named distinguishably: an unreachable selected cluster keeps the policy
				// from Synced, and the message says which.
				if c := condition(pp, ConditionSynced); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, impostor.String()) || strings.Contains(c.Message, genuine.String()) {
					return fmt.Errorf("Synced = %+v, want False naming %s only", c, impostor)
				}
			} else if c := condition(pp, ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
				return fmt.Errorf("Ready = %+v", c)
			}
			var d clusterinventoryv1alpha1.PlacementDecision
			if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
				return err
			}
			if len(d.Decisions) != 1 || d.Decisions[0].ClusterProfileRef != (clusterinventoryv1alpha1.ClusterProfileReference{Namespace: genuine.Namespace, Name: genuine.Name}) {
				return fmt.Errorf("decisions %+v, want only %s", d.Decisions, genuine)
			}
			return nil
		}
	}
	// repaired deletes the ConfigMap's copy on eu1 and waits for it to come back:
	// Resync is far off, so only the member's watch on the real connection brings it.
	repaired := func(when string) {
		t.Helper()
		if err := eu.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the deleted copy put back on eu1 "+when, func() error {
			var cm corev1.ConfigMap
			return eu.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)
		})
	}
	realHealthy := func() error {
		var cp clusterinventoryv1alpha1.ClusterProfile
		if err := k.Get(ctx, genuine, &cp); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(cp.Status.Conditions, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("%s: ControlPlaneHealthy = %+v", genuine, c)
		}
		return nil
	}

	eventually(t, "placed on the real eu1", realPlaced(false))
	eventually(t, "the ConfigMap on eu1", func() error {
		var cm corev1.ConfigMap
		return eu.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)
	})
	before, err := memberDeployment("eu1", ns, "web")
	if err != nil {
		t.Fatal(err)
	}

	// 1. The copy appears, not selected by the policy and without credentials.
	cp := &clusterinventoryv1alpha1.ClusterProfile{
		ObjectMeta: metav1.ObjectMeta{Name: impostor.Name, Namespace: impostor.Namespace, Labels: map[string]string{"copy": "yes"}},
		Spec:       clusterinventoryv1alpha1.ClusterProfileSpec{ClusterManager: clusterinventoryv1alpha1.ClusterManager{Name: "someone-else"}},
	}
	if err := k.Create(ctx, cp); err != nil {
		t.Fatal(err)
	}
	consistently(t, 3*time.Second, "the real eu1 kept while an unselected copy exists", func() error {
		if err := realHealthy(); err != nil {
			return err
		}
		return realPlaced(false)()
	})
	repaired("with an unselected copy of its profile")

	// 2. The copy takes the real profile's labels: the policy selects both, as two
	// clusters.
	if err := k.Get(ctx, impostor, cp); err != nil {
		t.Fatal(err)
	}
	cp.Labels = map[string]string{"region": "eu", "env": "test"}
	if err := k.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "both listed, the real eu1 placed", realPlaced(true))
	repaired("with a selected copy of its profile")

	// 3. The copy names the real member's kubeconfig Secret: refused, the Secret
	// serves fleet/eu1 only.
	if err := k.Get(ctx, impostor, cp); err != nil {
		t.Fatal(err)
	}
	cp.Annotations = map[string]string{fleetv1alpha1.KubeconfigSecretAnnotation: "kubeconfig-eu1"}
	if err := k.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the copy refused the real member's Secret", func() error {
		var got clusterinventoryv1alpha1.ClusterProfile
		if err := k.Get(ctx, impostor, &got); err != nil {
			return err
		}
		c := meta.FindStatusCondition(got.Status.Conditions, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonNoCredentials || !strings.Contains(c.Message, "does not serve this cluster") {
			return fmt.Errorf("%s: ControlPlaneHealthy = %+v, want False, %s", impostor, c, ReasonNoCredentials)
		}
		return nil
	})
	consistently(t, 2*time.Second, "the real eu1 kept while the copy names its Secret", func() error {
		if err := realHealthy(); err != nil {
			return err
		}
		return realPlaced(true)()
	})
	repaired("with a copy naming its Secret")

	// 4. The copy goes: nothing changes for the real member.
	if err := k.Delete(ctx, cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the copy gone from the status", func() error {
		if err := k.Get(ctx, impostor, &clusterinventoryv1alpha1.ClusterProfile{}); !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s still there (%w)", impostor, err)
		}
		return realPlaced(false)()
	})
	consistently(t, 2*time.Second, "the real eu1 kept after the copy went", func() error {
		if err := realHealthy(); err != nil {
			return err
		}
		return realPlaced(false)()
	})
	repaired("after the copy went")
	after, err := memberDeployment("eu1", ns, "web")
	if err != nil || after.UID != before.UID {
		t.Fatalf("the Deployment on eu1 was replaced or deleted: before %s, after %s (%v)", before.UID, after.UID, err)
	}
}

// clusterStatus is the policy's entry for one ClusterProfile.
func clusterStatus(pp *fleetv1alpha1.PlacementPolicy, key types.NamespacedName) *fleetv1alpha1.ClusterStatus {
	for i, c := range pp.Status.Clusters {
		if c.Namespace == key.Namespace && c.Name == key.Name {
			return &pp.Status.Clusters[i]
		}
	}
	return nil
}
