//go:build e2e

package e2e

// Failure tests: the leader killed in the middle of a SleepSchedule transition, and
// the API server restarted while Tenants are being set up. Each checks that the work
// ends as it would have without the failure: nothing lost (every object reaches its
// desired state) and nothing done twice (records, history and Events).

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/devcluster"
	"orderly.dev/orderly/internal/scheme"
	"orderly.dev/orderly/test/launch"
)

// takeoverBound bounds how long a standby takes to lead after the leader was
// killed. It takes over once the dead leader's lease has expired, the lease duration
// (15 s by default) after the last renewal it saw, at its next try (every retry
// period, 2 s, with up to 20% jitter): about 18 s at most. The rest is room for a
// loaded machine.
const takeoverBound = 35 * time.Second

// fastClient is the administrator's client without client-go's default limit of 5
// requests a second, for tests that create objects by the hundred.
func fastClient(t *testing.T) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(adminCfg)
	cfg.QPS, cfg.Burst = 200, 400
	c, err := client.New(cfg, client.Options{Scheme: scheme.New()})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// startReplica runs one more `orderly manager` as startManager runs the suite's one
// (the manager's ServiceAccount, leader election in its namespace), with extra flags
// and a log of its own in the run's directory, and stops it when the test ends. A
// replica the test killed stays dead.
func startReplica(t *testing.T, name string, extra ...string) *launch.Manager {
	t.Helper()
	m, err := launch.Start(context.Background(), launch.Options{
		Bin:        managerBin,
		Kubeconfig: managerKubeconfig,
		Args:       append([]string{"--leader-elect=true", "--leader-election-namespace", managerNamespace}, extra...),
		LogPath:    filepath.Join(runDir, "orderly-e2e-"+name+".log"),
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("replica %q ready (pid %d), logs in %s", name, m.Pid, m.LogPath)
	t.Cleanup(func() {
		if err := m.Stop(); err != nil {
			t.Errorf("replica %q: %v", name, err)
		}
	})
	return m
}

func getLease(g Gomega) *coordinationv1.Lease {
	l, err := clientset.CoordinationV1().Leases(managerNamespace).Get(context.Background(), leaseName, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(l.Spec.HolderIdentity).NotTo(BeNil())
	return l
}

func isLeading(g Gomega, m *launch.Manager) bool {
	ok, err := leading(m.MetricsURL)
	g.Expect(err).NotTo(HaveOccurred())
	return ok
}

func exited(m *launch.Manager) bool {
	select {
	case <-m.Exited():
		return true
	default:
		return false
	}
}

// eventsRegarding lists the Events about the objects with the given UIDs; those about
// cluster-scoped objects are in the default namespace.
//
// client-go's recorder folds an Event into an earlier one of the same type, reason,
// action, reporting instance, regarding and related object, whatever its note, for
// some minutes: the earlier Event's series counts it and keeps the earlier note. So
// notes cannot be summed; times says how often an Event of the same key was recorded.
func eventsRegarding(g Gomega, c client.Client, uids map[types.UID]bool) []eventsv1.Event {
	var list eventsv1.EventList
	g.Expect(c.List(context.Background(), &list, client.InNamespace(metav1.NamespaceDefault))).To(Succeed())
	var out []eventsv1.Event
	for _, e := range list.Items {
		if uids[e.Regarding.UID] {
			out = append(out, e)
		}
	}
	return out
}

func times(e *eventsv1.Event) int {
	if e.Series != nil && e.Series.Count > 1 {
		return int(e.Series.Count)
	}
	return 1
}

// failoverLabel selects the namespaces of TestLeaderKilledMidTransition.
const failoverLabel = "e2e-failover"

// TestLeaderKilledMidTransition runs two replicas and kills the leader with SIGKILL
// (it cannot release its lease) while it puts 120 Deployments to sleep. The standby
// takes over once the lease expires and finishes the transition: every Deployment is
// asleep with its own replica count recorded (a workload put to sleep twice would
// record 0), the history holds one transition, nothing is taken for a change by
// someone else, and deleting the schedule restores every count exactly.
func TestLeaderKilledMidTransition(t *testing.T) {
	const (
		namespaces   = 3
		perNamespace = 40
		total        = namespaces * perNamespace
		// killAfter is how many the leader has put to sleep when it is killed.
		killAfter = 10
	)
	g := NewWithT(t)
	ctx := context.Background()
	c := fastClient(t)
	start := time.Now()

	// Paused Deployments: the deployment controller makes no ReplicaSet and no Pod for
	// them, which keeps the machine on Orderly's work, and the schedule handles them
	// like any other. Replicas 1, 2 or 3, so each record must hold its own count.
	want := map[client.ObjectKey]int32{}
	nsNames := make([]string, 0, namespaces)
	for i := range namespaces {
		ns := fmt.Sprintf("e2e-failover-%d", i)
		nsNames = append(nsNames, ns)
		g.Expect(c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{failoverLabel: "true"}}})).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
		for j := range perNamespace {
			d := deployment(ns, fmt.Sprintf("app-%03d", j), int32(1+j%3))
			d.Spec.Paused = true
			g.Expect(c.Create(ctx, d)).To(Succeed())
			want[client.ObjectKeyFromObject(d)] = *d.Spec.Replicas
		}
	}
	listDeployments := func(g Gomega) []appsv1.Deployment {
		var all []appsv1.Deployment
		for _, ns := range nsNames {
			var list appsv1.DeploymentList
			g.Expect(c.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			all = append(all, list.Items...)
		}
		g.Expect(all).To(HaveLen(total))
		return all
	}
	countAsleep := func(g Gomega) int {
		n := 0
		for _, d := range listDeployments(g) {
			if d.Labels[powerv1alpha1.AsleepLabel] != "" {
				n++
			}
		}
		return n
	}

	withoutDefaultManager(t)
	// The first replica is held to 10 requests a second, so that the transition takes
	// about 12 s and is surely interrupted half-way; the standby runs at full speed.
	leader := startReplica(t, "leader", "--kube-api-qps=10", "--kube-api-burst=10")
	g.Expect(waitLeading(leader.MetricsURL, leaderWait)).To(Succeed())
	standby := startReplica(t, "standby")
	g.Expect(isLeading(g, standby)).To(BeFalse(), "two replicas lead at once")
	before := getLease(g)

	// No awake window: asleep from the start.
	s := &powerv1alpha1.SleepSchedule{
		ObjectMeta: metav1.ObjectMeta{Name: "e2e-failover"},
		Spec: powerv1alpha1.SleepScheduleSpec{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{failoverLabel: "true"}},
		},
	}
	g.Expect(c.Create(ctx, s)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), s) })

	g.Eventually(countAsleep, timeout, 100*time.Millisecond).Should(BeNumerically(">=", killAfter))
	g.Expect(leader.Kill()).To(Succeed())
	killedAt := time.Now()
	asleepAtKill := countAsleep(g)
	g.Expect(asleepAtKill).To(BeNumerically("<", total), "the leader finished before it was killed: nothing was interrupted")

	g.Expect(waitLeading(standby.MetricsURL, takeoverBound)).To(Succeed(), "the standby did not take over")
	takeover := time.Since(killedAt)
	after := getLease(g)
	g.Expect(*after.Spec.HolderIdentity).NotTo(Equal(*before.Spec.HolderIdentity))
	g.Expect(ptr.Deref(after.Spec.LeaseTransitions, 0)).To(Equal(ptr.Deref(before.Spec.LeaseTransitions, 0)+1), "one change of leader: from the killed one to the standby")

	// Nothing lost: every Deployment asleep, each record holding its own replicas.
	get := func(g Gomega) *powerv1alpha1.SleepSchedule {
		var got powerv1alpha1.SleepSchedule
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(s), &got)).To(Succeed())
		return &got
	}
	g.Eventually(func(g Gomega) {
		for _, d := range listDeployments(g) {
			key := client.ObjectKeyFromObject(&d)
			g.Expect(d.Spec.Replicas).To(HaveValue(BeZero()), "%s", key)
			g.Expect(d.Labels).To(HaveKeyWithValue(powerv1alpha1.AsleepLabel, s.Name), "%s", key)
			var rec struct {
				Replicas      *int32 `json:"replicas"`
				SleepReplicas *int32 `json:"sleepReplicas"`
			}
			g.Expect(json.Unmarshal([]byte(d.Annotations[powerv1alpha1.SleepStateAnnotation]), &rec)).To(Succeed(), "%s", key)
			g.Expect(rec.Replicas).To(HaveValue(Equal(want[key])), "%s: the record must hold the replicas before sleep, not what a second sleep saw", key)
			g.Expect(rec.SleepReplicas).To(HaveValue(BeZero()), "%s", key)
			g.Expect(d.Annotations).NotTo(HaveKey(powerv1alpha1.LeftAloneAnnotation), "%s", key)
		}
		got := get(g)
		g.Expect(got.Status.State).To(Equal(powerv1alpha1.StateAsleep))
		g.Expect(got.Status.SleepingWorkloads).To(BeEquivalentTo(total))
		g.Expect(got.Status.LeftAloneCount).To(BeZero())
		ready := meta.FindStatusCondition(got.Status.Conditions, powerv1alpha1.ConditionReady)
		g.Expect(ready).NotTo(BeNil())
		g.Expect(ready.Status).To(Equal(metav1.ConditionTrue), ready.Message)
	}, timeout, poll).Should(Succeed())
	allAsleep := time.Since(killedAt)

	// Nothing done twice: one transition, in which the standby put to sleep at most
	// what the killed leader had not; no workload taken for one changed by someone
	// else; the transition announced, and no Slept Event claiming more than that.
	got := get(g)
	g.Expect(got.Status.History).To(HaveLen(1), "one transition, however many replicas worked on it")
	g.Expect(got.Status.History[0].Action).To(Equal(powerv1alpha1.ActionSleep))
	// The transition counts what the killed leader did too (its records say so).
	g.Expect(got.Status.History[0].Workloads).To(BeEquivalentTo(total), "the history counts the whole transition")
	byStandby := total - asleepAtKill // at most what the standby put to sleep
	g.Eventually(func(g Gomega) {
		announced := false
		for _, e := range eventsRegarding(g, c, map[types.UID]bool{got.UID: true}) {
			g.Expect(e.Reason).NotTo(BeElementOf("LeftAlone", "WriteFailed"), e.Note)
			if e.Reason == "Slept" {
				var n int
				_, err := fmt.Sscanf(e.Note, "Put %d workload(s)", &n)
				g.Expect(err).NotTo(HaveOccurred(), e.Note)
				g.Expect(n).To(BeNumerically("<=", byStandby), e.Note)
				announced = true
			}
		}
		g.Expect(announced).To(BeTrue(), "no Slept Event")
	}, timeout, poll).Should(Succeed())

	// Deleting the schedule wakes every Deployment to exactly its own replicas.
	g.Expect(c.Delete(ctx, s)).To(Succeed())
	g.Eventually(func(g Gomega) {
		for _, d := range listDeployments(g) {
			key := client.ObjectKeyFromObject(&d)
			g.Expect(d.Spec.Replicas).To(HaveValue(Equal(want[key])), "%s", key)
			g.Expect(d.Labels).NotTo(HaveKey(powerv1alpha1.AsleepLabel), "%s", key)
			g.Expect(d.Annotations).NotTo(HaveKey(powerv1alpha1.SleepStateAnnotation), "%s", key)
		}
		err := c.Get(ctx, client.ObjectKeyFromObject(s), &powerv1alpha1.SleepSchedule{})
		g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the schedule is gone once all is awake")
	}, timeout, poll).Should(Succeed())
	g.Expect(exited(standby)).To(BeFalse(), "the new leader exited")

	t.Logf("leader killed after putting %d of %d Deployments to sleep; the standby led %.1fs later (lease duration 15s) "+
		"and put the other %d to sleep; all asleep %.1fs after the kill; test %.1fs",
		asleepAtKill, total, takeover.Seconds(), byStandby, allAsleep.Seconds(), time.Since(start).Seconds())
}

