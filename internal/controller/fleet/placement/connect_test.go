package placement

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	clocktesting "k8s.io/utils/clock/testing"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/scheme"
)

// kubeconfigSecret is a Secret in namespace ns serving the profile named by serves.
func kubeconfigSecret(t *testing.T, ns, name, serves string) *corev1.Secret {
	t.Helper()
	kc := clientcmdapi.NewConfig()
	kc.Clusters["m"] = &clientcmdapi.Cluster{Server: "https://127.0.0.1:1"}
	kc.AuthInfos["m"] = &clientcmdapi.AuthInfo{Token: "t"}
	kc.Contexts["m"] = &clientcmdapi.Context{Cluster: "m", AuthInfo: "m"}
	kc.CurrentContext = "m"
	raw, err := clientcmd.Write(*kc)
	if err != nil {
		t.Fatal(err)
	}
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: map[string]string{fleetv1alpha1.ClusterProfileAnnotation: serves}},
		Data:       map[string][]byte{fleetv1alpha1.KubeconfigKey: raw},
	}
}

func profileNaming(ns, name, secret string) *clusterinventoryv1alpha1.ClusterProfile {
	cp := &clusterinventoryv1alpha1.ClusterProfile{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	if secret != "" {
		cp.Annotations = map[string]string{fleetv1alpha1.KubeconfigSecretAnnotation: secret}
	}
	return cp
}

// TestProfilesOfOneNameAreDifferentMembers: a ClusterProfile named like a member in
// another namespace gets no connection from the member's Secret (tied to the
// member's namespace and name), cannot use a Secret outside the manager's namespace,
// and neither its refusal nor its lack of credentials touches the member's
// connection.
func TestProfilesOfOneNameAreDifferentMembers(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	member := types.NamespacedName{Namespace: "fleet", Name: "eu1"}
	impostor := types.NamespacedName{Namespace: "elsewhere", Name: "eu1"}
	c := fake.NewClientBuilder().WithScheme(scheme.New()).WithObjects(
		kubeconfigSecret(t, managerNS, "kubeconfig-eu1", "fleet/eu1"),
		// Tied to the impostor, but outside the manager's namespace: never read.
		kubeconfigSecret(t, "elsewhere", "own-eu1", "elsewhere/eu1"),
		profileNaming("fleet", "eu1", "kubeconfig-eu1"),
	).WithStatusSubresource(&clusterinventoryv1alpha1.ClusterProfile{}).Build()
	reg := newRegistry(ctx, clocktesting.NewFakePassiveClock(time.Now()), defaultTimings(), nil)
	defer reg.remove(member)
	r := &HealthReconciler{Client: c, APIReader: c, Clock: clocktesting.NewFakePassiveClock(time.Now()), Namespace: managerNS, members: reg, timings: defaultTimings()}

	connected, err := r.connect(ctx, profileNaming("fleet", "eu1", "kubeconfig-eu1"), "kubeconfig-eu1")
	if err != nil || connected.key != member || reg.get(member) != connected {
		t.Fatalf("connect(%s) = %v, %v; want its own connection", member, connected, err)
	}
	for _, tc := range []struct {
		name, secret, wantErr string
	}{
		{"the member's Secret", "kubeconfig-eu1", `its annotation fleet.orderly.dev/cluster-profile must be "elsewhere/eu1"`},
		{"a Secret in its own namespace", "own-eu1", "the kubeconfig Secret " + managerNS + "/own-eu1 does not exist"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := r.connect(ctx, profileNaming(impostor.Namespace, impostor.Name, tc.secret), tc.secret)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("connect(%s) = %v, want %q", impostor, err, tc.wantErr)
			}
			if reg.get(impostor) != nil || reg.get(member) != connected {
				t.Fatalf("the registry changed: %s → %v, %s → %v", impostor, reg.get(impostor), member, reg.get(member))
			}
		})
	}

	// The impostor's health reconciles, with the member's Secret named and then
	// without credentials, leave the member's connection alone.
	for _, secret := range []string{"kubeconfig-eu1", ""} {
		cp := profileNaming(impostor.Namespace, impostor.Name, secret)
		if err := c.Create(ctx, cp); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: impostor}); err != nil {
			t.Fatalf("reconciling %s (secret %q): %v", impostor, secret, err)
		}
		if reg.get(impostor) != nil || reg.get(member) != connected {
			t.Fatalf("after %s's reconcile (secret %q): %s → %v, %s → %v", impostor, secret, impostor, reg.get(impostor), member, reg.get(member))
		}
		if err := c.Delete(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := r.Reconcile(ctx, ctrl.Request{NamespacedName: impostor}); err != nil || reg.get(member) != connected {
		t.Fatalf("after %s went: %v, %s → %v", impostor, err, member, reg.get(member))
	}
	var got clusterinventoryv1alpha1.ClusterProfile
	if err := c.Get(ctx, client.ObjectKey{Namespace: "fleet", Name: "eu1"}, &got); err != nil || len(got.Status.Conditions) != 0 {
		t.Fatalf("the member's profile was written: %+v, %v", got.Status.Conditions, err)
	}
}

const managerNS = "orderly-system"
