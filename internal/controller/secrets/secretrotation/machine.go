package secretrotation

import (
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/log"

	secretsv1alpha1 "orderly.dev/orderly/api/secrets/v1alpha1"
	"orderly.dev/orderly/internal/kit"
	"orderly.dev/orderly/internal/labels"
)

// Triggers: what started a rotation.
const (
	TriggerInitial       = "Initial"
	TriggerInterval      = "Interval"
	TriggerSchedule      = "Schedule"
	TriggerRotateNow     = "RotateNow"
	TriggerManualChange  = "ManualChange"
	TriggerContentChange = "ContentChange"
	// TriggerAdopted: a manual change adopted (onManualChange: Adopt).
	TriggerAdopted = "Adopted"
)

// Keys and annotation of the rotation's own Secret (<name>-rotation), which keeps the
// value being installed and the previous one, for rollback, while a rotation is in
// flight. It is owned by the SecretRotation and emptied when the rotation ends.
const (
	prefixPrevious = "previous."
	prefixNext     = "next."
	// rotationAnnotation says which rotation (its number) the Secret's values are
	// for: the previous value is captured once per rotation, so a Generating phase
	// run again after a crash never takes the new value for the previous one.
	rotationAnnotation = "secrets.orderly.dev/rotation"
)

// maxSteps bounds the phases one reconcile advances through.
const maxSteps = 16

// machine runs one reconcile of one SecretRotation's state machine. st is the status
// being computed; each phase transition is written before the next phase's work.
type machine struct {
	r   *Reconciler
	sr  *secretsv1alpha1.SecretRotation
	st  *secretsv1alpha1.SecretRotationStatus
	now time.Time
	w   when

	target, staging *corev1.Secret
	// problem, when set, makes Ready False with its reason and message.
	problem *problem
}

type problem struct{ reason, message string }

func (m *machine) key() client.ObjectKey { return client.ObjectKeyFromObject(m.sr) }

func (m *machine) spec() *secretsv1alpha1.SecretRotationSpec { return &m.sr.Spec }

func (m *machine) stagingName() string { return m.sr.Name + "-rotation" }

func (m *machine) annotation() string { return secretsv1alpha1.VersionAnnotationPrefix + m.sr.Name }

