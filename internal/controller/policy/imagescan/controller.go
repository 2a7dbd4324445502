// Package imagescan is the controller that keeps one ImageScan per image digest in
// use: it watches Pods (trimmed in the cache), resolves tags to digests, scans each
// digest with a bounded pool of workers outside any reconcile, rescans when the
// vulnerability database changes or the rescan interval passes, and deletes the
// ImageScans no pod has used for the retention period. Admission (the ImagePolicy
// webhook) reads its results from the cache and never scans.
package imagescan

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/clock"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log"

	policyv1alpha1 "orderly.dev/orderly/api/policy/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Name is the controller's name, as given to --controllers.
const Name = "imagescan"

// Defaults of the settings the manager's flags change.
const (
	DefaultWorkers       = 2
	DefaultRetention     = 7 * 24 * time.Hour
	DefaultRescan        = 24 * time.Hour
	DefaultInterval      = 30 * time.Second
	DefaultScanTimeout   = 5 * time.Minute
	DefaultResolveTTL    = 5 * time.Minute
	DefaultRetryInterval = 5 * time.Minute
	DefaultRefresh       = time.Hour
)

// Settings are the scanner's manager flags (cmd/orderly sets them before Setup).
var Settings struct {
	// NewEngine builds the scanning engine; nil disables the controller with an
	// error at start-up.
	NewEngine func() (Engine, error)
	// CredentialsSecret is a kubernetes.io/dockerconfigjson Secret in the manager's
	// namespace whose credentials are used for every registry it names.
	CredentialsSecret string
	// PodPullSecrets: try the imagePullSecrets of the pods that run an image (and of
	// the object admission met) first.
	PodPullSecrets bool
	Workers        int
	Retention      time.Duration
	// RefreshInterval is how often the vulnerability database is reloaded.
	RefreshInterval time.Duration
	// FetchDB, when set, downloads the database into its directory before each
	// reload (--imagescan-db-url); changed says whether any archive was replaced.
	FetchDB func(ctx context.Context) (changed bool, err error)
}

// +kubebuilder:rbac:groups=policy.orderly.dev,resources=imagescans,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=imagescans/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=policy.orderly.dev,resources=imagepolicies,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=pods,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get

// Controller is the ImageScan controller as the manager runs it.
var Controller = kit.Controller{Name: Name, Cache: Cache, Setup: Setup}

// Cache trims Pods to their images (PodCache) and ImageScans to what is read
// (ScanCache).
func Cache() kit.CacheRules {
	return kit.CacheRules{&corev1.Pod{}: PodCache(), &policyv1alpha1.ImageScan{}: ScanCache()}
}

// ScanCache is the cache rule for ImageScans that both image controllers use: their
// managedFields, which list every field of the status Orderly writes, are read by
// nobody, and with thousands of ImageScans they are a large share of the cache.
func ScanCache() cache.ByObject { return cache.ByObject{Transform: stripManagedFields} }

// stripManagedFields is made once: the kit tells two cache rules apart by the name of
// their transform's function, and a closure made at each call site may be inlined
// under a different name.
var stripManagedFields = cache.TransformStripManagedFields()

// Setup builds the scanner controller from Settings and adds it to mgr.
func Setup(ctx context.Context, mgr ctrl.Manager, deps kit.Deps) error {
	var e Engine = Unavailable{Err: errors.New("no scanning engine is configured")}
	if Settings.NewEngine != nil {
		var err error
		if e, err = Settings.NewEngine(); err != nil {
			// The manager runs on: ImageScans carry the reason, policies report it.
			log.FromContext(ctx).Error(err, "Starting the image scanning engine; every scan fails with DatabaseMissing until the manager restarts")
			e = Unavailable{Err: fmt.Errorf("the scanning engine did not start: %w", err)}
		}
	}
	s := &Scanner{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Engine: e, Namespace: deps.Namespace,
		CredentialsSecret: Settings.CredentialsSecret, PodPullSecrets: Settings.PodPullSecrets, Workers: Settings.Workers, Retention: Settings.Retention,
		RefreshInterval: Settings.RefreshInterval, FetchDB: Settings.FetchDB, Clock: deps.ClockOrReal(),
	}
	return s.SetupWithManager(ctx, mgr)
}

