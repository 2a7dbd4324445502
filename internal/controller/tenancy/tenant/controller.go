// Package tenant implements the Tenant controller: it creates a tenant's namespaces
// and keeps the RBAC, quota, limits and NetworkPolicy in each of them as declared.
package tenant

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/sets"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	tenancyv1alpha1 "orderly.dev/orderly/api/tenancy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
)

// Name is the controller's name, as given to --controllers.
const Name = "tenant"

// finalizer keeps a Tenant until its namespaces are released or deleted.
const finalizer = "tenancy.orderly.dev/cleanup"

// conflictRecheck is how soon a Tenant whose self-service objects are blocked by
// someone else's object looks again: that object is not in the cache, so its removal
// brings no event.
const conflictRecheck = time.Minute

// namespaceIndex indexes Tenants by the namespaces they list, so an event on a
// namespace that is not (yet) labelled still reaches the Tenants that want it.
const namespaceIndex = "spec.namespaces.name"

// tenantLabelIndex indexes namespaces by their tenant label: a Tenant's reconcile
// lists its namespaces twice, and a label selector would walk every namespace.
const tenantLabelIndex = "metadata.labels.tenant"

// tenantNamespaces selects the namespaces labelled as the Tenant named name's.
func tenantNamespaces(name string) client.MatchingFields {
	return client.MatchingFields{tenantLabelIndex: name}
}

// Reconciler reconciles Tenants.
type Reconciler struct {
	client.Client
	// APIReader reads straight from the API server: the content of children (the
	// cache holds only their metadata), objects the cache does not hold (children
	// that Orderly did not create), and the latest Tenant after a write lost its
	// optimistic lock.
	APIReader client.Reader
	Recorder  kit.Recorder
	// Bindable is the allow-list of ClusterRoles a Tenant may bind.
	Bindable bindableRoles
	// ManagerNamespace is the manager's own namespace, which no Tenant may manage.
	ManagerNamespace string

	// RESTMapper finds the resource of each spec.resources kind.
	RESTMapper meta.RESTMapper
	// ResourcesResync is how often a Tenant with spec.resources of a kind the manager
	// may not watch looks at its objects again (DefaultResourcesResync when zero):
	// those are repaired only then.
	ResourcesResync time.Duration

	converged *convergedChildren
	// created drops the create events of what this controller created (owncreates.go).
	created *ownCreates
	// resourceWatches watches the kinds of spec.resources (resources_watch.go).
	resourceWatches *resourceWatches
	// clusterWrites remembers the cluster-scoped objects of self-service as written.
	clusterWrites clusterWrites
}

// Controller is the Tenant controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Setup builds the reconciler and registers it with mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	r := &Reconciler{
		Client:           mgr.GetClient(),
		APIReader:        mgr.GetAPIReader(),
		Recorder:         kit.EventsFor(mgr, "orderly-tenant"),
		Bindable:         newBindableRoles(deps.BindableClusterRoles),
		ManagerNamespace: deps.Namespace,
	}
	checkBindable(ctx, r.Client, r.Bindable)
	return r.SetupWithManager(ctx, mgr, deps.Options)
}

