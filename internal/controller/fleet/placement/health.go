package placement

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/clock"
	clusterinventoryv1alpha1 "sigs.k8s.io/cluster-inventory-api/apis/v1alpha1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	fleetv1alpha1 "orderly.dev/orderly/api/fleet/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/scheme"
)

// Condition reasons the prober writes on ClusterProfiles.
const (
	ReasonReadyzOK      = "ReadyzOK"
	ReasonReadyzFailed  = "ReadyzFailed"
	ReasonNoCredentials = "CredentialsInvalid"

	// ConditionReachable is where Orderly writes its probe's result on a profile
	// whose health the fleet manager writes (HealthSourceAnnotation).
	ConditionReachable = "fleet.orderly.dev/Reachable"

	// ConditionCopiesWatched says whether Orderly watches its copies on the member
	// or, refused, relies on the short resync there.
	ConditionCopiesWatched = "fleet.orderly.dev/CopiesWatched"
	ReasonWatching         = "Watching"
	ReasonWatchRefused     = "WatchRefused"
)

// HealthReconciler connects to each ClusterProfile that names a kubeconfig Secret,
// probes its API server's /readyz and writes ControlPlaneHealthy to the profile.
type HealthReconciler struct {
	client.Client
	APIReader client.Reader
	Clock     clock.PassiveClock
	// Namespace is the manager's: the kubeconfig Secrets live there.
	Namespace string
	members   *registry
	timings   timings
}

// SetupWithManager registers the prober. Only spec, label and annotation changes
// trigger it (its own status writes do not); the probes themselves come from
// RequeueAfter.
func (r *HealthReconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name+"-health").
		WithOptions(opts).
		For(&clusterinventoryv1alpha1.ClusterProfile{}, builder.WithPredicates(predicate.Or(
			predicate.GenerationChangedPredicate{}, predicate.AnnotationChangedPredicate{}, predicate.LabelChangedPredicate{}))).
		Complete(r)
}