// Scanner is the controller. It runs on the leader only.
//
// It is a runnable (added with mgr.Add), not a reconciler: its unit of work is an
// image (a tag to resolve, a digest to scan) found by an inventory of all running
// pods at once, not the change of one object; the ImageScans it creates and deletes
// are its output, not its input; and a scan, which can take minutes, runs on the
// scanner's own bounded pool of workers so that no reconcile waits on a registry.
// Its status writes go through the kit all the same (kit.PatchStatus, under the
// optimistic lock, and kit.Conditions): see patchStatus.
type Scanner struct {
	Client    client.Client
	APIReader client.Reader
	Engine    Engine
	// Namespace is the manager's namespace, where CredentialsSecret lives.
	Namespace         string
	CredentialsSecret string
	// PodPullSecrets: the pull secrets a job names are tried before CredentialsSecret.
	PodPullSecrets bool
	// Workers scan at once; DefaultWorkers when zero.
	Workers int
	// Retention is how long an ImageScan no pod uses is kept.
	Retention time.Duration
	// Interval is the time between inventories of the pods when nothing changes.
	Interval time.Duration
	// ScanTimeout bounds one resolve or scan, registry calls included.
	ScanTimeout time.Duration
	// ResolveTTL is how long a tag's resolution to a digest is trusted.
	ResolveTTL time.Duration
	// RetryInterval is how long after a failed scan it is tried again.
	RetryInterval time.Duration
	// RefreshInterval is how often the database is reloaded; DefaultRefresh when zero.
	RefreshInterval time.Duration
	// FetchDB, when set, downloads the database before the first inventory and before
	// each reload.
	FetchDB func(ctx context.Context) (changed bool, err error)
	Clock   clock.PassiveClock

	trigger chan struct{}
	queue   workqueue.TypedRateLimitingInterface[string]
	mu      sync.Mutex
	jobs    map[string]job
	// resolved maps TagKey to the digest it last resolved to, and when.
	resolved map[string]resolution
}

type resolution struct {
	digest string
	at     time.Time
	// failed is when the last resolve failed, zero after a success.
	failed time.Time
}

type job struct {
	resolve    bool
	repository string
	tag        string
	digest     string
	// secrets are the pull secrets of the pods that run the image (or of the object
	// admission met), tried before the configured credentials.
	secrets []client.ObjectKey
}

func (j job) key() string {
	if j.resolve {
		return "resolve/" + TagKey(j.repository, j.tag)
	}
	return "scan/" + ScanName(j.repository, j.digest)
}

var registerIndex sync.Map

// EnsureTagIndex registers TagIndex on mgr's cache once, for whichever of the
// scanner and the webhook comes first.
func EnsureTagIndex(ctx context.Context, mgr ctrl.Manager) error {
	if _, loaded := registerIndex.LoadOrStore(mgr, true); loaded {
		return nil
	}
	return mgr.GetFieldIndexer().IndexField(ctx, &policyv1alpha1.ImageScan{}, TagIndex, IndexTags)
}

// SetupWithManager adds the scanner to mgr and triggers an inventory on every pod
// change and every new pending ImageScan.
func (s *Scanner) SetupWithManager(ctx context.Context, mgr ctrl.Manager) error {
	s.defaults()
	if err := EnsureTagIndex(ctx, mgr); err != nil {
		return err
	}
	poke := toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { s.Trigger() },
		UpdateFunc: func(_, _ any) { s.Trigger() },
		DeleteFunc: func(any) { s.Trigger() },
	}
	for _, o := range []client.Object{&corev1.Pod{}, &policyv1alpha1.ImageScan{}} {
		inf, err := mgr.GetCache().GetInformer(ctx, o)
		if err != nil {
			return err
		}
		if _, err := inf.AddEventHandler(poke); err != nil {
			return err
		}
	}
	return mgr.Add(s)
}