// The manager's rights on what Tenant writes are as narrow as RBAC can say them:
// RoleBindings, quotas, LimitRanges and NetworkPolicies may be read, changed and
// deleted only under the names Tenant gives them (create, list and watch cannot be
// narrowed by name), and bind is granted only on the ClusterRoles Tenants may bind
// by default (orderly-tenant-admin and DefaultBindableClusterRoles; a platform team
// that allows more grants bind on them in a ClusterRole of its own). The names here
// are checked against the code by TestRBACNamesMatchTheCode.
//
// +kubebuilder:rbac:groups=tenancy.orderly.dev,resources=tenants,verbs=get;list;watch;patch
//
// Self-service: the shared admission policies and each Tenant's binding, and each
// Tenant's owners' ClusterRole and ClusterRoleBinding (names made at run time, so not
// narrowed by resourceNames; Orderly writes only the ones it created, and the API
// server lets it grant only what it holds itself: create namespaces, the self-service
// verb and marker below, get on Tenants, delete on namespaces).
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingadmissionpolicies;validatingadmissionpolicybindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles;clusterrolebindings,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=tenancy.orderly.dev,resources=tenants,verbs=selfservice
// +kubebuilder:rbac:groups=tenancy.orderly.dev,resources=selfservicenamespaces,verbs=create
// +kubebuilder:rbac:groups=tenancy.orderly.dev,resources=tenants/status,verbs=get;patch
// +kubebuilder:rbac:groups=tenancy.orderly.dev,resources=tenants/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups="",resources=resourcequotas;limitranges,verbs=list;watch;create
// +kubebuilder:rbac:groups="",resources=resourcequotas,verbs=get;patch;delete,resourceNames=orderly-tenant-quota
// +kubebuilder:rbac:groups="",resources=limitranges,verbs=get;patch;delete,resourceNames=orderly-tenant-limits
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=list;watch;create
// +kubebuilder:rbac:groups=networking.k8s.io,resources=networkpolicies,verbs=get;patch;delete,resourceNames=orderly-tenant-isolation
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=list;watch;create
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=rolebindings,verbs=get;patch;delete,resourceNames=orderly-tenant-owners;orderly-tenant-binding-0;orderly-tenant-binding-1;orderly-tenant-binding-2;orderly-tenant-binding-3;orderly-tenant-binding-4;orderly-tenant-binding-5;orderly-tenant-binding-6;orderly-tenant-binding-7;orderly-tenant-binding-8;orderly-tenant-binding-9;orderly-tenant-binding-10;orderly-tenant-binding-11;orderly-tenant-binding-12;orderly-tenant-binding-13;orderly-tenant-binding-14;orderly-tenant-binding-15;orderly-tenant-binding-16;orderly-tenant-binding-17;orderly-tenant-binding-18;orderly-tenant-binding-19;orderly-tenant-binding-20;orderly-tenant-binding-21;orderly-tenant-binding-22;orderly-tenant-binding-23;orderly-tenant-binding-24;orderly-tenant-binding-25;orderly-tenant-binding-26;orderly-tenant-binding-27;orderly-tenant-binding-28;orderly-tenant-binding-29;orderly-tenant-binding-30;orderly-tenant-binding-31
// +kubebuilder:rbac:groups=rbac.authorization.k8s.io,resources=clusterroles,verbs=bind,resourceNames=orderly-tenant-admin;edit;view
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;list;watch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// SetupWithManager registers the controller with mgr.
func (r *Reconciler) SetupWithManager(ctx context.Context, mgr ctrl.Manager, opts controller.Options) error {
	if r.converged == nil {
		r.converged = newConvergedChildren()
	}
	if r.created == nil {
		r.created = newOwnCreates()
	}
	// The create event of what a reconcile created would go only to that Tenant,
	// which knows of it already (owncreates.go). A Tenant listing a namespace that
	// another created learns of it in its own reconcile: its create fails with
	// AlreadyExists.
	ours := r.created.notOwnCreate
	if r.Bindable == nil {
		r.Bindable = newBindableRoles(nil)
	}
	if r.RESTMapper == nil {
		r.RESTMapper = mgr.GetRESTMapper()
	}
	if r.ResourcesResync <= 0 {
		r.ResourcesResync = DefaultResourcesResync
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &tenancyv1alpha1.Tenant{}, namespaceIndex, func(o client.Object) []string {
		t := o.(*tenancyv1alpha1.Tenant)
		names := make([]string, 0, len(t.Spec.Namespaces))
		for _, ns := range t.Spec.Namespaces {
			names = append(names, ns.Name)
		}
		return names
	}); err != nil {
		return fmt.Errorf("indexing Tenants by namespace: %w", err)
	}
	if err := mgr.GetFieldIndexer().IndexField(ctx, &corev1.Namespace{}, tenantLabelIndex, func(o client.Object) []string {
		if t := o.GetLabels()[tenancyv1alpha1.TenantLabel]; t != "" {
			return []string{t}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("indexing namespaces by tenant: %w", err)
	}
	c, err := ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		WithOptions(opts).
		For(&tenancyv1alpha1.Tenant{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&rbacv1.RoleBinding{}, builder.OnlyMetadata, builder.WithPredicates(ownedChanged, ours(kindRoleBinding))).
		Owns(&corev1.ResourceQuota{}, builder.OnlyMetadata, builder.WithPredicates(ownedChanged, ours(kindResourceQuota))).
		Owns(&corev1.LimitRange{}, builder.OnlyMetadata, builder.WithPredicates(ownedChanged, ours(kindLimitRange))).
		Owns(&networkingv1.NetworkPolicy{}, builder.OnlyMetadata, builder.WithPredicates(ownedChanged, ours(kindNetworkPolicy))).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.tenantsForNamespace), builder.WithPredicates(ours(kindNamespace))).
		// The usage and enforced limits of the tenants' quotas: typed, with only
		// limits and usage kept (childMetadata).
		Watches(&corev1.ResourceQuota{}, handler.Funcs{UpdateFunc: r.quotaUsageChanged}, builder.WithPredicates(quotaStatusChanged)).
		Owns(&admissionv1.ValidatingAdmissionPolicyBinding{}, builder.WithPredicates(ours(kindValidatingAdmissionPolicyBinding))).
		Owns(&rbacv1.ClusterRole{}, builder.WithPredicates(ours(kindClusterRole))).
		Owns(&rbacv1.ClusterRoleBinding{}, builder.WithPredicates(ours(kindClusterRoleBinding))).
		Watches(&admissionv1.ValidatingAdmissionPolicy{}, handler.EnqueueRequestsFromMapFunc(r.selfServiceTenants)).
		Watches(&admissionv1.ValidatingAdmissionPolicyBinding{}, handler.EnqueueRequestsFromMapFunc(r.selfServiceTenants)).
		Build(r)
	if err != nil {
		return err
	}
	if r.resourceWatches, err = r.newResourceWatches(mgr); err != nil {
		return err
	}
	return r.resourceWatches.kinds.Bind(c)
}

// selfServiceTenants maps a change of one of the shared admission objects to every
// Tenant that needs it (spec.selfService, spec.preventDeletion), so that a deleted or
// edited policy is restored: a binding without its policy admits everything.
func (r *Reconciler) selfServiceTenants(ctx context.Context, o client.Object) []reconcile.Request {
	protection, allowed := o.GetName() == preventDeletionPolicyName, o.GetName() == allowedPolicyName
	if o.GetName() != selfServicePolicyName && o.GetName() != guardPolicyName && !protection && !allowed {
		return nil
	}
	var listing tenancyv1alpha1.TenantList
	if err := r.List(ctx, &listing); err != nil {
		log.FromContext(ctx).Error(err, "Listing Tenants for self-service policy", "name", o.GetName())
		return nil
	}
	var reqs []reconcile.Request
	for i := range listing.Items {
		spec := &listing.Items[i].Spec
		if (!protection && !allowed && spec.SelfService != nil) || (protection && spec.PreventDeletion) || (allowed && spec.Allowed != nil) {
			reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: listing.Items[i].Name}})
		}
	}
	return reqs
}

