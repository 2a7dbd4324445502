// Package servicedomain implements the ServiceDomain controller: for a hostname in a
// DomainZone it claims the hostname cluster-wide (HostnameClaim), writes its DNS
// record (RFC 2136 with TSIG to a DNS server, or an external-dns DNSEndpoint), its
// certificate (a cert-manager Certificate) and its route (a Gateway API HTTPRoute or
// an Ingress), repairs them when changed, and reports whether all three are ready.
package servicedomain

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8slabels "k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	networkv1alpha1 "orderly.dev/orderly/api/network/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Name is the controller's name, as given to --controllers.
const Name = "servicedomain"

// finalizer keeps a ServiceDomain until its record, route, certificate and claim are gone.
const finalizer = "network.orderly.dev/cleanup"

// pendingRecheck is how soon a ServiceDomain that waits on something Orderly does
// not watch (the DNS server; a kind or a CRD the manager may not watch) is looked at
// again.
const pendingRecheck = 10 * time.Second

// defaultResync is the resync interval when a zone does not set one.
const defaultResync = 5 * time.Minute

// Reconciler reconciles ServiceDomains.
type Reconciler struct {
	client.Client
	// APIReader reads straight from the API server: objects Orderly may not own
	// (a route or Certificate of the same name), kinds that may not be installed,
	// the TSIG Secret (Secrets are never cached), claims (create-if-absent needs
	// the latest), Services and Namespaces by metadata.
	APIReader client.Reader
	Recorder  kit.Recorder
	// Clock is the time checks are stamped with; the wall clock when nil.
	Clock clock.PassiveClock
	// ManagerNamespace is the manager's own namespace: TSIG Secrets are read from it,
	// and no ServiceDomain acts in it.
	ManagerNamespace string

	kinds *kit.KindDetector
	// watch holds the watches started at run time (see watch.go); nil in unit
	// tests, where everything is read from APIReader.
	watch *watches
}

// Workers is how many ServiceDomains are reconciled at once: a reconcile mostly
// waits on some eight API requests and a DNS exchange in a row, so more workers than
// the kit's default keep the API server busy when many are created together.
const Workers = 16

// Controller is the ServiceDomain controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup, Workers: Workers}

// Setup builds the reconciler and registers it with mgr.
func Setup(_ context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	return NewReconciler(mgr, deps).SetupWithManager(mgr, deps.Options)
}

// NewReconciler is the reconciler Setup registers.
func NewReconciler(mgr ctrl.Manager, deps kit.Deps) *Reconciler {
	clk := deps.ClockOrReal()
	return &Reconciler{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(),
		Recorder: kit.EventsFor(mgr, "orderly-servicedomain"),
		Clock:    clk, ManagerNamespace: deps.Namespace,
		kinds: kit.NewKindDetector(mgr.GetRESTMapper(), clk, wantedVersions),
	}
}

// The manager claims hostnames (HostnameClaims: create, and delete its own; watched,
// they are all Orderly's), writes routes, Certificates and DNSEndpoints named after
// each ServiceDomain in its namespace (server-side apply: create and patch; delete
// only those it controls, when the ServiceDomain goes or its namespace loses the
// zone; watched, only those labelled as a ServiceDomain's), watches Gateways (their
// addresses), watches CRDs (their names: a missing kind's CRD appearing), watches
// Services (their names only: a ServiceDomain reports one that does not exist),
// watches Namespaces' labels (metadata only: a
// zone's allowedNamespaces selects by them), reads TSIG Secrets by name (get
// only: never listed, watched or cached; only the manager's namespace is read), and
// writes DomainZones' status (zonestatus.go: whether records can be written there).
//
// +kubebuilder:rbac:groups=network.orderly.dev,resources=servicedomains,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=network.orderly.dev,resources=servicedomains/status,verbs=get;patch
// +kubebuilder:rbac:groups=network.orderly.dev,resources=servicedomains/finalizers,verbs=update
// +kubebuilder:rbac:groups=network.orderly.dev,resources=domainzones,verbs=get;list;watch
// +kubebuilder:rbac:groups=network.orderly.dev,resources=domainzones/status,verbs=get;patch
// +kubebuilder:rbac:groups=network.orderly.dev,resources=hostnameclaims,verbs=get;list;watch;create;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=httproutes,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=gateway.networking.k8s.io,resources=gateways,verbs=get;list;watch
// +kubebuilder:rbac:groups=cert-manager.io,resources=certificates,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=externaldns.k8s.io,resources=dnsendpoints,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Cache narrows the manager's cache to what this controller needs: of Ingresses,
// only those Orderly manages.
func Cache() kit.CacheRules {
	managed := cache.ByObject{Label: k8slabels.SelectorFromSet(k8slabels.Set{labels.ManagedBy: labels.ManagedByValue})}
	return kit.CacheRules{
		&networkingv1.Ingress{}: managed,
	}
}