func (s *Scanner) defaults() {
	if s.Workers <= 0 {
		s.Workers = DefaultWorkers
	}
	if s.Retention <= 0 {
		s.Retention = DefaultRetention
	}
	if s.Interval <= 0 {
		s.Interval = DefaultInterval
	}
	if s.ScanTimeout <= 0 {
		s.ScanTimeout = DefaultScanTimeout
	}
	if s.ResolveTTL <= 0 {
		s.ResolveTTL = DefaultResolveTTL
	}
	if s.RetryInterval <= 0 {
		s.RetryInterval = DefaultRetryInterval
	}
	if s.RefreshInterval <= 0 {
		s.RefreshInterval = DefaultRefresh
	}
	if s.Clock == nil {
		s.Clock = clock.RealClock{}
	}
	s.trigger = make(chan struct{}, 1)
	s.queue = workqueue.NewTypedRateLimitingQueueWithConfig(
		workqueue.NewTypedItemExponentialFailureRateLimiter[string](5*time.Second, s.RetryInterval),
		workqueue.TypedRateLimitingQueueConfig[string]{Name: "imagescan"})
	s.jobs = map[string]job{}
	s.resolved = map[string]resolution{}
}

// NeedLeaderElection: one replica scans and writes ImageScans.
func (s *Scanner) NeedLeaderElection() bool { return true }

// Trigger asks for an inventory soon; it never blocks.
func (s *Scanner) Trigger() {
	select {
	case s.trigger <- struct{}{}:
	default:
	}
}

// Start runs the workers and the inventory loop until ctx ends.
func (s *Scanner) Start(ctx context.Context) error {
	logger := log.FromContext(ctx).WithValues("controller", Name)
	ctx = log.IntoContext(ctx, logger)
	var wg sync.WaitGroup
	for range s.Workers {
		wg.Go(func() {
			for s.work(ctx) {
			}
		})
	}
	defer func() {
		s.queue.ShutDown()
		wg.Wait()
	}()
	if s.FetchDB != nil {
		// A downloaded database is wanted before the first scans, which would all
		// fail with DatabaseMissing on a new manager.
		s.refreshDB(ctx)
	}
	timer := time.NewTimer(0)
	defer timer.Stop()
	refresh := time.NewTicker(s.RefreshInterval)
	defer refresh.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-refresh.C:
			if !s.refreshDB(ctx) {
				continue
			}
		case <-timer.C:
		case <-s.trigger:
			// Pods come in bursts (a rollout): gather them into one inventory.
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(500 * time.Millisecond):
			}
		}
		if err := s.Inventory(ctx); err != nil {
			logger.Error(err, "Taking the inventory of images in use")
		}
		queueLength.Set(float64(s.queue.Len()))
		timer.Reset(s.Interval)
	}
}

// refreshDB downloads the database (with FetchDB) and reloads it; it returns whether
// a new version was loaded, which makes the next inventory rescan every image.
func (s *Scanner) refreshDB(ctx context.Context) bool {
	logger := log.FromContext(ctx)
	if s.FetchDB != nil {
		switch changed, err := s.FetchDB(ctx); {
		case err != nil:
			databaseDownloads.WithLabelValues("Failed").Inc()
			logger.Error(err, "Downloading the vulnerability database; the one loaded before stays in use")
		case changed:
			databaseDownloads.WithLabelValues("Changed").Inc()
		default:
			databaseDownloads.WithLabelValues("Unchanged").Inc()
		}
	}
	changed, err := s.Engine.ReloadDB()
	if err != nil {
		logger.Error(err, "Reloading the vulnerability database")
	}
	if changed {
		logger.Info("Vulnerability database changed: rescanning images in use", "version", s.Engine.DBVersion())
		databaseReloads.Inc()
	}
	return changed
}

func (s *Scanner) enqueue(j job) {
	k := j.key()
	s.mu.Lock()
	s.jobs[k] = j
	s.mu.Unlock()
	s.queue.Add(k)
	queueLength.Set(float64(s.queue.Len()))
}

func (s *Scanner) work(ctx context.Context) bool {
	k, shutdown := s.queue.Get()
	if shutdown {
		return false
	}
	defer s.queue.Done(k)
	s.mu.Lock()
	j, ok := s.jobs[k]
	s.mu.Unlock()
	if !ok {
		s.queue.Forget(k)
		return true
	}
	var err error
	if j.resolve {
		err = s.resolve(ctx, j)
	} else {
		err = s.scan(ctx, j)
	}
	if err != nil {
		log.FromContext(ctx).Error(err, "Writing an ImageScan", "job", k)
		s.queue.AddRateLimited(k)
		return true
	}
	s.queue.Forget(k)
	s.mu.Lock()
	delete(s.jobs, k)
	s.mu.Unlock()
	queueLength.Set(float64(s.queue.Len()))
	return true
}

