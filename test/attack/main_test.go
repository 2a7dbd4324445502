//go:build e2e

// Package attack is Orderly's attacker suite: for every capability, what a user who
// holds the built-in edit ClusterRole in one namespace (team-a) and nothing else tries
// in order to reach beyond it through Orderly's kinds, each attempt beside a control
// that uses the same capability rightfully and must succeed. An attempt passes when it
// is refused (by RBAC or admission, with a clear error) or contained (the manager does
// not do it, and status says why); the control makes sure that an attempt does not
// pass merely because the capability is broken. Tests assert on the state of the
// world: the victim's Secret, the DNS zone, the database server, the member cluster.
//
// The suite runs on a local cluster of its own with its own manager, as the ServiceAccount
// and RBAC of config/rbac (test/e2eenv), started once with every flag the attacks
// need. Run it with `make attack`; `make test` runs it beside the e2e shards.
// CONTRIBUTING.md ("Testing at each tier", Attacks) says how a new capability adds its
// attacks, and docs/security.md names the test behind each claim it makes.
package attack

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"orderly.dev/orderly/test/e2eenv"
)

const (
	// teamA is the attacker's namespace: mallory holds edit there, and nothing else.
	teamA = "team-a"
	// teamB is the victim's namespace: bob holds edit there. It holds what mallory is
	// after: Secrets, workloads, a database, a hostname.
	teamB = "team-b"
	// attackerUser is mallory, the attacker; victimUser is bob, team-b's rightful user.
	attackerUser = "mallory"
	victimUser   = "bob"

	managerNamespace = e2eenv.ManagerNamespace

	// teamLabel is on both teams' namespaces; the platform's cluster-scoped objects
	// (DatabaseServers, DomainZones, policies) select namespaces by it.
	teamLabel = "attack.orderly.dev/team"

	clusterEnv = "ORDERLY_ATTACK_CLUSTER"
	keepEnv    = "ORDERLY_ATTACK_KEEP"
)

var (
	env *e2eenv.Env
	// admin is the cluster's administrator (the platform team): it sets the scene,
	// runs the platform's side of the controls, and observes the world.
	admin client.Client
	// attacker acts as mallory; victim as bob. Both through the administrator's
	// impersonation, which is what their own kubeconfigs would do.
	attacker, victim client.Client
	// manager is the suite's one manager.
	manager *e2eenv.Manager
	// registries are the loopback "registries" the image scanner is pointed at;
	// started before the manager, which must be told they speak plain HTTP.
	registries *scannerRegistries
)

// TestMain starts the suite's cluster, the two teams, the manager, and runs the attacks.
func TestMain(m *testing.M) {
	e2eenv.Main(m, e2eenv.Options{Prefix: "orderly-attack", ClusterEnv: clusterEnv, KeepEnv: keepEnv}, func(e *e2eenv.Env) (func(), error) {
		env, admin = e, e.Client
		ctx := context.Background()
		var err error
		if attacker, err = impersonating(attackerUser); err != nil {
			return nil, err
		}
		if victim, err = impersonating(victimUser); err != nil {
			return nil, err
		}
		for ns, user := range map[string]string{teamA: attackerUser, teamB: victimUser} {
			if err := createTeam(ctx, ns, user); err != nil {
				return nil, err
			}
		}
		registries = startScannerRegistries()
		if manager, err = e.StartManager(registries.managerFlags()...); err != nil {
			registries.close()
			return nil, err
		}
		return func() {
			manager.Stop()
			registries.close()
		}, nil
	})
}

// impersonating is a client that acts as user (and the system:authenticated group).
func impersonating(user string, groups ...string) (client.Client, error) {
	cfg := rest.CopyConfig(env.AdminConfig)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: append([]string{"system:authenticated"}, groups...)}
	return client.New(cfg, client.Options{Scheme: admin.Scheme()})
}

// createTeam creates namespace ns, labelled with teamLabel (its last letter), and binds
// the built-in edit ClusterRole there to user: Orderly's editor roles aggregate into it.
func createTeam(ctx context.Context, ns, user string) error {
	team := ns[strings.LastIndex(ns, "-")+1:]
	// Already there on a cluster kept from an earlier run (ORDERLY_ATTACK_CLUSTER).
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{teamLabel: team}}}); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating namespace %s: %w", ns, err)
	}
	rb := &rbacv1.RoleBinding{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "edit-" + user},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: "edit"},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	if err := admin.Create(ctx, rb); err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("binding edit in %s to %s: %w", ns, user, err)
	}
	fmt.Fprintf(os.Stderr, "namespace %s: %s holds edit there\n", ns, user)
	return nil
}
