//go:build integration

package placement

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
)

// TestDuplicateOverrideDriftAndOwnership places a Deployment and a ConfigMap on both
// members, changes the image on the us member only, repairs drift there, never
// touches an object Orderly did not create, and removes its copies (only them)
// when the policy goes.
func TestDuplicateOverrideDriftAndOwnership(t *testing.T) {
	ctx := context.Background()
	const ns = "dup"
	makeNamespace(t, ns)
	if err := k.Create(ctx, deployment(ns, "web", "nginx:1.27", 3)); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"settings", "foreign"} {
		if err := k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"from": "hub"}}); err != nil {
			t.Fatal(err)
		}
	}
	// Someone else's ConfigMaps on eu1: "foreign" has the name of one the policy
	// places, "bystander" is just there.
	eu := members["eu1"].client
	if err := eu.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"foreign", "bystander"} {
		if err := eu.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"from": "member"}}); err != nil {
			t.Fatal(err)
		}
	}
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{
				{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "foreign"},
			},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "test"}},
			Strategy:        fleetv1alpha1.StrategyDuplicate,
			Overrides: []fleetv1alpha1.Override{{
				ClusterSelector: metav1.LabelSelector{MatchLabels: map[string]string{"region": "us"}},
				Patches: []fleetv1alpha1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/containers/0/image",
					Value: &apiextensionsv1.JSON{Raw: []byte(`"registry.us.example/nginx:1.27"`)}}},
			}},
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the Deployment on both members, the image overridden on us1 only", func() error {
		for member, image := range map[string]string{"eu1": "nginx:1.27", "us1": "registry.us.example/nginx:1.27"} {
			d, err := memberDeployment(member, ns, "web")
			if err != nil {
				return err
			}
			if got := d.Spec.Template.Spec.Containers[0].Image; got != image || ptr.Deref(d.Spec.Replicas, 0) != 3 {
				return fmt.Errorf("%s: image %s replicas %d, want %s and 3", member, got, ptr.Deref(d.Spec.Replicas, 0), image)
			}
			if d.Labels[fleetv1alpha1.PolicyUIDLabel] != string(getPolicy(t, ns, "web").UID) {
				return fmt.Errorf("%s: no ownership label: %v", member, d.Labels)
			}
			managed := false
			for _, f := range d.ManagedFields {
				managed = managed || f.Manager == fleetv1alpha1.FieldManager && f.Operation == metav1.ManagedFieldsOperationApply
			}
			if !managed {
				return fmt.Errorf("%s: not applied by %s", member, fleetv1alpha1.FieldManager)
			}
		}
		return nil
	})
	eventually(t, "status and PlacementDecision", func() error {
		got := getPolicy(t, ns, "web")
		if got.Status.SelectedClusters != 2 || condition(got, ConditionScheduled) == nil || condition(got, ConditionScheduled).Status != metav1.ConditionTrue {
			return fmt.Errorf("status %+v", got.Status)
		}
		// "foreign" exists on eu1 and is not the policy's: reported, not taken over.
		if c := condition(got, ConditionSynced); c == nil || c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "foreign exists on the member and is not this policy's") {
			return fmt.Errorf("Synced = %+v, want the foreign ConfigMap reported", c)
		}
		var d clusterinventoryv1alpha1.PlacementDecision
		if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &d); err != nil {
			return err
		}
		if len(d.Decisions) != 2 || d.Decisions[0].ClusterProfileRef.Name != "eu1" || d.Decisions[1].ClusterProfileRef.Name != "us1" {
			return fmt.Errorf("decisions %+v", d.Decisions)
		}
		return nil
	})
	var foreign corev1.ConfigMap
	if err := eu.Get(ctx, client.ObjectKey{Namespace: ns, Name: "foreign"}, &foreign); err != nil || foreign.Data["from"] != "member" || len(foreign.Labels) != 0 {
		t.Fatalf("the member's own ConfigMap was changed: %+v, %v", foreign, err)
	}

	// Drift on us1: the image edited, the ConfigMap deleted. Resync is far off, so
	// only the watch on the member brings the repair. (Not on eu1: the foreign
	// ConfigMap fails every sync there, and the retries would repair it too.)
	us := members["us1"].client
	const usImage = "registry.us.example/nginx:1.27"
	d, err := memberDeployment("us1", ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	d.Spec.Template.Spec.Containers[0].Image = "evil:latest"
	if err := us.Update(ctx, d, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	if err := us.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "drift repaired", func() error {
		d, err := memberDeployment("us1", ns, "web")
		if err != nil {
			return err
		}
		if img := d.Spec.Template.Spec.Containers[0].Image; img != usImage {
			return fmt.Errorf("us1 image %s", img)
		}
		var cm corev1.ConfigMap
		return us.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)
	})

	// Readiness on a member reaches the policy's status through the watch too.
	d, err = memberDeployment("us1", ns, "web")
	if err != nil {
		t.Fatal(err)
	}
	// As the member's Deployment controller would, once it has rolled out the spec.
	d.Status.ObservedGeneration, d.Status.Replicas, d.Status.UpdatedReplicas, d.Status.ReadyReplicas = d.Generation, 3, 3, 3
	if err := us.Status().Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	eventually(t, "us1's ready replicas in the status", func() error {
		got := getPolicy(t, ns, "web")
		for _, c := range got.Status.Clusters {
			if c.Name == "us1" && c.ReadyReplicas == 3 && got.Status.ReadyReplicas == 3 {
				return nil
			}
		}
		return fmt.Errorf("status %+v", got.Status)
	})

	// A hub change reaches the members.
	var hubD = deployment(ns, "web", "", 0)
	if err := k.Get(ctx, client.ObjectKeyFromObject(hubD), hubD); err != nil {
		t.Fatal(err)
	}
	hubD.Spec.Replicas = ptr.To[int32](5)
	if err := k.Update(ctx, hubD); err != nil {
		t.Fatal(err)
	}
	eventually(t, "hub change propagated", func() error {
		if err := wantReplicas("eu1", ns, "web", 5)(); err != nil {
			return err
		}
		return wantReplicas("us1", ns, "web", 5)()
	})

	// Deleting the policy removes Orderly's copies and nothing else.
	if err := k.Delete(ctx, getPolicy(t, ns, "web")); err != nil {
		t.Fatal(err)
	}
	eventually(t, "copies removed from the members", func() error {
		for member, tm := range members {
			var cm corev1.ConfigMap
			if err := tm.client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: settings still there (%w)", member, err)
			}
			if _, err := memberDeployment(member, ns, "web"); !apierrors.IsNotFound(err) {
				return fmt.Errorf("%s: web still there (%w)", member, err)
			}
		}
		var pp fleetv1alpha1.PlacementPolicy
		if err := k.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, &pp); !apierrors.IsNotFound(err) {
			return fmt.Errorf("policy still there (%w)", err)
		}
		return nil
	})
	for _, name := range []string{"foreign", "bystander"} {
		var cm corev1.ConfigMap
		if err := eu.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &cm); err != nil || cm.Data["from"] != "member" {
			t.Errorf("the member's own ConfigMap %s was touched: %+v, %v", name, cm, err)
		}
	}
}

