package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations Orderly puts on what it writes for a SecretRotation.
const (
	// SecretRotationLabel names the SecretRotation a Secret was created for.
	SecretRotationLabel = "secrets.orderly.dev/secretrotation"
	// VersionAnnotationPrefix, followed by the SecretRotation's name, is the
	// pod-template annotation of a consumer: the version (hash) of the Secret its pods
	// were rolled to. Changing it is what restarts the consumer, and Orderly changes
	// it only when it differs from the Secret's current version.
	VersionAnnotationPrefix = "secrets.orderly.dev/"
)

// Phase is where a SecretRotation's current rotation stands.
// +kubebuilder:validation:Enum=Generating;Applying;Rolling;Verifying;GracePeriod;Revoking;Done;RolledBack;Held
type Phase string

// The phases of a rotation, in order; Done, RolledBack and Held end one.
const (
	// PhaseGenerating: the new value is made (and, for postgresRole, set on the
	// inactive role) and kept in the rotation's own Secret.
	PhaseGenerating Phase = "Generating"
	// PhaseApplying: the new value is written to spec.secretName.
	PhaseApplying Phase = "Applying"
	// PhaseRolling: consumers are restarted, maxUnavailableConsumers at a time.
	PhaseRolling Phase = "Rolling"
	// PhaseVerifying: every consumer runs the new version with its pods Ready.
	PhaseVerifying Phase = "Verifying"
	// PhaseGracePeriod: the previous credential stays valid for spec.gracePeriod.
	PhaseGracePeriod Phase = "GracePeriod"
	// PhaseRevoking: the previous credential is revoked (NOLOGIN for postgresRole)
	// and the copy kept for rollback is removed.
	PhaseRevoking Phase = "Revoking"
	// PhaseDone: the rotation finished.
	PhaseDone Phase = "Done"
	// PhaseRolledBack: a consumer failed the health gate; the previous value was
	// restored, consumers were rolled back to it, and the previous credential stays valid.
	PhaseRolledBack Phase = "RolledBack"
	// PhaseHeld: a consumer failed the health gate with onFailure: Hold; nothing is
	// revoked and nothing more is rolled until spec.rotateNow changes.
	PhaseHeld Phase = "Held"
)

// Generator makes the Secret's value. Exactly one is set.
// +kubebuilder:validation:XValidation:rule="[has(self.password), has(self.apiKey), has(self.postgresRole), has(self.external)].filter(x, x).size() == 1",message="set exactly one generator: password, apiKey, postgresRole or external"
// +kubebuilder:validation:MinProperties=1
type Generator struct {
	// password generates a random password.
	// +optional
	Password *PasswordGenerator `json:"password,omitempty"`
	// apiKey generates a prefix followed by random characters.
	// +optional
	APIKey *APIKeyGenerator `json:"apiKey,omitempty"`
	// postgresRole rotates a login role on a DatabaseServer with two alternating
	// roles (<role>_a and <role>_b) that have the same grants.
	// +optional
	PostgresRole *PostgresRoleGenerator `json:"postgresRole,omitempty"`
	// external: someone else writes the Secret (External Secrets Operator,
	// cert-manager, a person); Orderly rolls consumers when its content changes.
	// +optional
	External *ExternalGenerator `json:"external,omitempty"`
}

// PasswordGenerator generates a random password from the chosen character classes.
// +kubebuilder:validation:XValidation:rule="(has(self.lowercase) && self.lowercase) || (has(self.uppercase) && self.uppercase) || (has(self.digits) && self.digits) || (has(self.symbols) && self.symbols)",message="enable at least one character class"
type PasswordGenerator struct {
	// key is the Secret key the password is written to.
	// +optional
	// +kubebuilder:default=password
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
	// length of the password.
	// +optional
	// +kubebuilder:default=32
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=256
	Length int32 `json:"length,omitempty"`
	// lowercase letters a-z.
	// +optional
	// +kubebuilder:default=true
	Lowercase *bool `json:"lowercase,omitempty"`
	// uppercase letters A-Z.
	// +optional
	// +kubebuilder:default=true
	Uppercase *bool `json:"uppercase,omitempty"`
	// digits 0-9.
	// +optional
	// +kubebuilder:default=true
	Digits *bool `json:"digits,omitempty"`
	// symbols from !#%+,-.:=@^_~ (none that needs quoting in a shell or a URI's
	// userinfo).
	// +optional
	// +kubebuilder:default=false
	Symbols *bool `json:"symbols,omitempty"`
}