// run advances the rotation phase by phase, writing the status after each step that
// changed it, until it has to wait.
func (m *machine) run(ctx context.Context) (ctrl.Result, error) {
	m.st = m.sr.Status.DeepCopy()
	m.st.ObservedGeneration = m.sr.Generation
	w, p := validate(m.sr, m.r.MinInterval, m.r.Namespace)
	if p != nil {
		m.problem = p
		return ctrl.Result{}, m.persist(ctx)
	}
	m.w = w
	generation := m.sr.Generation
	for range maxSteps {
		if err := m.read(ctx); err != nil {
			m.problem = &problem{ReasonReadFailed, err.Error()}
			_ = m.persist(ctx)
			return ctrl.Result{}, err
		}
		before := m.st.DeepCopy()
		wait, err := m.step(ctx)
		if perr := m.persist(ctx); perr != nil {
			return ctrl.Result{}, perr
		}
		if err != nil {
			return ctrl.Result{}, err
		}
		if m.sr.Generation != generation {
			// The spec changed under this reconcile; the reconcile it triggers goes on.
			return ctrl.Result{}, nil
		}
		if wait > 0 || equality.Semantic.DeepEqual(before, m.st) {
			if wait <= 0 {
				wait = m.r.Poll
			}
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	return ctrl.Result{RequeueAfter: time.Second}, nil
}

// read reads the Secret and the rotation's own Secret from the API server.
func (m *machine) read(ctx context.Context) error {
	var err error
	if m.target, err = m.r.getSecret(ctx, m.sr.Namespace, m.spec().SecretName); err != nil {
		return err
	}
	m.staging, err = m.r.getSecret(ctx, m.sr.Namespace, m.stagingName())
	return err
}

// persist writes the computed status (with its conditions) when it changed.
func (m *machine) persist(ctx context.Context) error {
	setConditions(m.st, m.sr.Generation, m.problem, m.sr.Spec.SecretName, m.now)
	desired := m.st.DeepCopy()
	err := kit.PatchStatus(ctx, m.r.Client, m.r.APIReader, m.sr, func(latest *secretsv1alpha1.SecretRotation) {
		latest.Status = *desired.DeepCopy()
	})
	if err != nil {
		return err
	}
	return nil
}

// step does the work of the current phase and moves to the next one when it is
// done; it returns how long to wait when it cannot go on now.
func (m *machine) step(ctx context.Context) (time.Duration, error) {
	switch m.st.Phase {
	case "", secretsv1alpha1.PhaseDone, secretsv1alpha1.PhaseRolledBack:
		return m.idle(ctx)
	case secretsv1alpha1.PhaseHeld:
		return m.held(), nil
	case secretsv1alpha1.PhaseGenerating:
		return 0, m.generating(ctx)
	case secretsv1alpha1.PhaseApplying:
		return 0, m.applying(ctx)
	case secretsv1alpha1.PhaseRolling:
		return m.rolling(ctx)
	case secretsv1alpha1.PhaseVerifying:
		return 0, m.verifying(ctx)
	case secretsv1alpha1.PhaseGracePeriod:
		grace := 10 * time.Minute
		if g := m.spec().GracePeriod; g != nil {
			grace = g.Duration
		}
		end := m.st.Rotation.PhaseSince.Add(grace)
		if m.now.Before(end) {
			return end.Sub(m.now), nil
		}
		m.setPhase(secretsv1alpha1.PhaseRevoking)
		return 0, nil
	case secretsv1alpha1.PhaseRevoking:
		return 0, m.revoking(ctx)
	}
	return 0, fmt.Errorf("unknown phase %q", m.st.Phase)
}

func (m *machine) setPhase(p secretsv1alpha1.Phase) {
	m.st.Phase = p
	if m.st.Rotation != nil {
		m.st.Rotation.PhaseSince = metav1.NewTime(m.now)
	}
}

func (m *machine) event(typ, reason, note string, args ...any) {
	m.r.Recorder.Eventf(m.sr, nil, typ, reason, "Rotate", note, args...)
}

// idle: no rotation in flight. It checks the Secret (owned? changed by someone
// else?) and starts a rotation when one is due.
func (m *machine) idle(ctx context.Context) (time.Duration, error) {
	if len(m.stagingData()) > 0 && m.ownsStaging() {
		// The previous value is kept only while a rotation is in flight.
		if err := m.writeStaging(ctx, nil, ""); err != nil {
			return 0, err
		}
	}
	spec := m.spec()
	external := spec.Generator.External != nil
	if m.target == nil {
		if external {
			m.problem = &problem{ReasonSecretMissing, fmt.Sprintf("Secret %s does not exist yet; it is written by someone else (generator external)", spec.SecretName)}
			return m.r.Poll, nil
		}
		m.start(TriggerInitial)
		return 0, nil
	}
	v := Version(string(m.sr.UID), m.target.Data)
	if m.st.SecretUID != string(m.target.UID) {
		if !external && !spec.Adopt {
			m.problem = &problem{ReasonSecretNotOwned, fmt.Sprintf("Secret %s exists and was not created by Orderly for this SecretRotation: it is left alone; set spec.adopt: true to let Orderly take it over and overwrite it", spec.SecretName)}
			return m.r.Poll, nil
		}
		m.st.SecretUID = string(m.target.UID)
		if !external || m.st.CurrentVersion == "" {
			// Taken over: what it holds now is the current version, and consumers run
			// it. (An external Secret deleted and made again is compared as usual.)
			m.st.CurrentVersion = v
		}
	}
	if m.st.CurrentVersion == "" {
		m.st.CurrentVersion = v
	}
	if v != m.st.CurrentVersion {
		if external {
			m.startContentChange(v, TriggerContentChange)
			return 0, nil
		}
		switch spec.OnManualChange {
		case secretsv1alpha1.ManualChangeAdopt:
			m.event(corev1.EventTypeNormal, ReasonManualChange, "Secret %s was changed outside Orderly (version %s, expected %s): adopted, consumers roll to it", spec.SecretName, v, m.st.CurrentVersion)
			m.startContentChange(v, TriggerAdopted)
			return 0, nil
		case secretsv1alpha1.ManualChangeRotate:
			m.event(corev1.EventTypeWarning, ReasonManualChange, "Secret %s was changed outside Orderly (version %s, expected %s): rotating", spec.SecretName, v, m.st.CurrentVersion)
			m.start(TriggerManualChange)
			return 0, nil
		}
		if !hasManualChange(m.sr.Status) {
			m.event(corev1.EventTypeWarning, ReasonManualChange, "Secret %s was changed outside Orderly (version %s, expected %s); onManualChange is Report: nothing done", spec.SecretName, v, m.st.CurrentVersion)
		}
		m.st.ManualVersion = v
	} else {
		m.st.ManualVersion = ""
	}
	if spec.RotateNow != "" && spec.RotateNow != m.st.ObservedRotateNow {
		if external {
			// Nothing to generate: consumers already run what the Secret holds.
			m.st.ObservedRotateNow = spec.RotateNow
			return m.r.Poll, nil
		}
		m.start(TriggerRotateNow)
		return 0, nil
	}
	if external {
		m.st.NextRotationTime = nil
		return m.r.Poll, nil
	}
	var last time.Time
	if m.st.LastRotationTime != nil {
		last = m.st.LastRotationTime.Time
	}
	due, next := m.w.due(last, m.sr.CreationTimestamp.Time, m.now)
	if next.IsZero() {
		m.st.NextRotationTime = nil
		return m.r.Poll, nil
	}
	m.st.NextRotationTime = &metav1.Time{Time: next}
	if due {
		trigger, from := TriggerSchedule, last
		if from.IsZero() {
			from = m.sr.CreationTimestamp.Time
		}
		if m.w.interval > 0 && !m.now.Before(from.Add(m.w.interval)) {
			trigger = TriggerInterval
		}
		m.start(trigger)
		return 0, nil
	}
	return min(m.r.Poll, next.Sub(m.now)), nil
}

func hasManualChange(st secretsv1alpha1.SecretRotationStatus) bool { return st.ManualVersion != "" }

// start begins a rotation that generates a new value.
func (m *machine) start(trigger string) {
	m.begin(trigger)
	m.setPhase(secretsv1alpha1.PhaseGenerating)
	m.event(corev1.EventTypeNormal, ReasonRotationStarted, "Rotation %d started (%s)", m.st.Rotation.Number, trigger)
}

// startContentChange begins a rotation to content someone else wrote: consumers
// are rolled to it, nothing is generated or revoked.
func (m *machine) startContentChange(v, trigger string) {
	m.begin(trigger)
	m.st.Rotation.ToVersion = v
	m.st.CurrentVersion = v
	m.st.ManualVersion = ""
	m.st.SecretUID = string(m.target.UID)
	m.setPhase(secretsv1alpha1.PhaseRolling)
	m.event(corev1.EventTypeNormal, ReasonRotationStarted, "Secret %s changed to version %s: rolling its consumers (rotation %d, %s)", m.spec().SecretName, v, m.st.Rotation.Number, trigger)
}

func (m *machine) begin(trigger string) {
	n := int64(1)
	if m.st.Rotation != nil {
		n = m.st.Rotation.Number + 1
	}
	m.st.Rotation = &secretsv1alpha1.Rotation{Number: n, Trigger: trigger, StartedAt: metav1.NewTime(m.now),
		FromVersion: m.st.CurrentVersion, FromRole: m.st.ActiveRole}
	m.st.LastRotationTime = &metav1.Time{Time: m.now}
	m.st.ObservedRotateNow = m.spec().RotateNow
	m.st.Consumers = nil
}

// held: a rotation stopped by its health gate. A new rotateNow token resumes it:
// the failed consumers get a new timeout.
func (m *machine) held() time.Duration {
	spec := m.spec()
	if spec.RotateNow == "" || spec.RotateNow == m.st.ObservedRotateNow {
		return m.r.Poll
	}
	m.st.ObservedRotateNow = spec.RotateNow
	for i := range m.st.Consumers {
		if c := &m.st.Consumers[i]; c.State == secretsv1alpha1.ConsumerFailed {
			c.State, c.StartedAt, c.Message = secretsv1alpha1.ConsumerRolling, &metav1.Time{Time: m.now}, ""
		}
	}
	m.setPhase(secretsv1alpha1.PhaseRolling)
	m.event(corev1.EventTypeNormal, ReasonResumed, "Rotation %d resumed (rotateNow changed)", m.st.Rotation.Number)
	return 0
}

// ownsStaging says whether the rotation's own Secret is this SecretRotation's.
func (m *machine) ownsStaging() bool {
	return m.staging != nil && metav1.IsControlledBy(m.staging, m.sr)
}

func (m *machine) stagingData() map[string][]byte {
	if m.staging == nil {
		return nil
	}
	return m.staging.Data
}

// stagingFor returns the values kept under prefix for the current rotation; nil
// when the rotation's own Secret holds another rotation's values.
func (m *machine) stagingFor(prefix string) map[string][]byte {
	if !m.ownsStaging() || m.staging.Annotations[rotationAnnotation] != strconv.FormatInt(m.st.Rotation.Number, 10) {
		return nil
	}
	out := map[string][]byte{}
	for k, v := range m.staging.Data {
		if rest, ok := strings.CutPrefix(k, prefix); ok {
			out[rest] = v
		}
	}
	return out
}

// writeStaging writes data to the rotation's own Secret, creating it owned by the
// SecretRotation; a Secret of that name that is not the SecretRotation's is not
// touched.
func (m *machine) writeStaging(ctx context.Context, data map[string][]byte, rotation string) error {
	if m.staging == nil {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: m.stagingName(), Namespace: m.sr.Namespace,
			Labels:      map[string]string{labels.ManagedBy: labels.ManagedByValue, secretsv1alpha1.SecretRotationLabel: m.sr.Name},
			Annotations: map[string]string{rotationAnnotation: rotation}}, Type: corev1.SecretTypeOpaque, Data: data}
		if err := controllerutil.SetControllerReference(m.sr, s, m.r.Scheme()); err != nil {
			return err
		}
		if err := m.r.Create(ctx, s, client.FieldOwner(labels.FieldManager)); err != nil {
			return fmt.Errorf("creating Secret %s: %w", s.Name, err)
		}
		m.staging = s
		return nil
	}
	if !m.ownsStaging() {
		m.problem = &problem{ReasonStagingConflict, fmt.Sprintf("Secret %s exists and is not this SecretRotation's: Orderly keeps the previous value there during a rotation; rename or delete it", m.stagingName())}
		return fmt.Errorf("secret %s is not this SecretRotation's", m.stagingName())
	}
	s := m.staging.DeepCopy()
	s.Data = data
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[rotationAnnotation] = rotation
	if err := m.r.Update(ctx, s, client.FieldOwner(labels.FieldManager)); err != nil {
		return fmt.Errorf("updating Secret %s: %w", s.Name, err)
	}
	m.staging = s
	return nil
}