// usageRefresh is how long a Tenant without totalQuota waits before a change of its
// quotas' usage is reported: a burst of pods then brings one reconcile, not one each.
const usageRefresh = 10 * time.Second

// quotaUsageChanged enqueues the Tenant that controls a quota whose usage or enforced
// limits changed: at once when it has totalQuota (its headroom must move), after
// usageRefresh when the change is only to be reported.
func (r *Reconciler) quotaUsageChanged(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	ref := metav1.GetControllerOfNoCopy(e.ObjectNew)
	if ref == nil || ref.Kind != "Tenant" || ref.APIVersion != tenancyv1alpha1.GroupVersion.String() || e.ObjectNew.GetName() != quotaName {
		return
	}
	var t tenancyv1alpha1.Tenant
	if err := r.Get(ctx, client.ObjectKey{Name: ref.Name}, &t); err != nil || t.UID != ref.UID {
		return
	}
	req := reconcile.Request{NamespacedName: client.ObjectKey{Name: t.Name}}
	if t.Spec.TotalQuota != nil {
		q.Add(req)
		return
	}
	// A report waits behind the Tenants that have objects to write.
	if pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request]); ok {
		pq.AddWithOpts(priorityqueue.AddOpts{After: usageRefresh, Priority: ptr.To(handler.LowPriority)}, req)
		return
	}
	q.AddAfter(req, usageRefresh)
}