func (r *Reconciler) clock() clock.PassiveClock {
	if r.Clock == nil {
		return clock.RealClock{}
	}
	return r.Clock
}

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager, opts controller.Options) error {
	kinds, err := newKindWatches(mgr, r.clock(), r.kinds)
	if err != nil {
		return err
	}
	services, err := kit.NewNameCache(mgr)
	if err != nil {
		return fmt.Errorf("building the cache of Service names: %w", err)
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&networkv1alpha1.ServiceDomain{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// An Ingress's load balancer address is the record's value.
		Owns(&networkingv1.Ingress{}).
		Watches(&networkv1alpha1.DomainZone{}, handler.EnqueueRequestsFromMapFunc(r.domainsOfZone)).
		// A namespace's labels decide which zones it may use.
		WatchesMetadata(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.domainsOfNamespace),
			builder.WithPredicates(predicate.LabelChangedPredicate{})).
		// A Service created or deleted: the route's ServiceNotFound comes or goes.
		WatchesRawSource(source.Kind(services, client.Object(serviceObject()),
			handler.EnqueueRequestsFromMapFunc(r.domainsOfService), createdOrDeleted())).
		Build(r)
	if err != nil {
		return err
	}
	if err := r.setupZones(mgr, opts); err != nil {
		return err
	}
	r.watch = &watches{
		kinds: kinds, services: services,
		owner:    handler.EnqueueRequestForOwner(mgr.GetScheme(), mgr.GetRESTMapper(), &networkv1alpha1.ServiceDomain{}, handler.OnlyControllerOwner()),
		gateways: handler.EnqueueRequestsFromMapFunc(r.domainsOfGateway),
		watching: map[schema.GroupKind]bool{},
	}
	return kinds.Bind(c)
}

// domainsOfNamespace maps a Namespace to its ServiceDomains.
func (r *Reconciler) domainsOfNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	var list networkv1alpha1.ServiceDomainList
	if err := r.List(ctx, &list, client.InNamespace(o.GetName())); err != nil {
		log.FromContext(ctx).Error(err, "Listing ServiceDomains for Namespace", "namespace", o.GetName())
		return nil
	}
	out := make([]reconcile.Request, 0, len(list.Items))
	for i := range list.Items {
		out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
	}
	return out
}

// domainsOfZone maps a DomainZone to every ServiceDomain whose hostname falls in it.
func (r *Reconciler) domainsOfZone(ctx context.Context, o client.Object) []reconcile.Request {
	z := o.(*networkv1alpha1.DomainZone)
	var list networkv1alpha1.ServiceDomainList
	if err := r.List(ctx, &list); err != nil {
		log.FromContext(ctx).Error(err, "Listing ServiceDomains for DomainZone", "domainzone", z.Name)
		return nil
	}
	var out []reconcile.Request
	for i := range list.Items {
		if inZone(list.Items[i].Spec.Hostname, z.Spec.Zone) {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
		}
	}
	return out
}