// Reconcile probes one ClusterProfile.
func (r *HealthReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	// Everything below is keyed by the profile's namespace and name: a profile named
	// like another in a different namespace is a different member.
	key := req.NamespacedName
	var cp clusterinventoryv1alpha1.ClusterProfile
	if err := r.Get(ctx, key, &cp); err != nil {
		if apierrors.IsNotFound(err) {
			r.members.remove(key)
			memberSeries.Forget(key)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	secretName := cp.Annotations[fleetv1alpha1.KubeconfigSecretAnnotation]
	if secretName == "" || !cp.DeletionTimestamp.IsZero() {
		// Not a member Orderly was given access to: its conditions are not Orderly's.
		r.members.remove(key)
		memberSeries.Forget(key)
		return ctrl.Result{}, nil
	}
	m, err := r.connect(ctx, &cp, secretName)
	if err != nil {
		r.members.remove(key)
		clusterHealthy.WithLabelValues(memberSeries.Values(key)...).Set(0)
		return ctrl.Result{RequeueAfter: r.timings.ProbeInterval}, r.writeProbe(ctx, &cp, metav1.ConditionFalse, ReasonNoCredentials, err.Error())
	}
	status, reason, msg := metav1.ConditionTrue, ReasonReadyzOK, "The API server's /readyz answered ok."
	if err := probe(ctx, m.cfg, r.timings.ProbeTimeout); err != nil {
		status, reason, msg = metav1.ConditionFalse, ReasonReadyzFailed, err.Error()
		clusterHealthy.WithLabelValues(memberSeries.Values(key)...).Set(0)
	} else {
		clusterHealthy.WithLabelValues(memberSeries.Values(key)...).Set(1)
	}
	if err := r.writeProbe(ctx, &cp, status, reason, msg); err != nil || status != metav1.ConditionTrue {
		return ctrl.Result{RequeueAfter: r.timings.ProbeInterval}, err
	}
	return ctrl.Result{RequeueAfter: r.timings.ProbeInterval}, r.writeWatched(ctx, &cp, m)
}

// writeWatched reports on the profile whether the member's copies are watched,
// once that is known (every watch listed, or one refused), when it changed.
func (r *HealthReconciler) writeWatched(ctx context.Context, cp *clusterinventoryv1alpha1.ClusterProfile, m *memberSyncer) error {
	refused, synced := m.watchState()
	status, reason, msg := metav1.ConditionTrue, ReasonWatching, "Orderly watches its copies on this cluster: an edit, a deletion or a readiness change there is handled at once."
	switch {
	case len(refused) > 0:
		status, reason = metav1.ConditionFalse, ReasonWatchRefused
		msg = fmt.Sprintf("The cluster refuses the kubeconfig's identity list or watch on %s (403): changes there are noticed by the resync every %s instead of at once. Grant it list and watch on the placed kinds in the admitted namespaces.",
			strings.Join(refused, ", "), r.timings.FallbackResync)
	case !synced:
		return nil
	}
	if c := meta.FindStatusCondition(cp.Status.Conditions, ConditionCopiesWatched); c != nil && c.Status == status && c.Reason == reason && c.Message == msg {
		return nil
	}
	return kit.PatchStatus(ctx, r.Client, r.APIReader, cp, func(o *clusterinventoryv1alpha1.ClusterProfile) {
		if o.Status.Conditions == nil {
			o.Status.Conditions = []metav1.Condition{}
		}
		kit.ConditionsOf(&o.Status.Conditions, o.Generation).At(r.Clock.Now()).Set(ConditionCopiesWatched, status, reason, kit.Truncate(msg, 1024))
	})
}

// connect reads the member's kubeconfig Secret and returns its syncer. The Secret is
// read from the manager's namespace only, and serves cp only when its annotation
// names cp's namespace and name ("/" is in neither, so the pair is unambiguous): a
// profile of the same name in another namespace cannot use it.
func (r *HealthReconciler) connect(ctx context.Context, cp *clusterinventoryv1alpha1.ClusterProfile, secretName string) (*memberSyncer, error) {
	var s corev1.Secret
	if err := r.APIReader.Get(ctx, types.NamespacedName{Namespace: r.Namespace, Name: secretName}, &s); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("the kubeconfig Secret %s/%s does not exist", r.Namespace, secretName)
		}
		return nil, fmt.Errorf("reading the kubeconfig Secret %s/%s: %w", r.Namespace, secretName, err)
	}
	want := cp.Namespace + "/" + cp.Name
	if s.Annotations[fleetv1alpha1.ClusterProfileAnnotation] != want {
		return nil, fmt.Errorf("the Secret %s/%s does not serve this cluster: its annotation %s must be %q", r.Namespace, secretName, fleetv1alpha1.ClusterProfileAnnotation, want)
	}
	raw := s.Data[fleetv1alpha1.KubeconfigKey]
	cfg, err := restConfigFrom(raw, r.timings.RequestTimeout)
	if err != nil {
		return nil, fmt.Errorf("the Secret %s/%s: %w", r.Namespace, secretName, err)
	}
	var allowed []string
	for _, ns := range strings.Split(s.Annotations[fleetv1alpha1.AllowedNamespacesAnnotation], ",") {
		if ns = strings.TrimSpace(ns); ns != "" {
			allowed = append(allowed, ns)
		}
	}
	sum := sha256.Sum256(append(append([]byte{}, raw...), strings.Join(allowed, ",")...))
	return r.members.ensure(client.ObjectKeyFromObject(cp), hex.EncodeToString(sum[:]), allowed, cfg, func(cfg *rest.Config) (client.Client, error) {
		return client.New(cfg, client.Options{Scheme: scheme.New()})
	})
}

// restConfigFrom parses a kubeconfig for a member. Exec plugins and auth providers
// are refused: a Secret must not make the manager run programs.
func restConfigFrom(raw []byte, requestTimeout time.Duration) (*rest.Config, error) {
	if len(raw) == 0 {
		return nil, fmt.Errorf("no %q key", fleetv1alpha1.KubeconfigKey)
	}
	kc, err := clientcmd.Load(raw)
	if err != nil {
		return nil, fmt.Errorf("not a kubeconfig: %w", err)
	}
	for name, a := range kc.AuthInfos {
		if a.Exec != nil || a.AuthProvider != nil || a.TokenFile != "" || a.ClientCertificate != "" || a.ClientKey != "" {
			return nil, fmt.Errorf("user %q uses an exec plugin, auth provider or files: only inline certificates and tokens are allowed", name)
		}
	}
	for name, c := range kc.Clusters {
		if c.CertificateAuthority != "" {
			return nil, fmt.Errorf("cluster %q names a CA file: inline certificate-authority-data is needed", name)
		}
	}
	cfg, err := clientcmd.NewDefaultClientConfig(*kc, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("not a usable kubeconfig: %w", err)
	}
	cfg.Timeout = requestTimeout
	cfg.QPS, cfg.Burst = 200, 400
	return cfg, nil
}