// tenantsForNamespace maps a namespace to the Tenants that own, may adopt, or list it.
func (r *Reconciler) tenantsForNamespace(ctx context.Context, o client.Object) []reconcile.Request {
	seen := map[string]bool{}
	if t := o.GetLabels()[tenancyv1alpha1.TenantLabel]; t != "" {
		seen[t] = true
	}
	if t := o.GetAnnotations()[tenancyv1alpha1.AdoptAnnotation]; t != "" {
		seen[t] = true
	}
	var listing tenancyv1alpha1.TenantList
	if err := r.List(ctx, &listing, client.MatchingFields{namespaceIndex: o.GetName()}); err != nil {
		log.FromContext(ctx).Error(err, "Listing Tenants for Namespace", "namespace", o.GetName())
	}
	for i := range listing.Items {
		seen[listing.Items[i].Name] = true
	}
	reqs := make([]reconcile.Request, 0, len(seen))
	for name := range seen {
		reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKey{Name: name}})
	}
	return reqs
}

// Reconcile brings one Tenant's namespaces and their contents to the declared state.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var t tenancyv1alpha1.Tenant
	if err := r.Get(ctx, req.NamespacedName, &t); err != nil {
		if apierrors.IsNotFound(err) {
			series.Forget(req.NamespacedName)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !t.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finalize(ctx, &t)
	}
	// The finalizer is written before any namespace is created, so that a Tenant is
	// never deleted without its namespaces being released or deleted.
	if err := kit.AddFinalizer(ctx, r.Client, r.APIReader, &t, finalizer); err != nil {
		switch {
		case errors.Is(err, kit.ErrDeleting):
			return ctrl.Result{}, r.finalize(ctx, &t)
		case apierrors.IsNotFound(err):
			series.Forget(req.NamespacedName)
			return ctrl.Result{}, nil
		}
		return ctrl.Result{}, fmt.Errorf("adding finalizer: %w", err)
	}

	// Bindings to roles Tenants may not bind are never created (and removed if an
	// earlier allow-list let them be); the rest of the Tenant goes ahead.
	refused := refusedBindings(&t, r.Bindable)
	skip := refusedIndexes(refused)
	// The prevent-deletion policy before the namespaces get the label it reads.
	protection := r.reconcilePreventDeletion(ctx, &t)
	allowed := r.reconcileAllowed(ctx, &t)
	// The limits of the quotas are planned from what every namespace uses, before any
	// namespace's quota is written.
	quotas, err := r.reconcileQuotaPlan(ctx, &t)
	if err != nil {
		return ctrl.Result{}, err
	}
	results := make([]namespaceResult, 0, len(t.Spec.Namespaces))
	for i := range t.Spec.Namespaces {
		results = append(results, r.reconcileNamespace(ctx, &t, &t.Spec.Namespaces[i], skip, quotas))
	}
	// Self-service: the admission objects first, then the namespaces the owners made.
	ss := r.reconcileSelfService(ctx, &t)
	selfService := sets.New[string]()
	for i := range ss.namespaces {
		selfService.Insert(ss.namespaces[i].Name)
		results = append(results, r.reconcileSelfServiceNamespace(ctx, &t, &ss.namespaces[i], skip, quotas))
	}
	for _, name := range ss.notAdmitted {
		results = append(results, namespaceResult{name: name, state: tenancyv1alpha1.NamespaceConflict, message: fmt.Sprintf(
			"namespace %q is labelled %s=%s but was not created through self-service (it existed before spec.selfService was enabled); it is left alone: to hand it to this tenant, list it in spec.namespaces and annotate it %s=%s",
			name, tenancyv1alpha1.TenantLabel, t.Name, tenancyv1alpha1.AdoptAnnotation, t.Name)})
	}
	var created []string
	for _, res := range results {
		if res.created {
			created = append(created, res.name)
		}
	}
	if len(created) > 0 {
		// One Event per reconcile, not per namespace: Events are API writes too.
		r.Recorder.Eventf(&t, nil, corev1.EventTypeNormal, "NamespaceCreated", "Create", "Created namespace(s) %s", strings.Join(created, ", "))
	}
	extra := r.reconcileResources(ctx, &t, resourceNamespaces(results))
	releaseErr := r.releaseUnlisted(ctx, &t, selfService)

	// A conflict means an object changed after this reconcile read it: what was
	// observed is stale, so nothing is reported from it, and the reconcile runs again.
	for _, res := range results {
		if apierrors.IsConflict(res.err) {
			return ctrl.Result{}, res.err
		}
	}
	if err := r.updateStatus(ctx, &t, results, refused, ss, protection, allowed, quotas, extra); err != nil {
		return ctrl.Result{}, err
	}
	if ss.err != nil {
		return ctrl.Result{}, ss.err
	}
	if protection.err != nil {
		return ctrl.Result{}, protection.err
	}
	if allowed.err != nil {
		return ctrl.Result{}, allowed.err
	}
	if extra.err != nil {
		return ctrl.Result{}, extra.err
	}
	if ss.reason == ReasonSelfServiceConflict || protection.reason != "" || allowed.reason != "" || extra.recheck {
		// The object in the way is not Orderly's, so its removal may bring no event.
		return ctrl.Result{RequeueAfter: conflictRecheck}, nil
	}
	// A write that failed is retried with the controller's backoff; a conflict is
	// not an error: it resolves when a person acts, and the namespace watch sees that.
	for _, res := range results {
		if res.err != nil {
			return ctrl.Result{}, res.err
		}
	}
	if releaseErr != nil {
		return ctrl.Result{}, releaseErr
	}
	for _, res := range results {
		if res.state == tenancyv1alpha1.NamespacePending {
			return ctrl.Result{RequeueAfter: pendingRecheck}, nil
		}
	}
	if extra.unwatched {
		// Objects of a kind the manager may not watch: this is how hand edits are
		// repaired.
		return ctrl.Result{RequeueAfter: r.ResourcesResync}, nil
	}
	return ctrl.Result{}, nil
}

// finalize releases or deletes every namespace of a Tenant being deleted, then lets
// it go. Children in retained namespaces carry owner references to the Tenant, so the
// garbage collector removes them once the Tenant is gone.
func (r *Reconciler) finalize(ctx context.Context, t *tenancyv1alpha1.Tenant) error {
	if !controllerutil.ContainsFinalizer(t, finalizer) {
		return nil
	}
	owned, err := r.ownedNamespaces(ctx, t)
	if err != nil {
		return err
	}
	for i := range owned {
		if err := r.letGo(ctx, t, &owned[i], false); err != nil {
			return err
		}
	}
	if err := kit.RemoveFinalizer(ctx, r.Client, r.APIReader, t, finalizer); err != nil {
		return err
	}
	series.Forget(client.ObjectKeyFromObject(t))
	return nil
}