// TestDivideFailoverAndReturn splits 10 replicas 60/40 by region, keeps them put
// while us1 is down for less than unhealthyFor, moves them to eu1 after it, and
// after us1 recovers brings them back at returnRate without deleting anything there.
func TestDivideFailoverAndReturn(t *testing.T) {
	ctx := context.Background()
	const ns = "div"
	makeNamespace(t, ns)
	if err := k.Create(ctx, deployment(ns, "api", "api:1", 10)); err != nil {
		t.Fatal(err)
	}
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment",
				LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"placed": "yes"}}}},
			Strategy:    fleetv1alpha1.StrategyDivide,
			WeightLabel: "region",
			Weights:     []fleetv1alpha1.Weight{{LabelValue: "eu", Weight: 60}, {LabelValue: "us", Weight: 40}},
			Failover:    fleetv1alpha1.Failover{UnhealthyFor: metav1.Duration{Duration: time.Minute}, ReturnRate: 2},
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "60/40", func() error {
		if err := wantReplicas("eu1", ns, "api", 6)(); err != nil {
			return err
		}
		return wantReplicas("us1", ns, "api", 4)()
	})
	before, err := memberDeployment("us1", ns, "api")
	if err != nil {
		t.Fatal(err)
	}

	members["us1"].proxy.stop()
	eventually(t, "us1 seen unhealthy, within hysteresis", func() error {
		if ph := clusterPhase(getPolicy(t, ns, "api"), "us1"); ph != fleetv1alpha1.ClusterUnhealthy {
			return fmt.Errorf("us1 is %s", ph)
		}
		return nil
	})
	// Several probe rounds while the clock stands still: nothing moves.
	consistently(t, 2*time.Second, "replicas stay put before unhealthyFor", func() error {
		if ph := clusterPhase(getPolicy(t, ns, "api"), "us1"); ph != fleetv1alpha1.ClusterUnhealthy {
			return fmt.Errorf("us1 is %s", ph)
		}
		return wantReplicas("eu1", ns, "api", 6)()
	})

	fakeClock.Step(61 * time.Second)
	eventually(t, "failover: us1's replicas on eu1", func() error {
		if ph := clusterPhase(getPolicy(t, ns, "api"), "us1"); ph != fleetv1alpha1.ClusterFailed {
			return fmt.Errorf("us1 is %s", ph)
		}
		return wantReplicas("eu1", ns, "api", 10)()
	})

	members["us1"].proxy.start(t)
	eventually(t, "us1 returning: the first 2 replicas back", func() error {
		if ph := clusterPhase(getPolicy(t, ns, "api"), "us1"); ph != fleetv1alpha1.ClusterReturning {
			return fmt.Errorf("us1 is %s", ph)
		}
		if err := wantReplicas("us1", ns, "api", 2)(); err != nil {
			return err
		}
		return wantReplicas("eu1", ns, "api", 8)()
	})
	after, err := memberDeployment("us1", ns, "api")
	if err != nil || after.UID != before.UID {
		t.Fatalf("us1's Deployment was replaced or deleted on reconnect: before %s, after %s (%v)", before.UID, after.UID, err)
	}

	fakeClock.Step(time.Minute)
	eventually(t, "us1 back to its full share", func() error {
		if ph := clusterPhase(getPolicy(t, ns, "api"), "us1"); ph != fleetv1alpha1.ClusterHealthy {
			return fmt.Errorf("us1 is %s", ph)
		}
		if err := wantReplicas("us1", ns, "api", 4)(); err != nil {
			return err
		}
		return wantReplicas("eu1", ns, "api", 6)()
	})
	got := getPolicy(t, ns, "api")
	if ph := clusterPhase(got, "eu1"); ph != fleetv1alpha1.ClusterHealthy {
		t.Errorf("eu1 is %s, want Healthy throughout", ph)
	}
	if got.Status.Replicas != 10 {
		t.Errorf("status.replicas = %d, want 10", got.Status.Replicas)
	}
}