// use is an image digest in use, as the inventory found it.
type use struct {
	repository, digest string
	tags               []string
	workloads          map[policyv1alpha1.ImageWorkload]bool
	pods               int
}

// Inventory takes stock of the images pods use, level-triggered: it creates and
// updates ImageScans, queues resolves and scans that are due, and deletes
// ImageScans unused for the retention period.
func (s *Scanner) Inventory(ctx context.Context) error {
	now := s.Clock.Now()
	var policies policyv1alpha1.ImagePolicyList
	if err := s.Client.List(ctx, &policies); err != nil {
		return err
	}
	ps := make([]*policyv1alpha1.ImagePolicy, 0, len(policies.Items))
	rescan := DefaultRescan
	for i := range policies.Items {
		p := &policies.Items[i]
		ps = append(ps, p)
		if p.Spec.RescanInterval != nil && p.Spec.RescanInterval.Duration > 0 {
			rescan = min(rescan, p.Spec.RescanInterval.Duration)
		}
	}
	// Only what a policy covers is scanned: no registry is called for the images of
	// namespaces no ImagePolicy applies to (nor of kube-* and Orderly's own).
	matched, err := MatchedNamespaces(ctx, s.Client, ps, s.Namespace)
	if err != nil {
		return err
	}
	var pods corev1.PodList
	if len(matched) > 0 {
		if err := s.Client.List(ctx, &pods); err != nil {
			return err
		}
	}
	uses := map[string]*use{}
	secrets := map[string][]client.ObjectKey{} // by repository
	toResolve := map[string]job{}              // by TagKey
	for i := range pods.Items {
		pod := &pods.Items[i]
		if !matched[pod.Namespace] || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		images, _ := PodImages(pod)
		for _, img := range images {
			secrets[img.Repository] = addPullSecrets(secrets[img.Repository], pod.Namespace, pod.Spec.ImagePullSecrets)
			digest := img.Digest
			if digest == "" {
				r, fresh := s.resolution(img.Repository, img.Tag, now)
				if !fresh {
					toResolve[TagKey(img.Repository, img.Tag)] = job{resolve: true, repository: img.Repository, tag: img.Tag}
				}
				if r == "" {
					continue
				}
				digest = r
			}
			name := ScanName(img.Repository, digest)
			u := uses[name]
			if u == nil {
				u = &use{repository: img.Repository, digest: digest, workloads: map[policyv1alpha1.ImageWorkload]bool{}}
				uses[name] = u
			}
			if img.Tag != "" && !slices.Contains(u.tags, img.Tag) {
				u.tags = append(u.tags, img.Tag)
			}
			u.workloads[WorkloadOf(pod)] = true
			u.pods++
		}
	}
	for _, k := range slices.Sorted(maps.Keys(toResolve)) {
		j := toResolve[k]
		j.secrets = secrets[j.repository]
		s.enqueue(j)
	}
	var scans policyv1alpha1.ImageScanList
	if err := s.Client.List(ctx, &scans); err != nil {
		return err
	}
	dbVersion := s.Engine.DBVersion()
	var errs []error
	for i := range scans.Items {
		sc := &scans.Items[i]
		if sc.Labels[policyv1alpha1.ImageScanLabel] != "true" {
			continue
		}
		if sc.Spec.Digest == "" {
			errs = append(errs, s.pending(ctx, sc, secrets[sc.Spec.Repository], now))
			continue
		}
		u := uses[sc.Name]
		delete(uses, sc.Name)
		errs = append(errs, s.observe(ctx, sc, u, now))
		if u == nil && sc.Status.LastSeenInUse != nil && now.Sub(sc.Status.LastSeenInUse.Time) > s.Retention ||
			u == nil && sc.Status.LastSeenInUse == nil && now.Sub(sc.CreationTimestamp.Time) > s.Retention {
			errs = append(errs, s.collect(ctx, sc))
			continue
		}
		if s.due(sc, dbVersion, rescan, now) {
			s.enqueue(job{repository: sc.Spec.Repository, digest: sc.Spec.Digest, secrets: admittedWith(sc, secrets[sc.Spec.Repository])})
		}
	}
	for _, name := range slices.Sorted(maps.Keys(uses)) {
		u := uses[name]
		errs = append(errs, s.create(ctx, u.repository, u.digest, u.tags, u, now))
		s.enqueue(job{repository: u.repository, digest: u.digest, secrets: secrets[u.repository]})
	}
	return errors.Join(errs...)
}