// Reconcile converges one ServiceDomain.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var sd networkv1alpha1.ServiceDomain
	if err := r.Get(ctx, req.NamespacedName, &sd); err != nil {
		if apierrors.IsNotFound(err) {
			series.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !sd.DeletionTimestamp.IsZero() {
		return r.finalize(ctx, &sd)
	}
	obs := &observation{}
	if kit.ProtectedNamespace(sd.Namespace, r.ManagerNamespace) {
		obs.block("NamespaceNotAllowed", fmt.Sprintf("Orderly registers no hostnames for namespace %s (kube-* namespaces and Orderly's own are left alone)", sd.Namespace))
		return r.finish(ctx, &sd, obs, nil)
	}
	zone, err := r.zoneFor(ctx, &sd, obs)
	if err != nil {
		return r.finish(ctx, &sd, obs, err)
	}
	if zone == nil {
		// A hostname outside every allowed zone is only reported: its zone may
		// appear or open up (the DomainZone and Namespace watches bring it back).
		// One registered before, whose zone no longer allows its namespace (the
		// platform took the zone away), is withdrawn: its record, route and
		// Certificate are removed and its claim released, as on deletion. A zone that
		// is gone or ambiguous withdraws nothing: that is more likely a platform
		// change in progress than a decision about this namespace.
		if obs.blockedReason == reasonHostnameNotAllowed && containsFinalizer(&sd) {
			if _, err := r.finalize(ctx, &sd); err != nil {
				return r.finish(ctx, &sd, obs, err)
			}
			r.Recorder.Eventf(&sd, nil, corev1.EventTypeWarning, "Withdrawn", "Withdraw",
				"%s is no longer registered: its zone no longer allows namespace %s; its DNS record, route and certificate were removed", sd.Spec.Hostname, sd.Namespace)
			withdrawals.Inc()
			obs.withdrawn = true
		}
		return r.finish(ctx, &sd, obs, nil)
	}
	obs.zone = zone
	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, &sd, finalizer); err != nil {
		if errors.Is(err, kit.ErrDeleting) {
			return r.finalize(ctx, &sd)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	held, err := r.claim(ctx, &sd, obs)
	if err != nil || !held {
		return r.finish(ctx, &sd, obs, err)
	}
	// Each part converges on its own: one that cannot go on (a missing CRD, a
	// refused write) is reported and does not hold the others back.
	var errs []error
	errs = append(errs, r.checkService(ctx, &sd, obs))
	errs = append(errs, r.reconcileRoute(ctx, &sd, zone, obs))
	errs = append(errs, r.reconcileCertificate(ctx, &sd, zone, obs))
	errs = append(errs, r.reconcileDNS(ctx, &sd, zone, obs))
	return r.finish(ctx, &sd, obs, errors.Join(errs...))
}

// zoneFor finds sd's DomainZone; nil with obs blocked when there is none.
func (r *Reconciler) zoneFor(ctx context.Context, sd *networkv1alpha1.ServiceDomain, obs *observation) (*networkv1alpha1.DomainZone, error) {
	var zones networkv1alpha1.DomainZoneList
	if err := r.List(ctx, &zones); err != nil {
		obs.block("ZoneUnknown", "Listing DomainZones failed: "+err.Error())
		return nil, err
	}
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	// From the cache: the Namespace watch holds every namespace's metadata.
	if err := r.Get(ctx, client.ObjectKey{Name: sd.Namespace}, ns); err != nil {
		obs.block("ZoneUnknown", "Reading namespace "+sd.Namespace+" failed: "+err.Error())
		return nil, err
	}
	choice := pickZone(zones.Items, sd.Spec.Hostname, sd.Namespace, ns.Labels)
	if choice.zone == nil {
		obs.block(choice.reason, choice.message)
		return nil, nil
	}
	return choice.zone, nil
}

// checkService reports a Service that does not exist (the route is written anyway,
// and works once the Service is created).
func (r *Reconciler) checkService(ctx context.Context, sd *networkv1alpha1.ServiceDomain, obs *observation) error {
	exists, watched, err := r.watch.serviceExists(ctx, r.APIReader, client.ObjectKey{Namespace: sd.Namespace, Name: sd.Spec.Service.Name})
	if err != nil {
		return fmt.Errorf("reading Service %s: %w", sd.Spec.Service.Name, err)
	}
	obs.serviceMissing, obs.serviceWatched = !exists, watched
	return nil
}

// finish computes and writes the status from obs, and says when to come back.
func (r *Reconciler) finish(ctx context.Context, sd *networkv1alpha1.ServiceDomain, obs *observation, err error) (ctrl.Result, error) {
	now := r.clock().Now()
	before, werr := kit.PatchStatusReplacing(ctx, r.Client, r.APIReader, sd, func(o *networkv1alpha1.ServiceDomain) {
		computeStatus(o, obs, now)
	})
	if werr != nil {
		return ctrl.Result{}, errors.Join(err, werr)
	}
	if before != nil {
		r.events(sd, before)
	}
	recordMetrics(sd)
	if err != nil {
		return ctrl.Result{}, err
	}
	return ctrl.Result{RequeueAfter: obs.requeue(resyncOf(obs.zone))}, nil
}

func resyncOf(z *networkv1alpha1.DomainZone) time.Duration {
	if z == nil || z.Spec.DNS.ResyncInterval.Duration <= 0 {
		return defaultResync
	}
	return z.Spec.DNS.ResyncInterval.Duration
}

// events sends an Event for each condition that changed status or reason; on the
// first status, for Ready alone (one Event per new ServiceDomain, not four).
func (r *Reconciler) events(sd, before *networkv1alpha1.ServiceDomain) {
	for _, t := range []string{networkv1alpha1.ConditionDNSReady, networkv1alpha1.ConditionCertificateReady, networkv1alpha1.ConditionRouteReady, networkv1alpha1.ConditionReady} {
		now := findCondition(sd.Status.Conditions, t)
		was := findCondition(before.Status.Conditions, t)
		if now == nil || (was != nil && was.Status == now.Status && was.Reason == now.Reason) || (was == nil && t != networkv1alpha1.ConditionReady) {
			continue
		}
		typ := corev1.EventTypeNormal
		if now.Status == metav1.ConditionFalse {
			typ = corev1.EventTypeWarning
		}
		r.Recorder.Eventf(sd, nil, typ, now.Reason, t, "%s", kit.Truncate(now.Message, 1024))
	}
}

func findCondition(list []metav1.Condition, t string) *metav1.Condition {
	for i := range list {
		if list[i].Type == t {
			return &list[i]
		}
	}
	return nil
}

// ownedBy is true when o carries a controller reference to sd.
func ownedBy(o metav1.Object, sd *networkv1alpha1.ServiceDomain) bool {
	ref := metav1.GetControllerOf(o)
	return ref != nil && ref.UID == sd.UID
}

// ownerRef is the controller reference of what Orderly writes for sd.
func ownerRef(sd *networkv1alpha1.ServiceDomain) metav1.OwnerReference {
	t := true
	return metav1.OwnerReference{
		APIVersion: networkv1alpha1.GroupVersion.String(), Kind: "ServiceDomain",
		Name: sd.Name, UID: sd.UID, Controller: &t, BlockOwnerDeletion: &t,
	}
}

// childLabels are the labels of everything Orderly writes for sd.
func childLabels(sd *networkv1alpha1.ServiceDomain) map[string]string {
	return map[string]string{labels.ManagedBy: labels.ManagedByValue, networkv1alpha1.ServiceDomainLabel: sd.Name}
}