// TestAPIServerRestartDuringReconciles kills kube-apiserver (SIGKILL, as a crash)
// and starts it again while the manager is creating the namespaces of 8 Tenants.
// The manager rides the outage out in the same process and keeps its leadership;
// afterwards everything converges, a Tenant created after the restart and a deleted
// RoleBinding are reconciled (the watches came back), every namespace is created
// once, and nothing is reported repaired that nobody broke.
func TestAPIServerRestartDuringReconciles(t *testing.T) {
	const (
		tenants      = 8
		perTenant    = 5
		restartAfter = 5 // namespaces created when the API server is killed
	)
	g := NewWithT(t)
	ctx := context.Background()
	c := fastClient(t)
	start := time.Now()

	withoutDefaultManager(t)
	// A renew deadline (45 s) longer than the outage: with the default 10 s, a
	// restart on a loaded machine can cost the leader its lease, and then the process
	// exits and a new one starts with fresh watches, which would test nothing of
	// watches coming back. Held to 20 requests a second, so that the restart falls in
	// the middle of the work.
	m := startReplica(t, "apiserver-restart", "--leader-elect-lease-duration=60s", "--leader-elect-renew-deadline=45s",
		"--kube-api-qps=20", "--kube-api-burst=20")
	g.Expect(waitLeading(m.MetricsURL, leaderWait)).To(Succeed())
	before := getLease(g)

	var all []*tenancyv1alpha1.Tenant
	mine := map[string]bool{}
	for i := range tenants {
		name := fmt.Sprintf("e2e-restart-%d", i)
		var nss []string
		for j := range perTenant {
			nss = append(nss, fmt.Sprintf("%s-%c", name, 'a'+j))
		}
		tn := tenant(name, "Delete", nss...)
		g.Expect(c.Create(ctx, tn)).To(Succeed())
		t.Cleanup(func() { _ = c.Delete(context.Background(), tn) })
		all = append(all, tn)
		mine[name] = true
	}
	countReady := func() int {
		n := 0
		for _, tn := range all {
			var got tenancyv1alpha1.Tenant
			if err := c.Get(ctx, client.ObjectKeyFromObject(tn), &got); err == nil && meta.IsStatusConditionTrue(got.Status.Conditions, tenancyv1alpha1.ConditionReady) {
				n++
			}
		}
		return n
	}
	g.Eventually(func(g Gomega) int {
		var list corev1.NamespaceList
		g.Expect(c.List(ctx, &list, client.HasLabels{tenancyv1alpha1.TenantLabel})).To(Succeed())
		n := 0
		for _, ns := range list.Items {
			if mine[ns.Labels[tenancyv1alpha1.TenantLabel]] {
				n++
			}
		}
		return n
	}, timeout, 100*time.Millisecond).Should(BeNumerically(">=", restartAfter))
	readyAtRestart := countReady()
	g.Expect(readyAtRestart).To(BeNumerically("<", tenants), "every Tenant was Ready before the restart: nothing was interrupted")

	// Whatever happens below, the tests that follow need the API server.
	t.Cleanup(func() {
		if err := devcluster.StartStopped(context.Background(), clusterName, os.Stderr); err != nil {
			t.Errorf("starting the cluster's stopped components again: %v", err)
		}
	})
	stoppedAt := time.Now()
	g.Expect(devcluster.StopComponent(ctx, clusterName, "kube-apiserver")).To(Succeed())
	_, err := clientset.Discovery().ServerVersion()
	g.Expect(err).To(HaveOccurred(), "the API server still answers after it was killed")
	g.Expect(devcluster.StartStopped(ctx, clusterName, os.Stderr)).To(Succeed())
	outage := time.Since(stoppedAt)
	g.Expect(exited(m)).To(BeFalse(), "the manager exited during the outage: %s", m.Tail())

	// Everything that was in progress converges.
	for _, tn := range all {
		waitTenantReady(g, tn.Name)
	}
	converged := time.Since(stoppedAt)

	// The watches came back: a Tenant created after the restart is set up, and a
	// RoleBinding deleted now is made again.
	late := tenant("e2e-restart-late", "Delete", "e2e-restart-late-a", "e2e-restart-late-b")
	g.Expect(c.Create(ctx, late)).To(Succeed())
	t.Cleanup(func() { _ = c.Delete(context.Background(), late) })
	waitTenantReady(g, late.Name)
	all = append(all, late)
	victim := client.ObjectKey{Namespace: all[0].Spec.Namespaces[0].Name, Name: "orderly-tenant-owners"}
	var rb rbacv1.RoleBinding
	g.Expect(c.Get(ctx, victim, &rb)).To(Succeed())
	g.Expect(c.Delete(ctx, &rb)).To(Succeed())
	g.Eventually(func(g Gomega) {
		var again rbacv1.RoleBinding
		g.Expect(c.Get(ctx, victim, &again)).To(Succeed())
		g.Expect(again.UID).NotTo(Equal(rb.UID))
	}, timeout, poll).Should(Succeed())

	// Nothing lost: every namespace is there, marked as Orderly's, created for its
	// Tenant, with its four objects controlled by the Tenant.
	uids := map[types.UID]bool{}
	created := map[string]int{}
	for _, tn := range all {
		var got tenancyv1alpha1.Tenant
		g.Expect(c.Get(ctx, client.ObjectKeyFromObject(tn), &got)).To(Succeed())
		uids[got.UID] = true
		for _, spec := range got.Spec.Namespaces {
			created[spec.Name] = 0
			var ns corev1.Namespace
			g.Expect(c.Get(ctx, client.ObjectKey{Name: spec.Name}, &ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue(tenancyv1alpha1.TenantLabel, got.Name), ns.Name)
			g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OriginAnnotation, tenancyv1alpha1.OriginCreated), ns.Name)
			g.Expect(ns.Annotations).To(HaveKeyWithValue(tenancyv1alpha1.OwnerUIDAnnotation, string(got.UID)), ns.Name)
			for _, obj := range []client.Object{&rbacv1.RoleBinding{}, &corev1.ResourceQuota{}, &corev1.LimitRange{}, &networkingv1.NetworkPolicy{}} {
				name := map[string]string{"*v1.RoleBinding": "orderly-tenant-owners", "*v1.ResourceQuota": "orderly-tenant-quota",
					"*v1.LimitRange": "orderly-tenant-limits", "*v1.NetworkPolicy": "orderly-tenant-isolation"}[fmt.Sprintf("%T", obj)]
				g.Expect(c.Get(ctx, client.ObjectKey{Namespace: ns.Name, Name: name}, obj)).To(Succeed(), "%T %s/%s", obj, ns.Name, name)
				g.Expect(metav1.IsControlledBy(obj, &got)).To(BeTrue(), "%T %s/%s", obj, ns.Name, name)
			}
		}
	}

	// Nothing done twice: no namespace announced as created in two Events, and the
	// RoleBinding deleted above is the only repair, made once (a Repaired Event names
	// its object as the related one, so its series counts the repairs of that object
	// only). A namespace may be announced by no Event: its create reached etcd just
	// before the kill but the answer was lost, and the retry found it existing; or its
	// Event was folded into an earlier one (see eventsRegarding).
	unannounced := 0
	g.Eventually(func(g Gomega) {
		for ns := range created {
			created[ns] = 0
		}
		repairs := 0
		for _, e := range eventsRegarding(g, c, uids) {
			switch e.Reason {
			case "NamespaceCreated":
				for _, word := range strings.FieldsFunc(e.Note, func(r rune) bool { return r == ',' || r == ' ' }) {
					if _, ok := created[word]; ok {
						created[word]++
					}
				}
			case "Repaired":
				g.Expect(e.Note).To(ContainSubstring(victim.Namespace+"/"+victim.Name), "a repair of something nobody broke")
				repairs += times(&e)
			}
		}
		unannounced = 0
		for ns, n := range created {
			g.Expect(n).To(BeNumerically("<=", 1), "namespace %s announced as created in %d Events", ns, n)
			if n == 0 {
				unannounced++
			}
		}
		g.Expect(repairs).To(Equal(1))
	}, timeout, poll).Should(Succeed())

	// The same process led throughout: no failover stood in for watches that did not
	// come back.
	g.Expect(exited(m)).To(BeFalse(), "the manager exited")
	g.Expect(isLeading(g, m)).To(BeTrue())
	after := getLease(g)
	g.Expect(*after.Spec.HolderIdentity).To(Equal(*before.Spec.HolderIdentity))
	g.Expect(ptr.Deref(after.Spec.LeaseTransitions, 0)).To(Equal(ptr.Deref(before.Spec.LeaseTransitions, 0)))

	t.Logf("API server killed with %d of %d Tenants Ready, back after %.1fs; all Ready %.1fs after the kill; "+
		"%d of %d namespaces named in no NamespaceCreated Event (its create answered during the kill, or its Event folded into an earlier one); test %.1fs",
		readyAtRestart, tenants, outage.Seconds(), converged.Seconds(), unannounced, len(created), time.Since(start).Seconds())
}

// A manager told to elect a leader in a namespace that does not exist stops at once
// and says why, rather than running no controller and logging an error every few
// seconds.
func TestManagerRefusesAMissingLeaseNamespace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, managerBin, "manager", "--kubeconfig", managerKubeconfig, //nolint:gosec // the binary under test
		"--leader-elect=true", "--leader-election-namespace", "e2e-no-such-namespace",
		"--metrics-bind-address=0", "--health-probe-bind-address=0")
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the manager did not stop within 2 minutes; output:\n%s", out)
	}
	if err == nil {
		t.Fatalf("the manager exited 0; output:\n%s", out)
	}
	if want := `the leader election namespace "e2e-no-such-namespace" does not exist`; !strings.Contains(string(out), want) {
		t.Errorf("output does not say %q:\n%s", want, out)
	}
}