// resolution is the digest a tag last resolved to ("" when never), and whether
// that is recent enough to trust.
func (s *Scanner) resolution(repository, tag string, now time.Time) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resolved[TagKey(repository, tag)]
	if !ok {
		return "", false
	}
	// A failed resolve is tried again after the retry interval, not every inventory.
	if !r.failed.IsZero() && now.Sub(r.failed) < s.RetryInterval {
		return r.digest, true
	}
	return r.digest, now.Sub(r.at) < s.ResolveTTL
}

// due says whether sc should be scanned (again): never scanned, scanned against
// another database, scanned longer ago than rescan, or failed longer ago than the
// retry interval.
func (s *Scanner) due(sc *policyv1alpha1.ImageScan, dbVersion string, rescan time.Duration, now time.Time) bool {
	st := &sc.Status
	if st.Error != nil && st.Error.Time != nil {
		return now.Sub(st.Error.Time.Time) >= s.RetryInterval
	}
	if st.ScannedAt == nil {
		return true
	}
	return (dbVersion != "" && st.DatabaseVersion != dbVersion) || now.Sub(st.ScannedAt.Time) >= rescan
}

func scanLabels() map[string]string {
	return map[string]string{labels.ManagedBy: labels.ManagedByValue, policyv1alpha1.ImageScanLabel: "true"}
}

// create makes the ImageScan of repository@digest, unless it exists.
func (s *Scanner) create(ctx context.Context, repository, digest string, tags []string, u *use, now time.Time) error {
	sc := &policyv1alpha1.ImageScan{
		ObjectMeta: metav1.ObjectMeta{Name: ScanName(repository, digest), Labels: scanLabels()},
		Spec:       policyv1alpha1.ImageScanSpec{Repository: repository, Digest: digest},
	}
	if err := s.Client.Create(ctx, sc); err != nil {
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return fmt.Errorf("creating ImageScan %s: %w", sc.Name, err)
	}
	return s.patchStatus(ctx, sc, func(latest *policyv1alpha1.ImageScan) {
		st := &latest.Status
		// The new ImageScan's status is empty, unless another worker wrote it since
		// (then it is read again): its tags and its scan stay.
		merged := slices.Clone(tags)
		for _, t := range st.Tags {
			if !slices.Contains(merged, t) {
				merged = append(merged, t)
			}
		}
		st.Tags = kit.Bounded(merged, policyv1alpha1.MaxImageScanTags)
		if u != nil {
			setUse(st, u, now)
		}
		if meta.FindStatusCondition(st.Conditions, policyv1alpha1.ImageScanConditionScanned) == nil {
			kit.ConditionsOf(&st.Conditions, 0).Unknown(policyv1alpha1.ImageScanConditionScanned, policyv1alpha1.ImageScanReasonPending, "Queued for scanning")
		}
	})
}

// patchStatus writes the status that set computes on sc with kit.PatchStatus: a
// merge patch under the optimistic lock, so that a status computed from a copy the
// cache held, or read before a scan of several minutes, never overwrites what
// another worker wrote since. After a conflict set runs again on the version read
// from the API server: it works from the ImageScan it is given. A gone ImageScan is
// no error.
func (s *Scanner) patchStatus(ctx context.Context, sc *policyv1alpha1.ImageScan, set func(*policyv1alpha1.ImageScan)) error {
	if err := kit.PatchStatus(ctx, s.Client, s.APIReader, sc, set); err != nil {
		return fmt.Errorf("writing the status of ImageScan %s: %w", sc.Name, err)
	}
	return nil
}