func prefixed(prefix string, data map[string][]byte, into map[string][]byte) {
	for k, v := range data {
		into[prefix+k] = v
	}
}

// generating makes the new value and keeps it, with the previous one (captured once
// per rotation), in the rotation's own Secret.
func (m *machine) generating(ctx context.Context) error {
	n := strconv.FormatInt(m.st.Rotation.Number, 10)
	previous := m.stagingFor(prefixPrevious)
	if previous == nil && m.target != nil {
		previous = m.target.Data
	}
	next, err := m.generate(ctx)
	if err != nil {
		return err
	}
	data := map[string][]byte{}
	prefixed(prefixPrevious, previous, data)
	prefixed(prefixNext, next, data)
	if err := m.writeStaging(ctx, data, n); err != nil {
		return err
	}
	m.setPhase(secretsv1alpha1.PhaseApplying)
	return nil
}

// generate returns the next value; postgresRole sets it on the inactive role first.
func (m *machine) generate(ctx context.Context) (map[string][]byte, error) {
	if m.spec().Generator.PostgresRole != nil {
		return m.r.generatePostgres(ctx, m)
	}
	return generate(m.spec().Generator)
}

// applying writes the new value to the Secret.
func (m *machine) applying(ctx context.Context) error {
	next := m.stagingFor(prefixNext)
	if len(next) == 0 {
		// The rotation's own Secret lost its values (edited, deleted): make new ones.
		m.setPhase(secretsv1alpha1.PhaseGenerating)
		return nil
	}
	spec := m.spec()
	if m.target == nil {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: spec.SecretName, Namespace: m.sr.Namespace,
			Labels: map[string]string{labels.ManagedBy: labels.ManagedByValue, secretsv1alpha1.SecretRotationLabel: m.sr.Name}},
			Type: corev1.SecretTypeOpaque, Data: next}
		if err := m.r.Create(ctx, s, client.FieldOwner(labels.FieldManager)); err != nil {
			return fmt.Errorf("creating Secret %s: %w", s.Name, err)
		}
		m.target = s
	} else {
		// The Secret is ours (status.secretUID), adopted, or holds the value this
		// rotation generated (written just before a crash lost the status write).
		ours := m.st.SecretUID == string(m.target.UID) || spec.Adopt || containsAll(m.target.Data, next)
		if !ours {
			m.problem = &problem{ReasonSecretNotOwned, fmt.Sprintf("Secret %s was created by someone else during the rotation: it is left alone; set spec.adopt: true to let Orderly overwrite it", spec.SecretName)}
			return fmt.Errorf("secret %s is not Orderly's", spec.SecretName)
		}
		if !containsAll(m.target.Data, next) {
			s := m.target.DeepCopy()
			if s.Data == nil {
				s.Data = map[string][]byte{}
			}
			maps.Copy(s.Data, next)
			if err := m.r.Update(ctx, s, client.FieldOwner(labels.FieldManager)); err != nil {
				return fmt.Errorf("updating Secret %s: %w", s.Name, err)
			}
			m.target = s
		}
	}
	v := Version(string(m.sr.UID), m.target.Data)
	m.st.SecretUID, m.st.CurrentVersion, m.st.Rotation.ToVersion = string(m.target.UID), v, v
	m.st.ManualVersion = ""
	if m.st.Rotation.ToRole != "" {
		m.st.ActiveRole = m.st.Rotation.ToRole
	}
	m.setPhase(secretsv1alpha1.PhaseRolling)
	m.event(corev1.EventTypeNormal, ReasonSecretUpdated, "Secret %s now holds version %s", spec.SecretName, v)
	return nil
}

