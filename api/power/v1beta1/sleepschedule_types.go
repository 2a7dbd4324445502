package v1beta1

import (
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations that Orderly writes on the workloads it puts to sleep. They
// live on the workload itself, so neither a restart of Orderly nor deleting and
// recreating the SleepSchedule loses what must be restored.
const (
	// AsleepLabel names the SleepSchedule that put the workload to sleep.
	AsleepLabel = "power.orderly.dev/asleep"
	// SleepStateAnnotation holds, as JSON, what the workload looked like before it
	// was put to sleep (replicas, CronJob suspend, HPA bounds) and what Orderly set.
	SleepStateAnnotation = "power.orderly.dev/sleep-state"
	// LeftAloneAnnotation is set when the workload's owner changed it while it was
	// asleep: Orderly then neither fights the change nor restores it on waking.
	LeftAloneAnnotation = "power.orderly.dev/left-alone"
	// ExcludeAnnotation, set to "true" by a person on a workload, keeps it awake.
	ExcludeAnnotation = "power.orderly.dev/exclude"
)

// Workload kinds a SleepSchedule acts on.
const (
	KindDeployment  = "Deployment"
	KindStatefulSet = "StatefulSet"
	KindCronJob     = "CronJob"
)

// KEDA's ScaledObject, which a SleepSchedule pauses with KEDA's own annotation rather
// than scaling its target against KEDA.
const (
	KEDAGroup            = "keda.sh"
	KEDAScaledObjectKind = "ScaledObject"
	// KEDAPausedReplicasAnnotation, set on a ScaledObject, makes KEDA scale its
	// target to that many replicas and stop autoscaling it.
	KEDAPausedReplicasAnnotation = "autoscaling.keda.sh/paused-replicas"
	// KEDAScaledJobKind is KEDA's ScaledJob, paused with KEDAPausedAnnotation: KEDA
	// starts no new Jobs for it while the annotation is "true".
	KEDAScaledJobKind    = "ScaledJob"
	KEDAPausedAnnotation = "autoscaling.keda.sh/paused"
)

// PatchType says how the fields of a SleepPatch are written.
// +kubebuilder:validation:Enum=JSONPatch;MergePatch
type PatchType string

// Values of PatchType.
const (
	// JSONPatchType writes with a JSON patch (RFC 6902): a path may go through list
	// elements (/spec/shards/0/replicas), and a value replaces what was there whole.
	JSONPatchType PatchType = "JSONPatch"
	// MergePatchType writes with a JSON merge patch (RFC 7386): paths name object
	// fields only, and an object value is merged into what was there.
	MergePatchType PatchType = "MergePatch"
)

// SleepField is one field a SleepPatch sets while asleep.
type SleepField struct {
	// path is a JSON pointer (RFC 6901) under /spec, such as /spec/replicas or
	// /spec/redis/replicas, or one annotation, such as
	// /metadata/annotations/kubeflow-resource-stopped for a kind that stops through an
	// annotation (~1 stands for / and ~0 for ~ in a field name or annotation key:
	// /metadata/annotations/example.com~1paused). The value it holds before sleep is
	// recorded on the object and written back on waking; a field or annotation that
	// was absent is removed again. Orderly's own annotations (*.orderly.dev/) cannot be
	// named.
	// +required
	// +kubebuilder:validation:MinLength=7
	// +kubebuilder:validation:MaxLength=256
	// +kubebuilder:validation:XValidation:rule="self.startsWith('/spec/') || self.startsWith('/metadata/annotations/')",message="path must be a JSON pointer under /spec, such as /spec/replicas, or an annotation, such as /metadata/annotations/kubeflow-resource-stopped"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/metadata/annotations/') || self.matches('^/metadata/annotations/([^/~]|~[01])+$')",message="an annotation path names one annotation: /metadata/annotations/<key>, with / in the key written ~1"
	// +kubebuilder:validation:XValidation:rule="!self.startsWith('/metadata/annotations/') || !self.matches('^/metadata/annotations/([^/]*[.])?orderly[.]dev~1')",message="Orderly's own annotations (*.orderly.dev/) cannot be patched"
	// +kubebuilder:validation:XValidation:rule="self.matches('^(/([^/~]|~[01])+)+$')",message="path must be a JSON pointer (RFC 6901): /-separated non-empty segments, with ~ written only as ~0 or ~1"
	Path string `json:"path"`

	// value is what the field is set to while asleep, any JSON value (0, false,
	// "Stopped", ...); a string for an annotation (the schedule is not Ready, with
	// reason InvalidSpec, when it is not one).
	// +required
	Value apiextensionsv1.JSON `json:"value"`
}

// SleepPatch says how a kind without a scale subresource sleeps: which fields are set
// to which values. What the fields held before is captured from the object when it
// is put to sleep, so a wake restores each object as it was, not a hard-coded value.
// +kubebuilder:validation:XValidation:rule="self.type != 'MergePatch' || self.fields.all(f, !f.path.matches('/[0-9]+(/|$)'))",message="a MergePatch cannot address list elements (a numeric path segment): use type JSONPatch"
type SleepPatch struct {
	// type is how the fields are written: JSONPatch (RFC 6902, the default; paths may
	// go through list elements, values replace what was there) or MergePatch (RFC
	// 7386; object fields only, object values are merged).
	// +optional
	// +kubebuilder:default=JSONPatch
	Type PatchType `json:"type,omitempty"`

	// fields are set to their value while asleep and restored on waking. Up to 16.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=path
	Fields []SleepField `json:"fields"`
}

// SleepKind names one more kind of namespaced object that sleeps, besides
// Deployments, StatefulSets and CronJobs. How it sleeps:
//   - with patch: the patch's fields are set while asleep and restored on waking;
//   - KEDA's ScaledObject (keda.sh) without patch: paused with KEDA's
//     autoscaling.keda.sh/paused-replicas annotation ("0"), which KEDA obeys by
//     scaling the target to zero itself; its target is left to KEDA;
//   - KEDA's ScaledJob without patch: paused with KEDA's autoscaling.keda.sh/paused
//     annotation ("true"), so that KEDA starts no new Jobs (running ones finish);
//   - any other kind without patch: through its scale subresource, replicas to
//     sleepReplicas and back, as for Deployments.
//
// The kind is found at run time: a kind that is not served (its CRD is missing), has
// no scale subresource and no patch, or that Orderly may not read or write, is
// reported in the KindsAvailable condition and skipped until that changes. Orderly's
// manager holds no permission on such kinds: the platform grants it (docs/sleepschedule.md, "Permissions").
// +kubebuilder:validation:XValidation:rule="!(self.group == 'apps' && (self.kind == 'Deployment' || self.kind == 'StatefulSet' || self.kind == 'ReplicaSet')) && !(self.group == 'batch' && self.kind == 'CronJob') && !(self.group == 'autoscaling' && self.kind == 'HorizontalPodAutoscaler')",message="Deployments, StatefulSets and CronJobs are switched on and off with targets.deployments, statefulSets and cronJobs, HPAs with horizontalPodAutoscalers, and ReplicaSets follow their Deployment: do not list them in targets.kinds"
type SleepKind struct {
	// group of the kind, such as argoproj.io or keda.sh; "" for the core group.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == '' || self.matches('^[a-z0-9]([-a-z0-9]*[a-z0-9])?([.][a-z0-9]([-a-z0-9]*[a-z0-9])?)*$')",message="group must be empty (the core group) or a DNS subdomain such as argoproj.io"
	Group string `json:"group"`

	// kind, such as Rollout or ScaledObject (not the resource's plural name).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Za-z0-9]*$')",message="kind must be a kind name such as Rollout: a capital letter, then letters and digits"
	Kind string `json:"kind"`

	// patch makes the kind sleep by setting fields or annotations, for kinds without a
	// scale subresource; without it the kind sleeps through its scale subresource (or,
	// for KEDA's ScaledObject and ScaledJob, KEDA's pause annotations).
	// +optional
	Patch *SleepPatch `json:"patch,omitempty"`
}

// AwakeWindow is a weekly time window in which workloads run.
// +kubebuilder:validation:XValidation:rule="self.from != self.to",message="an awake window must not be empty: from and to are equal"
type AwakeWindow struct {
	// days the window starts on: day names Mon, Tue, Wed, Thu, Fri, Sat, Sun, ranges
	// such as Mon-Fri (Fri-Mon wraps over the weekend) and comma-separated lists such
	// as Sat,Sun or Mon,Wed-Fri.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^(Mon|Tue|Wed|Thu|Fri|Sat|Sun)(-(Mon|Tue|Wed|Thu|Fri|Sat|Sun))?(,(Mon|Tue|Wed|Thu|Fri|Sat|Sun)(-(Mon|Tue|Wed|Thu|Fri|Sat|Sun))?)*$')",message="days must be day names (Mon, Tue, Wed, Thu, Fri, Sat, Sun), ranges such as Mon-Fri, or comma-separated lists such as Sat,Sun"
	Days string `json:"days"`

	// from is the local time (HH:MM, 24-hour clock) at which the window opens.
	// +required
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="self.matches('^([01][0-9]|2[0-3]):[0-5][0-9]$')",message="from must be a time HH:MM between 00:00 and 23:59"
	// +kubebuilder:validation:MinLength=5
	From string `json:"from"`

	// to is the local time (HH:MM) at which the window closes; 24:00 means midnight at
	// the end of the day. A time earlier than from makes the window cross midnight:
	// it closes on the following day.
	// +required
	// +kubebuilder:validation:MaxLength=5
	// +kubebuilder:validation:XValidation:rule="self.matches('^(([01][0-9]|2[0-3]):[0-5][0-9]|24:00)$')",message="to must be a time HH:MM between 00:00 and 24:00"
	// +kubebuilder:validation:MinLength=5
	To string `json:"to"`
}

// SleepTargets says which kinds of workload a SleepSchedule acts on.
type SleepTargets struct {
	// deployments are scaled to sleepReplicas while asleep (default true).
	// +optional
	// +kubebuilder:default=true
	Deployments *bool `json:"deployments,omitempty"`

	// statefulSets are scaled to sleepReplicas while asleep (default true).
	// +optional
	// +kubebuilder:default=true
	StatefulSets *bool `json:"statefulSets,omitempty"`

	// cronJobs are suspended while asleep (default true).
	// +optional
	// +kubebuilder:default=true
	CronJobs *bool `json:"cronJobs,omitempty"`

	// horizontalPodAutoscalers: when true (default), a Deployment or StatefulSet that an
	// HPA scales is put to sleep too, and when sleepReplicas is above zero the HPA is
	// pinned to sleepReplicas while asleep and restored on waking. (At zero replicas
	// the HPA stops scaling by itself.) When false, workloads under an HPA never sleep.
	// +optional
	// +kubebuilder:default=true
	HorizontalPodAutoscalers *bool `json:"horizontalPodAutoscalers,omitempty"`

	// sleepReplicas is the replica count of Deployments and StatefulSets while asleep.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000
	SleepReplicas int32 `json:"sleepReplicas,omitempty"`

	// kinds are more kinds of namespaced object that sleep: any kind with a scale
	// subresource (Argo Rollouts, Strimzi KafkaNodePools, ...) by naming it, KEDA
	// ScaledObjects by naming them, and other kinds with a patch. Up to 16.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=map
	// +listMapKey=group
	// +listMapKey=kind
	Kinds []SleepKind `json:"kinds,omitempty"`
}

// WorkloadRef names one workload.
type WorkloadRef struct {
	// kind of the workload: Deployment, StatefulSet, CronJob, or the kind of an entry
	// of targets.kinds (such as Rollout: of any group).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Z][A-Za-z0-9]*$')",message="kind must be a kind name such as Deployment or Rollout"
	Kind string `json:"kind"`

	// namespace of the workload; empty matches the name in every selected namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// name of the workload.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// SleepExclusions lists workloads that never sleep. A workload annotated
// power.orderly.dev/exclude=true is excluded too.
type SleepExclusions struct {
	// workloads named one by one.
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=atomic
	Workloads []WorkloadRef `json:"workloads,omitempty"`

	// selector matches the labels of workloads that never sleep.
	// +optional
	Selector *metav1.LabelSelector `json:"selector,omitempty"`
}

// SleepScheduleSpec declares when the workloads of some namespaces run. Whatever it
// selects, Kubernetes' own namespaces (kube-*) and the namespace Orderly runs in never
// sleep (status.excludedNamespaces lists those it selected).
// +kubebuilder:validation:XValidation:rule="has(self.namespaceSelector) || (has(self.namespaces) && size(self.namespaces) > 0)",message="select namespaces with namespaceSelector, namespaces, or both"
// +kubebuilder:validation:MinProperties=1
type SleepScheduleSpec struct {
	// namespaceSelector selects namespaces by label.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// namespaces are selected by name (in addition to namespaceSelector).
	// +optional
	// +kubebuilder:validation:MaxItems=256
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=63
	Namespaces []string `json:"namespaces,omitempty"`

	// timeZone is the IANA time zone (such as Europe/Berlin) in which awake windows and
	// holidays are read; daylight saving time is followed. Default UTC.
	// +optional
	// +kubebuilder:default=UTC
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="self.matches('^[A-Za-z][A-Za-z0-9_+-]*(/[A-Za-z0-9_+-]+)*$')",message="timeZone must be an IANA time zone name such as UTC or Europe/Berlin"
	// +kubebuilder:validation:XValidation:rule="timestamp('2000-01-01T00:00:00Z').getHours(self) >= 0",message="timeZone is not a known IANA time zone"
	TimeZone string `json:"timeZone,omitempty"`

	// awake lists the weekly windows in which workloads run; outside them they sleep.
	// With no window the namespaces sleep all the time unless woken by wakeUntil.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=atomic
	Awake []AwakeWindow `json:"awake,omitempty"`

	// holidays are dates (YYYY-MM-DD, in timeZone) that are asleep all day.
	// +optional
	// +kubebuilder:validation:MaxItems=366
	// +listType=set
	// +kubebuilder:validation:items:MaxLength=10
	// +kubebuilder:validation:XValidation:rule="self.all(d, d.matches('^[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])$'))",message="holidays must be dates YYYY-MM-DD"
	Holidays []string `json:"holidays,omitempty"`

	// targets says which kinds of workload sleep, and how.
	// +optional
	// +kubebuilder:default={}
	Targets SleepTargets `json:"targets,omitempty,omitzero"`

	// exclude lists workloads that never sleep.
	// +optional
	Exclude SleepExclusions `json:"exclude,omitempty,omitzero"`

	// wakeUntil keeps everything awake until this time, whatever the windows and
	// holidays say; then the schedule resumes by itself. Set it with
	// `orderly sleep wake <schedule> --for 2h`.
	// +optional
	WakeUntil *metav1.Time `json:"wakeUntil,omitempty"`

	// suspend pauses the schedule: workloads are left as they are, asleep or awake.
	// +optional
	Suspend bool `json:"suspend,omitempty"`

	// dryRun computes and reports what would sleep, and changes nothing.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`

	// gitOpsManaged is what the schedule does with workloads that Argo CD or Flux
	// manage (by their tracking label or annotation). Sleep, the default, puts them
	// to sleep like the rest and reports them (status.gitOpsManaged and the
	// GitOpsManaged condition): for tools told to ignore replicas. Skip leaves them
	// awake and names them in the WorkloadsSkipped condition (reason GitOpsManaged):
	// for tools that would scale them back up at their next sync.
	// +optional
	// +kubebuilder:default=Sleep
	GitOpsManaged GitOpsPolicy `json:"gitOpsManaged,omitempty"`
}

// SleepState is whether the schedule's namespaces are asleep or awake.
// +kubebuilder:validation:Enum=Awake;Asleep
type SleepState string

// Values of SleepState.
const (
	StateAwake  SleepState = "Awake"
	StateAsleep SleepState = "Asleep"
)

// TransitionAction is what a transition did.
// +kubebuilder:validation:Enum=Sleep;Wake
type TransitionAction string

// Values of TransitionAction.
const (
	ActionSleep TransitionAction = "Sleep"
	ActionWake  TransitionAction = "Wake"
)

// Transition is one past change of state.
type Transition struct {
	// time at which Orderly carried out the transition.
	// +required
	Time metav1.Time `json:"time"`

	// action is Sleep or Wake.
	// +required
	Action TransitionAction `json:"action"`

	// workloads is the number of workloads Orderly changed in this period (including
	// workloads created while asleep and put to sleep later).
	// +optional
	Workloads int32 `json:"workloads,omitempty"`

	// failures is the number of workloads Orderly could not change at its last attempt.
	// +optional
	Failures int32 `json:"failures,omitempty"`

	// dryRun is true when nothing was changed because spec.dryRun was set.
	// +optional
	DryRun bool `json:"dryRun,omitempty"`
}

// Condition types of a SleepSchedule.
const (
	// ConditionReady is True when every selected workload is in the scheduled state.
	ConditionReady = "Ready"
	// ConditionNamespaceConflict is True when another SleepSchedule owns a namespace
	// that this one selects.
	ConditionNamespaceConflict = "NamespaceConflict"
	// ConditionWorkloadsReady is True when, while awake, every Deployment and
	// StatefulSet has all its replicas ready.
	ConditionWorkloadsReady = "WorkloadsReady"
	// ConditionKindsAvailable is True when every kind of targets.kinds is served, can
	// sleep (a scale subresource, a patch, or KEDA's ScaledObject) and may be read and
	// written by Orderly.
	ConditionKindsAvailable = "KindsAvailable"
	// ConditionGitOpsManaged is True when some targeted workloads are managed by Argo
	// CD or Flux, which scale a sleeping workload back up unless told to ignore its
	// replicas (docs/sleepschedule.md, "GitOps").
	ConditionGitOpsManaged = "GitOpsManaged"
)

// GitOpsPolicy is what a SleepSchedule does with workloads a GitOps tool manages.
// +kubebuilder:validation:Enum=Sleep;Skip
type GitOpsPolicy string

// Values of GitOpsPolicy.
const (
	// GitOpsSleep puts them to sleep and reports them.
	GitOpsSleep GitOpsPolicy = "Sleep"
	// GitOpsSkip leaves them awake and reports them as skipped.
	GitOpsSkip GitOpsPolicy = "Skip"
)

// GitOpsTool is a GitOps tool that manages a workload.
// +kubebuilder:validation:Enum=ArgoCD;Flux
type GitOpsTool string

// Values of GitOpsTool.
const (
	GitOpsArgoCD GitOpsTool = "ArgoCD"
	GitOpsFlux   GitOpsTool = "Flux"
)

// GitOpsWorkload is a targeted workload that a GitOps tool manages.
type GitOpsWorkload struct {
	// tool is ArgoCD or Flux, as told by the workload's tracking label or annotation.
	// +required
	Tool GitOpsTool `json:"tool"`

	// workload is the workload, as "Kind namespace/name" (Kind.group for the kinds of
	// targets.kinds).
	// +required
	// +kubebuilder:validation:MaxLength=400
	Workload string `json:"workload"`
}

// Reasons of ExcludedNamespace.
const (
	// ExcludedSystemNamespace is a kube-* namespace: Kubernetes' own workloads (CoreDNS,
	// ...) must keep running for anything to wake.
	ExcludedSystemNamespace = "SystemNamespace"
	// ExcludedManagerNamespace is the namespace Orderly runs in: asleep, nothing would
	// be left to wake the others.
	ExcludedManagerNamespace = "ManagerNamespace"
)

// ExcludedNamespace is a selected namespace that Orderly leaves awake.
type ExcludedNamespace struct {
	// name of the namespace.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`

	// reason it is left awake: SystemNamespace (kube-*) or ManagerNamespace (Orderly's own).
	// +required
	// +kubebuilder:validation:Enum=SystemNamespace;ManagerNamespace
	Reason string `json:"reason"`
}

// NamespaceSavings is what a schedule saves in one namespace now.
type NamespaceSavings struct {
	// namespace is the namespace's name.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// sleepingWorkloads is how many of its workloads the schedule holds asleep.
	// +optional
	SleepingWorkloads int32 `json:"sleepingWorkloads,omitempty"`

	// savedRequests is the CPU and memory requested by the pods of this namespace
	// that are not running because of the schedule.
	// +optional
	SavedRequests corev1.ResourceList `json:"savedRequests,omitempty"`
}

// SleepSavings is what a schedule saved in the current week, from Monday 00:00 in its
// time zone: how long it was asleep, and the CPU and memory requests of the pods that
// did not run because of it, over that time. It is counted at each reconcile from the
// state and status.savedRequests of the previous one (at least every 15 minutes, and
// at every transition), so it is an estimate to within those steps.
type SleepSavings struct {
	// weekStart is the start of the week counted: Monday 00:00 in spec.timeZone.
	// +required
	WeekStart metav1.Time `json:"weekStart"`

	// countedUntil is the instant up to which the week is counted.
	// +required
	CountedUntil metav1.Time `json:"countedUntil"`

	// asleepSeconds is how long the schedule held workloads asleep this week.
	// +optional
	AsleepSeconds int64 `json:"asleepSeconds,omitempty"`

	// asleepHours is asleepSeconds in hours, with one decimal (for display).
	// +optional
	// +kubebuilder:validation:MaxLength=16
	AsleepHours string `json:"asleepHours,omitempty"`

	// cpuMilliCoreSeconds is the CPU requested by the pods not running, in millicores,
	// summed over every second of this week.
	// +optional
	CPUMilliCoreSeconds int64 `json:"cpuMilliCoreSeconds,omitempty"`

	// cpuCoreHours is cpuMilliCoreSeconds in core-hours, with one decimal (for display).
	// +optional
	// +kubebuilder:validation:MaxLength=24
	CPUCoreHours string `json:"cpuCoreHours,omitempty"`

	// memoryMiBSeconds is the memory requested by the pods not running, in MiB,
	// summed over every second of this week.
	// +optional
	MemoryMiBSeconds int64 `json:"memoryMiBSeconds,omitempty"`

	// memoryGiBHours is memoryMiBSeconds in GiB-hours, with one decimal (for display).
	// +optional
	// +kubebuilder:validation:MaxLength=24
	MemoryGiBHours string `json:"memoryGiBHours,omitempty"`
}

// SleepScheduleStatus is the observed state of a SleepSchedule.
type SleepScheduleStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// state is Awake or Asleep, as the schedule says at the time of the last reconcile.
	// +optional
	State SleepState `json:"state,omitempty"`

	// nextTransition is when the state changes next; empty when it never does.
	// +optional
	NextTransition *metav1.Time `json:"nextTransition,omitempty"`

	// namespaces is the number of namespaces this schedule manages (selected, not
	// excluded, and not owned by an older schedule).
	// +optional
	Namespaces int32 `json:"namespaces,omitempty"`

	// excludedNamespaces names the selected namespaces that Orderly never puts to sleep,
	// whatever the selector or the list of names says, and why: Kubernetes' own
	// namespaces (kube-*) and the namespace Orderly runs in. Up to 20.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	ExcludedNamespaces []ExcludedNamespace `json:"excludedNamespaces,omitempty"`

	// workloads is the number of workloads the schedule applies to (not excluded).
	// +optional
	Workloads int32 `json:"workloads,omitempty"`

	// sleepingWorkloads is the number of workloads Orderly holds asleep.
	// +optional
	SleepingWorkloads int32 `json:"sleepingWorkloads,omitempty"`

	// readyWorkloads is the number of Deployments and StatefulSets with all their
	// replicas ready (while awake).
	// +optional
	ReadyWorkloads int32 `json:"readyWorkloads,omitempty"`

	// notReady names up to 20 awake workloads whose replicas are not all ready.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +kubebuilder:validation:items:MaxLength=512
	NotReady []string `json:"notReady,omitempty"`

	// leftAlone names up to 20 workloads that their owner changed while asleep and
	// that Orderly therefore leaves as they are.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	// +kubebuilder:validation:items:MaxLength=512
	LeftAlone []string `json:"leftAlone,omitempty"`

	// leftAloneCount is the number of such workloads.
	// +optional
	LeftAloneCount int32 `json:"leftAloneCount,omitempty"`

	// wouldSleep is, with dryRun, the number of workloads that would be asleep now.
	// +optional
	WouldSleep int32 `json:"wouldSleep,omitempty"`

	// savedRequests is the CPU and memory requested by the pods that are not running
	// because of this schedule.
	// +optional
	SavedRequests corev1.ResourceList `json:"savedRequests,omitempty"`

	// savedByNamespace splits savedRequests by namespace: the 50 namespaces where the
	// schedule saves the most CPU (then memory) now, most first. The metrics
	// orderly_sleepschedule_namespace_saved_cpu_cores and _memory_bytes have every
	// namespace.
	// +optional
	// +kubebuilder:validation:MaxItems=50
	// +listType=atomic
	SavedByNamespace []NamespaceSavings `json:"savedByNamespace,omitempty"`

	// gitOpsManaged names up to 20 targeted workloads that Argo CD or Flux manages,
	// with the tool.
	// +optional
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	GitOpsManaged []GitOpsWorkload `json:"gitOpsManaged,omitempty"`

	// gitOpsManagedCount is the number of such workloads.
	// +optional
	GitOpsManagedCount int32 `json:"gitOpsManagedCount,omitempty"`

	// savings is what the schedule saved this week: hours asleep, and the core-hours
	// and GiB-hours of requests of the pods that did not run.
	// +optional
	Savings *SleepSavings `json:"savings,omitempty"`

	// history holds the last 10 transitions, newest first.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	History []Transition `json:"history,omitempty"`

	// conditions: Ready, NamespaceConflict, WorkloadsReady, KindsAvailable and
	// GitOpsManaged.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// SleepSchedule scales the workloads of selected namespaces down outside business
// hours and restores them exactly afterwards.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=slp,categories=orderly
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
// +kubebuilder:printcolumn:name="Next Transition",type=string,JSONPath=`.status.nextTransition`
// +kubebuilder:printcolumn:name="Sleeping",type=integer,JSONPath=`.status.sleepingWorkloads`
// +kubebuilder:printcolumn:name="Workloads",type=integer,JSONPath=`.status.workloads`
// +kubebuilder:printcolumn:name="Saved CPU",type=string,JSONPath=`.status.savedRequests.cpu`
// +kubebuilder:printcolumn:name="Saved Memory",type=string,JSONPath=`.status.savedRequests.memory`,priority=1
// +kubebuilder:printcolumn:name="Asleep This Week (h)",type=string,JSONPath=`.status.savings.asleepHours`,priority=1
// +kubebuilder:printcolumn:name="Core-Hours Saved",type=string,JSONPath=`.status.savings.cpuCoreHours`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="a SleepSchedule's name is used as a label value and must be at most 63 characters"
type SleepSchedule struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is when the selected namespaces are awake.
	// +required
	Spec SleepScheduleSpec `json:"spec"`

	// status is what Orderly observed.
	// +optional
	Status SleepScheduleStatus `json:"status,omitempty,omitzero"`
}

// SleepScheduleList is a list of SleepSchedules.
// +kubebuilder:object:root=true
type SleepScheduleList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the SleepSchedules.
	Items []SleepSchedule `json:"items"`
}