func setUse(st *policyv1alpha1.ImageScanStatus, u *use, now time.Time) {
	ws := slices.SortedFunc(maps.Keys(u.workloads), func(a, b policyv1alpha1.ImageWorkload) int {
		if a.Namespace != b.Namespace {
			return compare(a.Namespace, b.Namespace)
		}
		if a.Kind != b.Kind {
			return compare(a.Kind, b.Kind)
		}
		return compare(a.Name, b.Name)
	})
	if len(ws) > policyv1alpha1.MaxImageScanUsedBy {
		ws = ws[:policyv1alpha1.MaxImageScanUsedBy]
	}
	st.UsedBy = ws
	st.UsedByCount = int32(u.pods)
	st.LastSeenInUse = &metav1.Time{Time: now}
}

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// observe writes what the inventory saw of sc's use: tags, users and when it was
// last in use. lastSeenInUse is written only when something else changes or it is
// older than a tenth of the retention, so a steady cluster causes few writes.
func (s *Scanner) observe(ctx context.Context, sc *policyv1alpha1.ImageScan, u *use, now time.Time) error {
	return s.patchStatus(ctx, sc, func(latest *policyv1alpha1.ImageScan) { s.observed(latest, u, now) })
}

// observed sets in sc's status what observe writes, or leaves it as it is when only
// a recent lastSeenInUse would change.
func (s *Scanner) observed(sc *policyv1alpha1.ImageScan, u *use, now time.Time) {
	st := &sc.Status
	if u == nil {
		st.UsedBy, st.UsedByCount = nil, 0
		return
	}
	before := st.DeepCopy()
	tags := slices.Clone(u.tags)
	for _, t := range st.Tags {
		if !slices.Contains(tags, t) && !s.movedAway(sc, t) {
			tags = append(tags, t)
		}
	}
	st.Tags = kit.Bounded(tags, policyv1alpha1.MaxImageScanTags)
	setUse(st, u, now)
	sameUse := slices.Equal(st.UsedBy, before.UsedBy) && st.UsedByCount == before.UsedByCount && slices.Equal(st.Tags, before.Tags)
	if sameUse && before.LastSeenInUse != nil && now.Sub(before.LastSeenInUse.Time) < s.Retention/10 {
		*st = *before
	}
}

// movedAway says whether tag t of sc's repository now resolves to another digest.
func (s *Scanner) movedAway(sc *policyv1alpha1.ImageScan, t string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.resolved[TagKey(sc.Spec.Repository, t)]
	return ok && r.digest != sc.Spec.Digest
}

// collect deletes an ImageScan that no pod used for the retention period.
func (s *Scanner) collect(ctx context.Context, sc *policyv1alpha1.ImageScan) error {
	err := s.Client.Delete(ctx, sc, client.Preconditions{UID: &sc.UID, ResourceVersion: &sc.ResourceVersion})
	if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
		return fmt.Errorf("deleting unused ImageScan %s: %w", sc.Name, err)
	}
	collected.Inc()
	return nil
}

// pending handles a pending ImageScan (a tag admission met): queue its resolve, with
// the pull secrets of the pods that run its repository and of the object admission
// met, and delete it once the retention period passes without success.
func (s *Scanner) pending(ctx context.Context, sc *policyv1alpha1.ImageScan, podSecrets []client.ObjectKey, now time.Time) error {
	if now.Sub(sc.CreationTimestamp.Time) > s.Retention {
		return s.collect(ctx, sc)
	}
	if st := sc.Status.Error; st != nil && st.Time != nil && now.Sub(st.Time.Time) < s.RetryInterval {
		return nil
	}
	s.enqueue(job{resolve: true, repository: sc.Spec.Repository, tag: sc.Spec.Tag, secrets: admittedWith(sc, podSecrets)})
	return nil
}