func containsAll(have, want map[string][]byte) bool {
	for k, v := range want {
		if string(have[k]) != string(v) {
			return false
		}
	}
	return true
}

// rolling restarts the consumers that do not run the new version yet,
// maxUnavailableConsumers at a time, and waits for each rollout to complete.
func (m *machine) rolling(ctx context.Context) (time.Duration, error) {
	rot := m.st.Rotation
	if !rot.Discovered {
		all, err := m.r.listWorkloads(ctx, m.sr.Namespace)
		if err != nil {
			return 0, err
		}
		chosen, missing := selectConsumers(all, m.spec().SecretName, m.spec().Consumers)
		if len(chosen) > maxConsumers {
			m.event(corev1.EventTypeWarning, ReasonTooManyConsumers, "%d consumers found; only the first %d are tracked in status and rolled", len(chosen), maxConsumers)
			chosen = chosen[:maxConsumers]
		}
		m.st.Consumers = make([]secretsv1alpha1.ConsumerStatus, 0, len(chosen))
		for _, w := range chosen {
			m.st.Consumers = append(m.st.Consumers, secretsv1alpha1.ConsumerStatus{Kind: w.ref.Kind, Name: w.ref.Name, State: secretsv1alpha1.ConsumerPending})
		}
		if len(missing) > 0 {
			names := make([]string, 0, len(missing))
			for _, t := range missing {
				names = append(names, string(t.Kind)+"/"+t.Name)
			}
			m.event(corev1.EventTypeWarning, ReasonTargetMissing, "Targets not found, not rolled: %s", kit.FirstN(names, 5))
		}
		rot.Discovered = true
		return 0, nil
	}
	to, ann := rot.ToVersion, m.annotation()
	timeout := 10 * time.Minute
	if t := m.spec().HealthGate.Timeout; t != nil {
		timeout = t.Duration
	}
	wait := rollingPoll
	rollingNow := 0
	workloads := make([]*workload, len(m.st.Consumers))
	// First the consumers already on the new version: done, rolling, or failed.
	for i := range m.st.Consumers {
		c := &m.st.Consumers[i]
		if c.State == secretsv1alpha1.ConsumerReady {
			continue
		}
		w, err := m.r.getWorkload(ctx, m.sr.Namespace, secretsv1alpha1.ConsumerRef{Kind: c.Kind, Name: c.Name})
		if err != nil {
			return 0, err
		}
		if w == nil {
			c.State, c.Message = secretsv1alpha1.ConsumerReady, "gone"
			continue
		}
		workloads[i] = w
		if w.template.Annotations[ann] != to {
			c.State = secretsv1alpha1.ConsumerPending
			continue
		}
		if c.StartedAt == nil {
			c.StartedAt = &metav1.Time{Time: m.now}
		}
		if ok, msg := kit.RolledOut(w.obj, kit.RolloutComplete); ok {
			c.State, c.Message = secretsv1alpha1.ConsumerReady, ""
			continue
		} else if m.now.Sub(c.StartedAt.Time) >= timeout {
			c.State, c.Message = secretsv1alpha1.ConsumerFailed, kit.Truncate(fmt.Sprintf("rollout did not complete within %s: %s", timeout, msg), 1024)
			continue
		} else {
			c.State, c.Message = secretsv1alpha1.ConsumerRolling, msg
			wait = min(wait, c.StartedAt.Add(timeout).Sub(m.now)+time.Millisecond)
		}
		rollingNow++
	}
	if failed := m.failedConsumers(); len(failed) > 0 {
		return 0, m.fail(ctx, failed)
	}
	// Then the next ones, while fewer than maxUnavailableConsumers roll.
	limit := int(max(m.spec().Consumers.MaxUnavailableConsumers, 1))
	for i := range m.st.Consumers {
		c := &m.st.Consumers[i]
		if c.State != secretsv1alpha1.ConsumerPending || workloads[i] == nil {
			continue
		}
		if rollingNow >= limit {
			break
		}
		if err := m.r.patchWorkload(ctx, *workloads[i], ann, to); err != nil {
			if apierrors.IsConflict(err) {
				return time.Second, nil
			}
			return 0, err
		}
		c.State, c.StartedAt, c.Message = secretsv1alpha1.ConsumerRolling, &metav1.Time{Time: m.now}, ""
		rollingNow++
	}
	for _, c := range m.st.Consumers {
		if c.State != secretsv1alpha1.ConsumerReady {
			return wait, nil
		}
	}
	m.setPhase(secretsv1alpha1.PhaseVerifying)
	return 0, nil
}