// APIKeyGenerator generates an API key: a fixed prefix followed by random
// characters (base62).
type APIKeyGenerator struct {
	// key is the Secret key the API key is written to.
	// +optional
	// +kubebuilder:default=apiKey
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key,omitempty"`
	// prefix of every key, e.g. "sk_live_", so that leaked keys can be recognised.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[-_a-zA-Z0-9]*$`
	Prefix string `json:"prefix,omitempty"`
	// length of the random part.
	// +optional
	// +kubebuilder:default=40
	// +kubebuilder:validation:Minimum=16
	// +kubebuilder:validation:Maximum=256
	Length int32 `json:"length,omitempty"`
}

// PostgresRoleGenerator rotates a login role on a DatabaseServer.
type PostgresRoleGenerator struct {
	// serverRef is the name of the DatabaseServer; its allowedNamespaces must select
	// this namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ServerRef string `json:"serverRef"`
	// role is the base name: Orderly alternates between <role>_a and <role>_b.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=40
	// +kubebuilder:validation:Pattern=`^[a-z][a-z0-9_]*$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="role cannot be changed: create a new SecretRotation"
	Role string `json:"role"`
	// grantRoles are roles both login roles are members of: the grants they share.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[a-z][a-z0-9_]*$`
	GrantRoles []string `json:"grantRoles,omitempty"`
}

// ExternalGenerator marks a Secret written by someone else.
type ExternalGenerator struct{}

// Schedule is a cron schedule in a time zone.
type Schedule struct {
	// cron is a five-field cron expression (minute hour day-of-month month
	// day-of-week) with *, lists, ranges, steps and the names of months and days
	// (jan, mon-fri); day-of-week 7 is Sunday, like 0.
	// +required
	// +kubebuilder:validation:MinLength=9
	// +kubebuilder:validation:MaxLength=128
	Cron string `json:"cron"`
	// timeZone is an IANA time zone name; UTC when unset.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	TimeZone string `json:"timeZone,omitempty"`
}

// ConsumerKind is a kind of workload that can consume a Secret.
// +kubebuilder:validation:Enum=Deployment;StatefulSet;DaemonSet
type ConsumerKind string

// The consumer kinds.
const (
	KindDeployment  ConsumerKind = "Deployment"
	KindStatefulSet ConsumerKind = "StatefulSet"
	KindDaemonSet   ConsumerKind = "DaemonSet"
)