// resolve asks the registry for a tag's digest, makes sure the digest has its
// ImageScan with the tag, queues its scan, and deletes the tag's pending ImageScan.
func (s *Scanner) resolve(ctx context.Context, j job) error {
	var digest string
	err := s.withCredentials(ctx, j.repository, j.secrets, func(kc authn.Keychain) error {
		rctx, cancel := context.WithTimeout(ctx, s.ScanTimeout)
		defer cancel()
		var err error
		digest, err = s.Engine.Resolve(rctx, Ref{Repository: j.repository, Tag: j.tag}.Pullable(), kc)
		return err
	})
	if err != nil {
		resolves.WithLabelValues(s.reason(err)).Inc()
		s.mu.Lock()
		r := s.resolved[TagKey(j.repository, j.tag)]
		r.failed = s.Clock.Now()
		s.resolved[TagKey(j.repository, j.tag)] = r
		s.mu.Unlock()
		return s.pendingFailed(ctx, j, s.reason(err), err)
	}
	resolves.WithLabelValues("Resolved").Inc()
	now := s.Clock.Now()
	s.mu.Lock()
	s.resolved[TagKey(j.repository, j.tag)] = resolution{digest: digest, at: now}
	s.mu.Unlock()
	name := ScanName(j.repository, digest)
	var sc policyv1alpha1.ImageScan
	switch err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &sc); {
	case apierrors.IsNotFound(err):
		if err := s.create(ctx, j.repository, digest, []string{j.tag}, nil, now); err != nil {
			return err
		}
	case err != nil:
		return err
	case !slices.Contains(sc.Status.Tags, j.tag):
		err := s.patchStatus(ctx, &sc, func(latest *policyv1alpha1.ImageScan) {
			if !slices.Contains(latest.Status.Tags, j.tag) {
				latest.Status.Tags = kit.Bounded(append([]string{j.tag}, latest.Status.Tags...), policyv1alpha1.MaxImageScanTags)
			}
		})
		if err != nil {
			return err
		}
	}
	if sc.Status.ScannedAt == nil && sc.Status.Error == nil {
		s.enqueue(job{repository: j.repository, digest: digest, secrets: j.secrets})
	}
	pending := &policyv1alpha1.ImageScan{ObjectMeta: metav1.ObjectMeta{Name: PendingName(j.repository, j.tag)}}
	if err := s.Client.Delete(ctx, pending); err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("deleting pending ImageScan %s: %w", pending.Name, err)
	}
	return nil
}

// pendingFailed records a failed resolve on the tag's pending ImageScan, if there
// is one, so that admission can say why the image is still unscanned. It is not
// retried before the next inventory that finds it due.
func (s *Scanner) pendingFailed(ctx context.Context, j job, reason string, cause error) error {
	log.FromContext(ctx).Info("Resolving an image tag failed", "image", TagKey(j.repository, j.tag), "reason", reason, "error", cause.Error())
	var sc policyv1alpha1.ImageScan
	if err := s.Client.Get(ctx, client.ObjectKey{Name: PendingName(j.repository, j.tag)}, &sc); err != nil {
		return client.IgnoreNotFound(err)
	}
	now := s.Clock.Now()
	return s.patchStatus(ctx, &sc, func(latest *policyv1alpha1.ImageScan) { setError(&latest.Status, reason, cause, now) })
}

func setError(st *policyv1alpha1.ImageScanStatus, reason string, cause error, now time.Time) {
	st.Error = &policyv1alpha1.ImageScanError{Reason: reason, Message: kit.Truncate(cause.Error(), 1024), Time: &metav1.Time{Time: now}}
	kit.ConditionsOf(&st.Conditions, 0).False(policyv1alpha1.ImageScanConditionScanned, reason, kit.Truncate(cause.Error(), 1024))
}

// scan scans one digest and writes the result, or the error, to its ImageScan.
func (s *Scanner) scan(ctx context.Context, j job) error {
	var sc policyv1alpha1.ImageScan
	if err := s.Client.Get(ctx, client.ObjectKey{Name: ScanName(j.repository, j.digest)}, &sc); err != nil {
		return client.IgnoreNotFound(err)
	}
	start := time.Now()
	var res *Result
	err := s.withCredentials(ctx, j.repository, j.secrets, func(kc authn.Keychain) error {
		sctx, cancel := context.WithTimeout(ctx, s.ScanTimeout)
		defer cancel()
		var err error
		res, err = s.Engine.Scan(sctx, Ref{Repository: j.repository, Digest: j.digest}.Pullable(), kc)
		return err
	})
	now := s.Clock.Now()
	var record func(*policyv1alpha1.ImageScanStatus)
	if err != nil {
		reason := s.reason(err)
		scans.WithLabelValues(reason).Inc()
		record = func(st *policyv1alpha1.ImageScanStatus) { setError(st, reason, err, now) }
	} else {
		scans.WithLabelValues("Succeeded").Inc()
		scanDuration.Observe(time.Since(start).Seconds())
		scanner := s.Engine.Scanner()
		record = func(st *policyv1alpha1.ImageScanStatus) { ApplyResult(st, res, scanner, now) }
	}
	// The scan took a while: what the inventory wrote meanwhile is read again.
	return s.patchStatus(ctx, &sc, func(latest *policyv1alpha1.ImageScan) { record(&latest.Status) })
}