// maxConsumers is how many consumers one rotation tracks (status.consumers' MaxItems).
const maxConsumers = 200

func (m *machine) failedConsumers() []string {
	var out []string
	for _, c := range m.st.Consumers {
		if c.State == secretsv1alpha1.ConsumerFailed {
			out = append(out, string(c.Kind)+"/"+c.Name)
		}
	}
	return out
}

// fail applies the health gate's onFailure: Hold stops where it is; Rollback
// restores the previous value and rolls back the consumers that were rolled. The
// previous credential was never revoked (revocation comes after every consumer is
// healthy), so consumers on it keep working.
func (m *machine) fail(ctx context.Context, failed []string) error {
	rot := m.st.Rotation
	what := kit.FirstN(failed, 5)
	if m.spec().HealthGate.OnFailure == secretsv1alpha1.FailureHold {
		rot.Message = fmt.Sprintf("held: %s did not become ready in time; nothing revoked, the previous credential stays valid; change spec.rotateNow to resume", what)
		m.finish(secretsv1alpha1.PhaseHeld)
		m.event(corev1.EventTypeWarning, ReasonHeld, "Rotation %d held: %s did not become ready in time; the previous credential stays valid", rot.Number, what)
		return nil
	}
	previous := m.stagingFor(prefixPrevious)
	if len(previous) > 0 && m.target != nil && Version(string(m.sr.UID), m.target.Data) != Version(string(m.sr.UID), previous) {
		s := m.target.DeepCopy()
		s.Data = previous
		if err := m.r.Update(ctx, s, client.FieldOwner(labels.FieldManager)); err != nil {
			return fmt.Errorf("restoring Secret %s: %w", s.Name, err)
		}
		m.target = s
	}
	back := rot.FromVersion
	if len(previous) > 0 {
		back = Version(string(m.sr.UID), previous)
	}
	ann := m.annotation()
	for i := range m.st.Consumers {
		c := &m.st.Consumers[i]
		if c.State == secretsv1alpha1.ConsumerPending {
			c.State = secretsv1alpha1.ConsumerRolledBack
			continue
		}
		w, err := m.r.getWorkload(ctx, m.sr.Namespace, secretsv1alpha1.ConsumerRef{Kind: c.Kind, Name: c.Name})
		if err != nil {
			return err
		}
		if w != nil && w.template.Annotations[ann] == rot.ToVersion && back != "" {
			if err := m.r.patchWorkload(ctx, *w, ann, back); err != nil {
				return err
			}
		}
		c.State = secretsv1alpha1.ConsumerRolledBack
	}
	if back != "" {
		m.st.CurrentVersion = back
	}
	if rot.FromRole != "" {
		m.st.ActiveRole = rot.FromRole
		// The new role's password is no longer in the Secret: nothing should log in with it.
		if rot.ToRole != "" && rot.ToRole != rot.FromRole {
			if err := m.r.disable(ctx, m, rot.ToRole); err != nil {
				return err
			}
		}
	}
	rot.Message = fmt.Sprintf("rolled back: %s did not become ready in time; the previous value was restored and consumers rolled back to it; the previous credential was never revoked", what)
	m.finish(secretsv1alpha1.PhaseRolledBack)
	m.event(corev1.EventTypeWarning, ReasonRolledBack, "Rotation %d rolled back: %s did not become ready in time; previous value restored", rot.Number, what)
	log.FromContext(ctx).Info("Rolled back SecretRotation", "rotation", rot.Number, "failed", what)
	return nil
}