// TestHealthFromTheFleetManager plays a fleet manager that writes ControlPlaneHealthy
// itself (fm1 is annotated so): Orderly writes its probe's result to its own
// condition and never to the fleet manager's, and failover follows the fleet
// manager's verdict even while Orderly's probe succeeds. Removing the annotation hands
// ControlPlaneHealthy back to Orderly.
func TestHealthFromTheFleetManager(t *testing.T) {
	ctx := context.Background()
	profile := func() *clusterinventoryv1alpha1.ClusterProfile {
		var cp clusterinventoryv1alpha1.ClusterProfile
		if err := k.Get(ctx, client.ObjectKey{Namespace: fleetNamespace, Name: "fm1"}, &cp); err != nil {
			t.Fatal(err)
		}
		return &cp
	}
	eventually(t, "Orderly's probe result in its own condition, none in ControlPlaneHealthy", func() error {
		cp := profile()
		if c := meta.FindStatusCondition(cp.Status.Conditions, ConditionReachable); c == nil || c.Status != metav1.ConditionTrue || c.Reason != ReasonReadyzOK {
			return fmt.Errorf("%s = %+v", ConditionReachable, c)
		}
		if c := meta.FindStatusCondition(cp.Status.Conditions, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy); c != nil {
			return fmt.Errorf("Orderly wrote ControlPlaneHealthy: %+v", c)
		}
		return nil
	})

	const ns = "fm"
	makeNamespace(t, ns)
	if err := k.Create(ctx, deployment(ns, "web", "web:1", 2)); err != nil {
		t.Fatal(err)
	}
	if err := k.Create(ctx, &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "web"}},
			ClusterSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"env": "fleetmanager"}},
			Failover:          fleetv1alpha1.Failover{UnhealthyFor: metav1.Duration{Duration: time.Minute}},
		},
	}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "placed while the fleet manager has said nothing", wantReplicas("fm1", ns, "web", 2))

	setFleetManagerHealth := func(status metav1.ConditionStatus, reason string) {
		cp := profile()
		meta.SetStatusCondition(&cp.Status.Conditions, metav1.Condition{Type: clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy,
			Status: status, Reason: reason, Message: "written by the fleet manager", LastTransitionTime: metav1.NewTime(fakeClock.Now())})
		if err := k.Status().Update(ctx, cp); err != nil {
			t.Fatal(err)
		}
	}
	setFleetManagerHealth(metav1.ConditionFalse, "AgentLost")
	eventually(t, "fm1 unhealthy on the fleet manager's word", func() error {
		if ph := clusterPhase(getPolicy(t, ns, "web"), "fm1"); ph != fleetv1alpha1.ClusterUnhealthy {
			return fmt.Errorf("fm1 is %s", ph)
		}
		return nil
	})
	consistently(t, 2*time.Second, "Orderly's succeeding probes leave the fleet manager's condition alone", func() error {
		c := meta.FindStatusCondition(profile().Status.Conditions, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy)
		if c == nil || c.Reason != "AgentLost" {
			return fmt.Errorf("ControlPlaneHealthy = %+v", c)
		}
		return nil
	})
	fakeClock.Step(61 * time.Second)
	eventually(t, "fm1 failed after unhealthyFor", func() error {
		if ph := clusterPhase(getPolicy(t, ns, "web"), "fm1"); ph != fleetv1alpha1.ClusterFailed {
			return fmt.Errorf("fm1 is %s", ph)
		}
		return nil
	})

	// Handing health back to Orderly: its probe's verdict replaces the fleet
	// manager's, and its own condition goes.
	cp := profile()
	delete(cp.Annotations, fleetv1alpha1.HealthSourceAnnotation)
	if err := k.Update(ctx, cp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "ControlPlaneHealthy written by Orderly again", func() error {
		cp := profile()
		if c := meta.FindStatusCondition(cp.Status.Conditions, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy); c == nil || c.Reason != ReasonReadyzOK {
			return fmt.Errorf("ControlPlaneHealthy = %+v", c)
		}
		if c := meta.FindStatusCondition(cp.Status.Conditions, ConditionReachable); c != nil {
			return fmt.Errorf("%s still there: %+v", ConditionReachable, c)
		}
		return nil
	})
}