// probe asks the member's API server for /readyz within timeout.
func probe(ctx context.Context, cfg *rest.Config, timeout time.Duration) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = timeout
	rc, err := rest.UnversionedRESTClientFor(withCodec(c))
	if err != nil {
		return err
	}
	pctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	body, err := rc.Get().AbsPath("/readyz").DoRaw(pctx)
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("/readyz did not answer within %s", timeout)
		}
		return fmt.Errorf("/readyz: %s", kit.Truncate(err.Error(), 300))
	}
	if string(body) != "ok" {
		return fmt.Errorf("/readyz answered %q", kit.Truncate(string(body), 200))
	}
	return nil
}

// probeCondition is the condition Orderly writes its probe's result to on cp:
// ControlPlaneHealthy, unless the profile says the fleet manager writes that
// (HealthSourceAnnotation); then Orderly's own ConditionReachable, and note says why
// when the annotation's value is not one Orderly knows (it is then taken as the fleet
// manager's: Orderly never writes a condition someone may have meant to keep).
func probeCondition(cp *clusterinventoryv1alpha1.ClusterProfile) (conditionType, note string) {
	switch v, ok := cp.Annotations[fleetv1alpha1.HealthSourceAnnotation]; {
	case !ok || v == fleetv1alpha1.HealthSourceOrderly:
		return clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy, ""
	case v == fleetv1alpha1.HealthSourceFleetManager:
		return ConditionReachable, ""
	default:
		return ConditionReachable, fmt.Sprintf(" The annotation %s=%q is neither %s nor %s: Orderly leaves ControlPlaneHealthy to the fleet manager.",
			fleetv1alpha1.HealthSourceAnnotation, v, fleetv1alpha1.HealthSourceOrderly, fleetv1alpha1.HealthSourceFleetManager)
	}
}

// writeProbe records a probe's result in cp's probeCondition when its status,
// reason or note changed, and removes the other one Orderly may have written before
// the health source changed. ControlPlaneHealthy's lastTransitionTime is when the
// cluster went unhealthy, which failover.unhealthyFor counts from.
func (r *HealthReconciler) writeProbe(ctx context.Context, cp *clusterinventoryv1alpha1.ClusterProfile, status metav1.ConditionStatus, reason, msg string) error {
	typ, note := probeCondition(cp)
	msg = kit.Truncate(msg+note, 1024)
	stale := ""
	if typ == clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy {
		stale = ConditionReachable
	}
	current := func(conds []metav1.Condition) bool {
		c := meta.FindStatusCondition(conds, typ)
		same := c != nil && c.Status == status && c.Reason == reason && (note == "" || c.Message == msg)
		return same && (stale == "" || meta.FindStatusCondition(conds, stale) == nil)
	}
	if current(cp.Status.Conditions) {
		return nil
	}
	return kit.PatchStatus(ctx, r.Client, r.APIReader, cp, func(o *clusterinventoryv1alpha1.ClusterProfile) {
		if current(o.Status.Conditions) {
			return
		}
		if o.Status.Conditions == nil {
			o.Status.Conditions = []metav1.Condition{}
		}
		cond := kit.ConditionsOf(&o.Status.Conditions, o.Generation).At(r.Clock.Now())
		if stale != "" {
			cond.Remove(stale)
		}
		cond.Set(typ, status, reason, msg)
	})
}

// healthOf reads ControlPlaneHealthy from a ClusterProfile.
func healthOf(cp *clusterinventoryv1alpha1.ClusterProfile) health {
	c := meta.FindStatusCondition(cp.Status.Conditions, clusterinventoryv1alpha1.ClusterConditionControlPlaneHealthy)
	if c == nil || c.Status == metav1.ConditionUnknown {
		return health{}
	}
	return health{Known: true, Healthy: c.Status == metav1.ConditionTrue, Since: c.LastTransitionTime.Time}
}

func withCodec(c *rest.Config) *rest.Config {
	c.NegotiatedSerializer = clientgoscheme.Codecs.WithoutConversion()
	return c
}