// verifying checks once more that every consumer runs the new version, Ready.
func (m *machine) verifying(ctx context.Context) error {
	ann, to := m.annotation(), m.st.Rotation.ToVersion
	for i := range m.st.Consumers {
		c := &m.st.Consumers[i]
		w, err := m.r.getWorkload(ctx, m.sr.Namespace, secretsv1alpha1.ConsumerRef{Kind: c.Kind, Name: c.Name})
		if err != nil {
			return err
		}
		if w == nil {
			continue
		}
		ok, msg := kit.RolledOut(w.obj, kit.RolloutComplete)
		if w.template.Annotations[ann] != to || !ok {
			c.State, c.Message = secretsv1alpha1.ConsumerRolling, msg
			if w.template.Annotations[ann] != to {
				c.State = secretsv1alpha1.ConsumerPending
			}
			m.setPhase(secretsv1alpha1.PhaseRolling)
			return nil
		}
	}
	if rolledOnly(m.st.Rotation) || m.st.Rotation.Trigger == TriggerInitial {
		// Content someone else wrote (Orderly made no credential and revokes none), or
		// the first credential: there is no previous one to keep valid for a while.
		m.finishDone()
		return nil
	}
	m.setPhase(secretsv1alpha1.PhaseGracePeriod)
	return nil
}