// TestHubChangesReachMembers: a change on the hub of every placeable kind but the
// Deployment (TestDuplicateOverrideDriftAndOwnership has it) reaches the member at
// once: Resync is far off, so only the hub's watches bring it.
func TestHubChangesReachMembers(t *testing.T) {
	ctx := context.Background()
	const ns = "hub"
	makeNamespace(t, ns)
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "creds", Namespace: ns}, Data: map[string][]byte{"token": []byte("one")}}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "db"}, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "runner", Namespace: ns}}
	d := deployment(ns, "db", "postgres:17", 0)
	sts := &appsv1.StatefulSet{ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), ServiceName: "api", Selector: d.Spec.Selector, Template: d.Spec.Template}}
	for _, o := range []client.Object{secret, svc, sa, sts} {
		if err := k.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{
				{APIVersion: "v1", Kind: "Secret", Name: "creds"},
				{APIVersion: "v1", Kind: "Service", Name: "api"},
				{APIVersion: "v1", Kind: "ServiceAccount", Name: "runner"},
				{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db"},
			},
			ClusterSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"region": "eu"}},
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	eu := members["eu1"].client
	onMember := func(token string, port int32, team, image string) func() error {
		return func() error {
			var gotSecret corev1.Secret
			var gotSvc corev1.Service
			var gotSA corev1.ServiceAccount
			var gotSts appsv1.StatefulSet
			for _, o := range []client.Object{&gotSecret, &gotSvc, &gotSA, &gotSts} {
				name := map[client.Object]string{&gotSecret: "creds", &gotSvc: "api", &gotSA: "runner", &gotSts: "db"}[o]
				if err := eu.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, o); err != nil {
					return err
				}
			}
			switch {
			case string(gotSecret.Data["token"]) != token:
				return fmt.Errorf("Secret token %q, want %q", gotSecret.Data["token"], token)
			case len(gotSvc.Spec.Ports) != 1 || gotSvc.Spec.Ports[0].Port != port:
				return fmt.Errorf("Service ports %+v, want %d", gotSvc.Spec.Ports, port)
			case gotSA.Labels["team"] != team:
				return fmt.Errorf("ServiceAccount labels %v, want team=%q", gotSA.Labels, team)
			case gotSts.Spec.Template.Spec.Containers[0].Image != image:
				return fmt.Errorf("StatefulSet image %s, want %s", gotSts.Spec.Template.Spec.Containers[0].Image, image)
			}
			return nil
		}
	}
	eventually(t, "the four objects on eu1", onMember("one", 80, "", "postgres:17"))
	eventually(t, "the policy Ready", func() error {
		if c := condition(getPolicy(t, ns, "p"), ConditionReady); c == nil || c.Status != metav1.ConditionTrue {
			return fmt.Errorf("Ready = %+v", c)
		}
		return nil
	})
	// The reconciles that placed them are over (their own status changes bring a few
	// more): a change picked up now was seen by a watch.
	time.Sleep(2 * time.Second)

	secret.Data["token"] = []byte("two")
	svc.Spec.Ports[0].Port = 81
	sa.Labels = map[string]string{"team": "data"}
	sts.Spec.Template.Spec.Containers[0].Image = "postgres:18"
	for _, o := range []client.Object{secret, svc, sa, sts} {
		if err := k.Update(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "the hub's changes on eu1", onMember("two", 81, "data", "postgres:18"))
}