// ApplyResult writes a scan's result into status: counts of every finding, the 20
// worst, the scanner and database versions, and clears a previous error.
func ApplyResult(st *policyv1alpha1.ImageScanStatus, res *Result, scanner policyv1alpha1.ScannerInfo, now time.Time) {
	st.Error = nil
	st.Scanner = &scanner
	st.DatabaseVersion = res.DBVersion
	st.ScannedAt = &metav1.Time{Time: now}
	st.Packages = int32(res.Packages)
	st.Counts = policyv1alpha1.SeverityCounts{}
	findings := slices.Clone(res.Findings)
	if res.Counts != nil {
		// The engine counts every finding; it may keep fewer.
		st.Counts = policyv1alpha1.SeverityCounts{
			Critical: int32(res.Counts[policyv1alpha1.SeverityCritical]), High: int32(res.Counts[policyv1alpha1.SeverityHigh]),
			Medium: int32(res.Counts[policyv1alpha1.SeverityMedium]), Low: int32(res.Counts[policyv1alpha1.SeverityLow]),
			Unknown: int32(res.Counts[policyv1alpha1.SeverityUnknown]),
		}
	}
	for _, f := range findings {
		if res.Counts != nil {
			break
		}
		switch f.Severity {
		case policyv1alpha1.SeverityCritical:
			st.Counts.Critical++
		case policyv1alpha1.SeverityHigh:
			st.Counts.High++
		case policyv1alpha1.SeverityMedium:
			st.Counts.Medium++
		case policyv1alpha1.SeverityLow:
			st.Counts.Low++
		default:
			st.Counts.Unknown++
		}
	}
	sort.SliceStable(findings, func(a, b int) bool {
		ra, rb := Rank(findings[a].Severity), Rank(findings[b].Severity)
		if ra != rb {
			return ra > rb
		}
		if findings[a].DisplayID() != findings[b].DisplayID() {
			return findings[a].DisplayID() < findings[b].DisplayID()
		}
		return findings[a].Package < findings[b].Package
	})
	if len(findings) > policyv1alpha1.MaxImageScanFindings {
		findings = findings[:policyv1alpha1.MaxImageScanFindings]
	}
	st.Findings = nil
	for _, f := range findings {
		sev := f.Severity
		if Rank(sev) == 0 {
			sev = policyv1alpha1.SeverityUnknown
		}
		st.Findings = append(st.Findings, policyv1alpha1.ImageFinding{
			ID: kit.Truncate(f.DisplayID(), 64), Package: kit.Truncate(f.Package, 128),
			Installed: kit.Truncate(f.Installed, 64), Fixed: kit.Truncate(f.Fixed, 64), Severity: sev,
		})
	}
	total := st.Counts.Critical + st.Counts.High + st.Counts.Medium + st.Counts.Low + st.Counts.Unknown
	msg := fmt.Sprintf("%d packages, %d findings (%d critical, %d high)", res.Packages, total, st.Counts.Critical, st.Counts.High)
	kit.ConditionsOf(&st.Conditions, 0).True(policyv1alpha1.ImageScanConditionScanned, policyv1alpha1.ImageScanReasonSucceeded, msg)
}

// Scanned says whether the ImageScan holds findings (possibly from an earlier scan
// when the latest failed).
func Scanned(sc *policyv1alpha1.ImageScan) bool {
	return sc != nil && sc.Status.ScannedAt != nil && meta.FindStatusCondition(sc.Status.Conditions, policyv1alpha1.ImageScanConditionScanned) != nil
}