// ConsumerRef names a workload in the SecretRotation's namespace.
type ConsumerRef struct {
	// kind of the workload.
	// +required
	Kind ConsumerKind `json:"kind"`
	// name of the workload.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Consumers says which workloads are rolled when the Secret changes.
type Consumers struct {
	// discover finds the Deployments, StatefulSets and DaemonSets of the namespace
	// whose pod template references the Secret (env, envFrom, volumes, projected
	// volumes).
	// +optional
	// +kubebuilder:default=true
	Discover *bool `json:"discover,omitempty"`
	// targets are rolled besides those discovered (e.g. a workload that reads the
	// Secret through the API).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Targets []ConsumerRef `json:"targets,omitempty"`
	// exclude are never rolled.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=64
	Exclude []ConsumerRef `json:"exclude,omitempty"`
	// maxUnavailableConsumers is how many consumers roll at once.
	// +optional
	// +kubebuilder:default=1
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxUnavailableConsumers int32 `json:"maxUnavailableConsumers,omitempty"`
}

// FailurePolicy says what a failed health gate does.
// +kubebuilder:validation:Enum=Rollback;Hold
type FailurePolicy string

// The failure policies.
const (
	// FailureRollback restores the previous value and rolls consumers back to it.
	FailureRollback FailurePolicy = "Rollback"
	// FailureHold stops the rotation where it is: nothing more is rolled and nothing
	// is revoked, for a person to look at.
	FailureHold FailurePolicy = "Hold"
)

// HealthGate is what a consumer's rollout must achieve.
type HealthGate struct {
	// timeout for each consumer's rollout to complete with all its pods Ready.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s') && duration(self) <= duration('24h')",message="timeout must be between 10s and 24h"
	Timeout *metav1.Duration `json:"timeout,omitempty"`
	// onFailure: Rollback (the default) or Hold.
	// +optional
	// +kubebuilder:default=Rollback
	OnFailure FailurePolicy `json:"onFailure,omitempty"`
}

// ManualChangePolicy says what a Secret changed by someone else does.
// +kubebuilder:validation:Enum=Adopt;Rotate;Report
type ManualChangePolicy string

// The manual-change policies.
const (
	// ManualChangeAdopt takes the new content as the current version and rolls
	// consumers to it.
	ManualChangeAdopt ManualChangePolicy = "Adopt"
	// ManualChangeRotate starts a rotation at once, replacing the content.
	ManualChangeRotate ManualChangePolicy = "Rotate"
	// ManualChangeReport only reports it (condition ManualChange, an Event).
	ManualChangeReport ManualChangePolicy = "Report"
)

// SecretRotationSpec says which Secret to rotate, when, how, and which workloads
// use it.
// +kubebuilder:validation:XValidation:rule="has(self.generator.external) || has(self.interval) || has(self.schedule) || has(self.rotateNow)",message="set interval, schedule or rotateNow (or use the external generator)"
// +kubebuilder:validation:XValidation:rule="!has(self.generator.external) || (!has(self.interval) && !has(self.schedule))",message="the external generator rotates when the Secret's content changes: interval and schedule do not apply"
// +kubebuilder:validation:XValidation:rule="has(self.generator.external) == has(oldSelf.generator.external)",message="a SecretRotation cannot switch to or from the external generator: create a new one"
type SecretRotationSpec struct {
	// secretName is the Secret in this namespace that holds the credential. Orderly
	// creates it when missing and never overwrites one it did not create unless
	// adopt is true.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="secretName cannot be changed: create a new SecretRotation"
	SecretName string `json:"secretName"`
	// adopt lets Orderly take over (and overwrite) an existing Secret it did not create.
	// +optional
	Adopt bool `json:"adopt,omitempty"`
	// interval between rotations. At least 1h unless the manager's
	// --secretrotation-min-interval allows less (a shorter one is reported as the
	// condition Ready=False, reason InvalidSpec).
	// +optional
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s')",message="interval must be at least 1s (and at least the manager's --secretrotation-min-interval, 1h by default)"
	Interval *metav1.Duration `json:"interval,omitempty"`
	// schedule rotates at the times of a cron expression. With interval too, a
	// rotation happens at whichever comes first. Rotations missed while the manager
	// was down are caught up once, not once per missed time.
	// +optional
	Schedule *Schedule `json:"schedule,omitempty"`
	// rotateNow is a token: changing it to a new value rotates once
	// (`orderly rotate now NAME` sets it to the current time). It also releases a
	// Held rotation.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	RotateNow string `json:"rotateNow,omitempty"`
	// generator makes the new value.
	// +required
	Generator Generator `json:"generator"`
	// consumers are the workloads rolled after the Secret changes.
	// +optional
	// +kubebuilder:default={}
	Consumers Consumers `json:"consumers,omitempty"`
	// gracePeriod is how long the previous credential stays valid after every
	// consumer has rolled.
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('0s') && duration(self) <= duration('720h')",message="gracePeriod must be between 0s and 720h"
	GracePeriod *metav1.Duration `json:"gracePeriod,omitempty"`
	// healthGate is what each consumer's rollout must achieve, and what happens
	// when it does not.
	// +optional
	// +kubebuilder:default={}
	HealthGate HealthGate `json:"healthGate,omitempty"`
	// onManualChange decides what a Secret changed by someone else does.
	// +optional
	// +kubebuilder:default=Report
	OnManualChange ManualChangePolicy `json:"onManualChange,omitempty"`
}

// ConsumerState is where one consumer stands in the current rotation.
// +kubebuilder:validation:Enum=Pending;Rolling;Ready;Failed;RolledBack
type ConsumerState string

// The consumer states.
const (
	ConsumerPending    ConsumerState = "Pending"
	ConsumerRolling    ConsumerState = "Rolling"
	ConsumerReady      ConsumerState = "Ready"
	ConsumerFailed     ConsumerState = "Failed"
	ConsumerRolledBack ConsumerState = "RolledBack"
)