// TestWatchRefused: a member whose kubeconfig may not watch a placed kind says so
// on its ClusterProfile and is kept in sync by the short resync; the members that
// may are reported watched.
func TestWatchRefused(t *testing.T) {
	ctx := context.Background()
	const ns = "rbac"
	makeNamespace(t, ns)
	if err := k.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}, Data: map[string]string{"from": "hub"}}); err != nil {
		t.Fatal(err)
	}
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "settings"}},
			ClusterSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"env": "rbac"}},
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the members' CopiesWatched conditions", func() error {
		for name, want := range map[string]string{"eu1": ReasonWatching, "us1": ReasonWatching, "rb1": ReasonWatchRefused} {
			var cp clusterinventoryv1alpha1.ClusterProfile
			if err := k.Get(ctx, types.NamespacedName{Namespace: fleetNamespace, Name: name}, &cp); err != nil {
				return err
			}
			c := meta.FindStatusCondition(cp.Status.Conditions, ConditionCopiesWatched)
			if c == nil || c.Reason != want {
				return fmt.Errorf("%s: %s = %+v, want reason %s", name, ConditionCopiesWatched, c, want)
			}
			if want == ReasonWatchRefused && (c.Status != metav1.ConditionFalse || !strings.Contains(c.Message, "secrets")) {
				return fmt.Errorf("%s: %+v, want False naming secrets", name, c)
			}
		}
		return nil
	})
	rb := members["rb1"].client
	eventually(t, "the ConfigMap on rb1", func() error {
		var cm corev1.ConfigMap
		return rb.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)
	})
	if err := rb.Delete(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ConfigMap recreated on rb1 by the short resync", func() error {
		var cm corev1.ConfigMap
		return rb.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, &cm)
	})
}