// rolledOnly says whether a rotation only rolls consumers to content someone else
// wrote (the external generator, an adopted manual change).
func rolledOnly(rot *secretsv1alpha1.Rotation) bool {
	return rot.Trigger == TriggerContentChange || rot.Trigger == TriggerAdopted
}

// revoking revokes the previous credential and forgets the previous value.
func (m *machine) revoking(ctx context.Context) error {
	if err := m.r.revokePostgres(ctx, m); err != nil {
		return err
	}
	if len(m.stagingData()) > 0 && m.ownsStaging() {
		if err := m.writeStaging(ctx, nil, ""); err != nil {
			return err
		}
	}
	m.finishDone()
	return nil
}

// finishDone ends the rotation successfully.
func (m *machine) finishDone() {
	m.st.LastSuccessTime = &metav1.Time{Time: m.now}
	m.st.Rotation.Message = ""
	m.finish(secretsv1alpha1.PhaseDone)
	if rolledOnly(m.st.Rotation) {
		m.event(corev1.EventTypeNormal, ReasonRotated, "Rotation %d done: every consumer rolled to version %s", m.st.Rotation.Number, m.st.CurrentVersion)
		return
	}
	if m.st.Rotation.Trigger == TriggerInitial {
		m.event(corev1.EventTypeNormal, ReasonRotated, "Rotation %d done: the first version %s is written and every consumer rolled to it", m.st.Rotation.Number, m.st.CurrentVersion)
		return
	}
	m.event(corev1.EventTypeNormal, ReasonRotated, "Rotation %d done: version %s, every consumer rolled; the previous credential is revoked", m.st.Rotation.Number, m.st.CurrentVersion)
}

// finish ends the rotation in phase p and records it in the history.
func (m *machine) finish(p secretsv1alpha1.Phase) {
	m.setPhase(p)
	rot := m.st.Rotation
	entry := secretsv1alpha1.HistoryEntry{Number: rot.Number, Trigger: rot.Trigger, Result: p, Version: rot.ToVersion,
		StartedAt: rot.StartedAt, FinishedAt: metav1.NewTime(m.now), Message: rot.Message}
	m.st.History = append([]secretsv1alpha1.HistoryEntry{entry}, m.st.History...)
	if len(m.st.History) > maxHistory {
		m.st.History = m.st.History[:maxHistory]
	}
	countRotation(m.key(), p)
}

// maxHistory is how many finished rotations status.history keeps.
const maxHistory = 10