// ConsumerStatus is one consumer's rollout in the current rotation.
type ConsumerStatus struct {
	// kind of the workload.
	// +required
	Kind ConsumerKind `json:"kind"`
	// name of the workload.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// state of its rollout.
	// +required
	State ConsumerState `json:"state"`
	// startedAt is when its rollout to the new version started.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// message says why it failed or waits.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// Rotation is the persisted state of the rotation in flight (or the last one).
type Rotation struct {
	// number counts the SecretRotation's rotations, from 1.
	// +required
	Number int64 `json:"number"`
	// trigger says what started it: Initial, Interval, Schedule, RotateNow,
	// ManualChange (onManualChange: Rotate), Adopted (onManualChange: Adopt) or
	// ContentChange (external).
	// +required
	// +kubebuilder:validation:MaxLength=32
	Trigger string `json:"trigger"`
	// startedAt is when it started.
	// +required
	StartedAt metav1.Time `json:"startedAt"`
	// phaseSince is when it entered its current phase.
	// +required
	PhaseSince metav1.Time `json:"phaseSince"`
	// fromVersion is the version it replaces (empty when the Secret was created).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	FromVersion string `json:"fromVersion,omitempty"`
	// toVersion is the version it installs.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ToVersion string `json:"toVersion,omitempty"`
	// fromRole and toRole are the postgresRole login roles it switches between.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	FromRole string `json:"fromRole,omitempty"`
	// toRole is the login role the new credential is for (postgresRole).
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ToRole string `json:"toRole,omitempty"`
	// discovered is true once the consumers of this rotation were found (and listed
	// in status.consumers): they are found once per rotation.
	// +optional
	Discovered bool `json:"discovered,omitempty"`
	// message says why it ended as it did.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// HistoryEntry is one finished rotation.
type HistoryEntry struct {
	// number of the rotation.
	// +required
	Number int64 `json:"number"`
	// trigger that started it.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Trigger string `json:"trigger"`
	// result: Done, RolledBack or Held.
	// +required
	Result Phase `json:"result"`
	// version it installed (a hash, never the value).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Version string `json:"version,omitempty"`
	// startedAt is when it started.
	// +required
	StartedAt metav1.Time `json:"startedAt"`
	// finishedAt is when it ended.
	// +required
	FinishedAt metav1.Time `json:"finishedAt"`
	// message says why it ended as it did.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
}

// SecretRotationStatus is what Orderly observed and did.
type SecretRotationStatus struct {
	// observedGeneration is the generation this status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// secretUID is the UID of the Secret Orderly created or adopted: a Secret of the
	// same name with another UID is not overwritten.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SecretUID string `json:"secretUID,omitempty"`
	// currentVersion is a hash of the Secret's content as Orderly last wrote or
	// accepted it (never the value).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	CurrentVersion string `json:"currentVersion,omitempty"`
	// manualVersion is the version of content someone else wrote to the Secret,
	// reported (onManualChange: Report) and not acted on; empty when there is none.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ManualVersion string `json:"manualVersion,omitempty"`
	// activeRole is the postgresRole login role the Secret holds.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	ActiveRole string `json:"activeRole,omitempty"`
	// phase of the current (or last) rotation.
	// +optional
	Phase Phase `json:"phase,omitempty"`
	// rotation is the current (or last) rotation's persisted state.
	// +optional
	Rotation *Rotation `json:"rotation,omitempty"`
	// lastRotationTime is when the last rotation started.
	// +optional
	LastRotationTime *metav1.Time `json:"lastRotationTime,omitempty"`
	// lastSuccessTime is when the last rotation finished Done.
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`
	// nextRotationTime is when the next rotation is due.
	// +optional
	NextRotationTime *metav1.Time `json:"nextRotationTime,omitempty"`
	// observedRotateNow is the spec.rotateNow token last acted on.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ObservedRotateNow string `json:"observedRotateNow,omitempty"`
	// consumers of the current rotation and their rollout state.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=200
	Consumers []ConsumerStatus `json:"consumers,omitempty"`
	// history holds the last rotations, newest first.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=10
	History []HistoryEntry `json:"history,omitempty"`
	// conditions: Ready, Rotating, ManualChange.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SecretRotation rotates a credential on a schedule and rolls the workloads that use
// it, revoking the previous credential only after every consumer has rolled and is
// healthy.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=srot,categories=orderly
// +kubebuilder:validation:XValidation:rule="self.spec.secretName != self.metadata.name + '-rotation'",message="secretName cannot be <name>-rotation: Orderly keeps the previous value in a Secret of that name during a rotation"
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="a SecretRotation's name is at most 63 characters (it names the consumers' pod-template annotation)"
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.secretName`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.currentVersion`
// +kubebuilder:printcolumn:name="Last",type=date,JSONPath=`.status.lastSuccessTime`
// +kubebuilder:printcolumn:name="Next",type=string,JSONPath=`.status.nextRotationTime`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type SecretRotation struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what to rotate and how.
	// +required
	Spec SecretRotationSpec `json:"spec"`
	// status is what Orderly observed and did.
	// +optional
	Status SecretRotationStatus `json:"status,omitempty"`
}

// SecretRotationList is a list of SecretRotations.
// +kubebuilder:object:root=true
type SecretRotationList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the SecretRotations.
	Items []SecretRotation `json:"items"`
}

// Classes says which character classes are on: lowercase, uppercase and digits
// unless turned off, symbols only when turned on.
func (p PasswordGenerator) Classes() (lower, upper, digits, symbols bool) {
	on := func(b *bool, def bool) bool {
		if b == nil {
			return def
		}
		return *b
	}
	return on(p.Lowercase, true), on(p.Uppercase, true), on(p.Digits, true), on(p.Symbols, false)
}

// Discovers says whether consumers are discovered (unless turned off).
func (c Consumers) Discovers() bool { return c.Discover == nil || *c.Discover }