// TestNoClustersReported reports a selector that matches nothing.
// capacityProperty is the ClusterProfile property TestDivideByReportedCapacity reports.
const capacityProperty = "orderly.dev/test-free-cpu"

// setCapacity sets (value non-empty) or removes capacityProperty on a member's
// ClusterProfile, as a fleet manager reporting capacity would.
func setCapacity(t *testing.T, member, value string) {
	const name = capacityProperty
	t.Helper()
	eventually(t, "property "+name+" of "+member+" written", func() error {
		var cp clusterinventoryv1alpha1.ClusterProfile
		if err := k.Get(context.Background(), types.NamespacedName{Namespace: fleetNamespace, Name: member}, &cp); err != nil {
			return err
		}
		cp.Status.Properties = slices.DeleteFunc(cp.Status.Properties, func(p clusterinventoryv1alpha1.Property) bool { return p.Name == name })
		if value != "" {
			cp.Status.Properties = append(cp.Status.Properties, clusterinventoryv1alpha1.Property{Name: name, Value: value})
		}
		return k.Status().Update(context.Background(), &cp)
	})
}

// TestDivideByReportedCapacity: with capacityProperty, replicas follow the capacity
// the ClusterProfiles report: a cluster that reports none gets none (and says why),
// and a changed report moves them.
func TestDivideByReportedCapacity(t *testing.T) {
	ctx := context.Background()
	const ns, property = "cap", capacityProperty
	makeNamespace(t, ns)
	t.Cleanup(func() {
		setCapacity(t, "eu1", "")
		setCapacity(t, "us1", "")
	})
	setCapacity(t, "eu1", "6")
	if err := k.Create(ctx, deployment(ns, "api", "api:1", 10)); err != nil {
		t.Fatal(err)
	}
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "api"}},
			Strategy:          fleetv1alpha1.StrategyDivide,
			CapacityProperty:  property,
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "all on eu1, us1 says why", func() error {
		if err := wantReplicas("eu1", ns, "api", 10)(); err != nil {
			return err
		}
		for _, c := range getPolicy(t, ns, "api").Status.Clusters {
			if c.Name == "us1" && !strings.Contains(c.Error, "reports no property "+property) {
				return fmt.Errorf("us1's error is %q", c.Error)
			}
		}
		return nil
	})
	setCapacity(t, "us1", "4000m")
	eventually(t, "60/40 by capacity", func() error {
		if err := wantReplicas("eu1", ns, "api", 6)(); err != nil {
			return err
		}
		return wantReplicas("us1", ns, "api", 4)()
	})
	setCapacity(t, "eu1", "1")
	eventually(t, "20/80 after eu1 reports less", func() error {
		if err := wantReplicas("eu1", ns, "api", 2)(); err != nil {
			return err
		}
		return wantReplicas("us1", ns, "api", 8)()
	})
}

func TestNoClustersReported(t *testing.T) {
	ctx := context.Background()
	const ns = "none"
	makeNamespace(t, ns)
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "v1", Kind: "ConfigMap", Name: "x"}},
			ClusterSelector:   &metav1.LabelSelector{MatchLabels: map[string]string{"region": "mars"}},
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NoClusters", func() error {
		c := condition(getPolicy(t, ns, "p"), ConditionScheduled)
		if c == nil || c.Reason != ReasonNoClusters {
			return fmt.Errorf("Scheduled = %+v", c)
		}
		return nil
	})
}

// TestNamespaceNotAdmitted: a namespace the members' Secrets do not list places
// nothing and is told why.
func TestNamespaceNotAdmitted(t *testing.T) {
	ctx := context.Background()
	const ns = "intruder"
	makeNamespace(t, ns)
	if err := k.Create(ctx, deployment(ns, "x", "x:1", 1)); err != nil {
		t.Fatal(err)
	}
	pp := &fleetv1alpha1.PlacementPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: ns},
		Spec: fleetv1alpha1.PlacementPolicySpec{
			ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "x"}},
		},
	}
	if err := k.Create(ctx, pp); err != nil {
		t.Fatal(err)
	}
	eventually(t, "NamespaceNotAllowed", func() error {
		c := condition(getPolicy(t, ns, "p"), ConditionScheduled)
		if c == nil || c.Reason != ReasonNamespaceNotAllowed {
			return fmt.Errorf("Scheduled = %+v", c)
		}
		return nil
	})
	for name, m := range members {
		var got corev1.Namespace
		if err := m.client.Get(ctx, client.ObjectKey{Name: ns}, &got); !apierrors.IsNotFound(err) {
			t.Errorf("%s: namespace %s exists on the member (%v)", name, ns, err)
		}
	}
}

// TestValidation: the API server refuses bad input with a message.
func TestValidation(t *testing.T) {
	ctx := context.Background()
	base := func() *fleetv1alpha1.PlacementPolicy {
		return &fleetv1alpha1.PlacementPolicy{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "bad-", Namespace: "default"},
			Spec: fleetv1alpha1.PlacementPolicySpec{
				ResourceSelectors: []fleetv1alpha1.ResourceSelector{{APIVersion: "apps/v1", Kind: "Deployment", Name: "x"}},
				Strategy:          fleetv1alpha1.StrategyDivide,
			},
		}
	}
	tests := []struct {
		name   string
		modify func(*fleetv1alpha1.PlacementPolicy)
		want   string
	}{
		{"weights sum to zero", func(p *fleetv1alpha1.PlacementPolicy) {
			p.Spec.Weights = []fleetv1alpha1.Weight{{Cluster: "a", Weight: 0}, {Cluster: "b", Weight: 0}}
		}, "weights must sum to more than zero"},
		{"override on an unknown path", func(p *fleetv1alpha1.PlacementPolicy) {
			p.Spec.Overrides = []fleetv1alpha1.Override{{Patches: []fleetv1alpha1.JSONPatch{{Op: "replace", Path: "/spec/template/spec/serviceAccountName", Value: &apiextensionsv1.JSON{Raw: []byte(`"root"`)}}}}}
		}, "path must be /spec/replicas"},
		{"name and labelSelector", func(p *fleetv1alpha1.PlacementPolicy) {
			p.Spec.ResourceSelectors[0].LabelSelector = &metav1.LabelSelector{}
		}, "set exactly one of name and labelSelector"},
		{"wrong apiVersion for the kind", func(p *fleetv1alpha1.PlacementPolicy) {
			p.Spec.ResourceSelectors[0].APIVersion = "v1"
		}, "apiVersion must be apps/v1"},
		{"labelValue weights without weightLabel", func(p *fleetv1alpha1.PlacementPolicy) {
			p.Spec.Weights = []fleetv1alpha1.Weight{{LabelValue: "eu", Weight: 1}}
		}, "weights by labelValue need weightLabel"},
		{"capacityProperty with weights", func(p *fleetv1alpha1.PlacementPolicy) {
			p.Spec.CapacityProperty = "cpu.allocatable"
			p.Spec.Weights = []fleetv1alpha1.Weight{{Cluster: "a", Weight: 1}}
		}, "set weights or capacityProperty, not both"},
		{"capacityProperty with Duplicate", func(p *fleetv1alpha1.PlacementPolicy) {
			p.Spec.Strategy = fleetv1alpha1.StrategyDuplicate
			p.Spec.CapacityProperty = "cpu.allocatable"
		}, "capacityProperty applies only to strategy Divide"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := base()
			tt.modify(p)
			err := k.Create(ctx, p)
			if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("create = %v, want Invalid with %q", err, tt.want)
			}
		})
	}
}
