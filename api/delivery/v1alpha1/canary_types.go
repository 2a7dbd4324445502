package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations Orderly writes. The ones on the user's Deployment live on it,
// so that deleting and recreating the Canary (or restarting Orderly) never loses the
// replica count to restore.
const (
	// CanaryLabel names the Canary on the Deployments, Services and routes Orderly
	// creates for it, and on their pods.
	CanaryLabel = "delivery.orderly.dev/canary"
	// VariantLabel is primary or canary on the Deployments and Services Orderly creates
	// and on their pods.
	VariantLabel = "delivery.orderly.dev/variant"
	// RevisionAnnotation is, on the primary and canary Deployments, the revision (a
	// hash of the user's pod template) that they run.
	RevisionAnnotation = "delivery.orderly.dev/revision"
	// TargetAnnotation, on the user's Deployment, names the Canary that manages it.
	TargetAnnotation = "delivery.orderly.dev/canary"
	// ReplicasAnnotation, on the user's Deployment, is the replica count it had before
	// Orderly scaled it to zero: the primary and canary run that many, and it is
	// restored when the Canary is deleted.
	ReplicasAnnotation = "delivery.orderly.dev/replicas"
	// PromoteAnnotation, set by `orderly canary promote` to "<revision>/<step>", passes
	// that step of that revision: a pause step, a step paused as inconclusive, or a
	// weight step before its analysis. A value for another revision or step does
	// nothing, so a stale one never promotes a later step.
	PromoteAnnotation = "delivery.orderly.dev/promote"
	// AbortAnnotation, set by `orderly canary abort` to a revision, rolls that
	// revision back now.
	AbortAnnotation = "delivery.orderly.dev/abort"
)

// Values of VariantLabel, and of the {{ .Variant }} placeholder of a metric query.
const (
	VariantPrimary = "primary"
	VariantCanary  = "canary"
)

// TargetRef names the Deployment a Canary delivers.
type TargetRef struct {
	// kind of the target; only Deployment is supported.
	// +optional
	// +kubebuilder:default=Deployment
	// +kubebuilder:validation:Enum=Deployment
	Kind string `json:"kind,omitempty"`

	// name of the Deployment, in the Canary's namespace. Orderly creates
	// <name>-primary and <name>-canary Deployments and Services, so the name is at most
	// 55 characters.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=55
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`
}

// CanaryService describes the Services Orderly creates in front of the primary and
// canary pods (<target>-primary and <target>-canary).
type CanaryService struct {
	// port the Services expose, and the port of the route's backendRefs.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port"`

	// targetPort is the pods' port; default: port.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	TargetPort *int32 `json:"targetPort,omitempty"`
}

// ParentRef names a Gateway an HTTPRoute that Orderly creates attaches to.
type ParentRef struct {
	// name of the Gateway.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// namespace of the Gateway; default: the Canary's namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

	// sectionName is the Gateway listener to attach to; default: all.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SectionName string `json:"sectionName,omitempty"`
}

// HTTPRouteTraffic is the Gateway API HTTPRoute whose backendRef weights Orderly sets.
// +kubebuilder:validation:XValidation:rule="!(has(self.create) && self.create) || (has(self.parentRefs) && size(self.parentRefs) > 0)",message="an HTTPRoute that Orderly creates needs parentRefs"
// +kubebuilder:validation:XValidation:rule="(has(self.create) && self.create) || (!has(self.parentRefs) && !has(self.hostnames))",message="parentRefs and hostnames are only for an HTTPRoute that Orderly creates (create: true); edit your own route directly"
type HTTPRouteTraffic struct {
	// name of the HTTPRoute, in the Canary's namespace. Without create, the route
	// must exist: Orderly sets the weights of its backendRefs to the <target>-primary
	// and <target>-canary Services (adding the canary one next to the primary one) and
	// touches nothing else in it.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// create makes Orderly create the route (one rule to the two Services), own it,
	// and delete it with the Canary. A route of that name that Orderly did not create
	// is never taken over.
	// +optional
	Create bool `json:"create,omitempty"`

	// parentRefs are the Gateways the created route attaches to.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	ParentRefs []ParentRef `json:"parentRefs,omitempty"`

	// hostnames of the created route.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=atomic
	// +kubebuilder:validation:items:MaxLength=253
	Hostnames []string `json:"hostnames,omitempty"`
}

// VirtualServiceTraffic is an Istio VirtualService whose route weights Orderly sets.
type VirtualServiceTraffic struct {
	// name of an existing VirtualService in the Canary's namespace. Orderly sets the
	// weights of its http routes' destinations whose host is the <target>-primary or
	// <target>-canary Service (short or cluster-local name), adding the canary next
	// to the primary when the first step starts (not before: an idle Canary leaves
	// the VirtualService as it was written), and touches nothing else. The canary's
	// destination has the primary's host form and port but not its subset: a subset
	// names a DestinationRule subset of the primary's host, which the canary's
	// Service does not have.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`

	// routes names the http routes (by their name field) whose weights Orderly sets.
	// Without it, every http route that sends traffic to the primary, except routes
	// that match requests by header or query parameter: those pick particular
	// clients (testers pinned to a version, a debug header), which a canary's share
	// of traffic is not for.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MinLength=1
	// +kubebuilder:validation:items:MaxLength=253
	Routes []string `json:"routes,omitempty"`
}

// Traffic says where Orderly shifts traffic between primary and canary. Both may be
// given; each is written where its CRD is installed, and status.traffic reports which
// are.
// +kubebuilder:validation:XValidation:rule="has(self.httpRoute) || has(self.virtualService)",message="name an httpRoute, a virtualService, or both"
// +kubebuilder:validation:MinProperties=1
type Traffic struct {
	// httpRoute is a Gateway API HTTPRoute (gateway.networking.k8s.io).
	// +optional
	HTTPRoute *HTTPRouteTraffic `json:"httpRoute,omitempty"`

	// virtualService is an Istio VirtualService (networking.istio.io).
	// +optional
	VirtualService *VirtualServiceTraffic `json:"virtualService,omitempty"`
}

// Step is one step of a canary analysis: a weight held for an interval and then
// judged, or a pause until a person promotes.
// +kubebuilder:validation:XValidation:rule="has(self.weight) != (has(self.pause) && self.pause)",message="a step is either a weight (with an interval) or pause: true"
// +kubebuilder:validation:XValidation:rule="has(self.weight) == has(self.interval)",message="a weight step needs an interval, and a pause step has none"
type Step struct {
	// weight is the percentage of traffic sent to the canary during this step.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	Weight *int32 `json:"weight,omitempty"`

	// interval is how long the weight is held before the metrics of that time are
	// judged (e.g. 1m). Each metric needs minSamples samples in it at the analysis
	// resolution.
	// +optional
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('24h')",message="interval must be between 1s and 24h"
	Interval *metav1.Duration `json:"interval,omitempty"`

	// pause waits, at the weight of the step before, until `orderly canary promote`.
	// +optional
	Pause bool `json:"pause,omitempty"`
}

// SecretRef names a Secret in the Canary's namespace.
type SecretRef struct {
	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// Provider is the Prometheus server the metrics are read from.
type Provider struct {
	// address of the Prometheus HTTP API, such as http://prometheus.monitoring:9090.
	// +required
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:XValidation:rule="isURL(self) && url(self).getScheme() in ['http', 'https'] && url(self).getHostname() != ''",message="address must be an http:// or https:// URL with a host"
	// +kubebuilder:validation:XValidation:rule="url(self).getQuery().size() == 0 && !self.contains('#')",message="address must not carry a query or fragment"
	// +kubebuilder:validation:MinLength=1
	Address string `json:"address"`

	// secretRef names a Secret in the Canary's namespace with the credentials: a
	// bearer `token`, or `username` and `password` for basic auth; and `ca.crt` to
	// verify an https address. Never a Secret of another namespace.
	// +optional
	SecretRef *SecretRef `json:"secretRef,omitempty"`

	// timeout bounds each request to Prometheus (default 5s, at most 60s).
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('100ms') && duration(self) <= duration('60s')",message="timeout must be between 100ms and 60s"
	Timeout metav1.Duration `json:"timeout,omitempty,omitzero"`
}

// Direction says which way a baseline metric gets worse.
// +kubebuilder:validation:Enum=HigherIsWorse;LowerIsWorse
type Direction string

// Values of Direction.
const (
	HigherIsWorse Direction = "HigherIsWorse"
	LowerIsWorse  Direction = "LowerIsWorse"
)

// Threshold bounds the mean of the canary's samples.
// +kubebuilder:validation:XValidation:rule="has(self.min) || has(self.max)",message="a threshold needs min, max, or both"
type Threshold struct {
	// min is the lowest acceptable mean of the canary's samples (a decimal number).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	Min *string `json:"min,omitempty"`

	// max is the highest acceptable mean of the canary's samples (a decimal number).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	Max *string `json:"max,omitempty"`
}

// BaselineComparison judges the canary against the primary (the baseline) with a
// one-sided Mann-Whitney U test on the samples of the step's interval. The canary
// fails when it is worse with significance (p < alpha) and by more than the allowed
// effect: the Hodges-Lehmann estimate of the shift (the median of all canary-minus-
// baseline differences, in the worse direction) exceeds the larger of
// maxAbsoluteShift and maxRelativeShift × |baseline median|.
type BaselineComparison struct {
	// direction says whether higher values (errors, latency) or lower values
	// (success rate, throughput) are worse. Default HigherIsWorse.
	// +optional
	// +kubebuilder:default=HigherIsWorse
	Direction Direction `json:"direction,omitempty"`

	// maxRelativeShift is the allowed shift as a fraction of the baseline's median
	// (default 0.1: 10% worse is accepted).
	// +optional
	// +kubebuilder:default="0.1"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?$`
	MaxRelativeShift string `json:"maxRelativeShift,omitempty"`

	// maxAbsoluteShift is the allowed shift in the metric's own unit (default 0),
	// for metrics whose baseline is often zero, such as error rates.
	// +optional
	// +kubebuilder:default="0"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^[0-9]+(\.[0-9]+)?([eE][-+]?[0-9]+)?$`
	MaxAbsoluteShift string `json:"maxAbsoluteShift,omitempty"`

	// alpha is the significance level of the test (default 0.05, at most 0.5).
	// +optional
	// +kubebuilder:default="0.05"
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^0?\.[0-9]+$`
	// +kubebuilder:validation:XValidation:rule="double(self) > 0.0 && double(self) <= 0.5",message="alpha must be above 0 and at most 0.5"
	Alpha string `json:"alpha,omitempty"`
}

// Metric is one check of the analysis.
// +kubebuilder:validation:XValidation:rule="has(self.threshold) != has(self.baseline)",message="a metric has either a threshold or a baseline comparison"
// +kubebuilder:validation:XValidation:rule="!has(self.baseline) || self.query.contains('{{ .Variant }}') || self.query.contains('{{.Variant}}')",message="a baseline comparison needs {{ .Variant }} in the query, to tell the canary's samples from the primary's"
type Metric struct {
	// name of the metric, as shown in the decision record.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9]([-_.a-zA-Z0-9]*[a-zA-Z0-9])?$`
	Name string `json:"name"`

	// query is PromQL, evaluated as a range query over the step's interval at the
	// analysis resolution; every sample of every series it returns counts. The
	// placeholders {{ .Target }} (the target Deployment's name), {{ .Namespace }} and
	// {{ .Variant }} (primary or canary) are replaced before it is sent. Prometheus
	// itself checks that it parses; a query it refuses is reported in the
	// QueriesValid condition and stops the analysis.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`

	// threshold bounds the mean of the canary's samples.
	// +optional
	Threshold *Threshold `json:"threshold,omitempty"`

	// baseline compares the canary's samples with the primary's.
	// +optional
	Baseline *BaselineComparison `json:"baseline,omitempty"`

	// minSamples is how many samples the canary (and, for a baseline comparison, the
	// primary) need in the interval; fewer make the metric inconclusive, not a pass.
	// Default 10.
	// +optional
	// +kubebuilder:default=10
	// +kubebuilder:validation:Minimum=3
	// +kubebuilder:validation:Maximum=11000
	MinSamples int32 `json:"minSamples,omitempty"`
}

// ProviderErrorPolicy is what a metrics outage does to an analysis.
// +kubebuilder:validation:Enum=Hold;Rollback
type ProviderErrorPolicy string

// Values of ProviderErrorPolicy.
const (
	// ProviderErrorHold keeps traffic where it is and retries, for up to maxHold, then
	// rolls back. An outage is never a failed check.
	ProviderErrorHold ProviderErrorPolicy = "Hold"
	// ProviderErrorRollback rolls back at once.
	ProviderErrorRollback ProviderErrorPolicy = "Rollback"
)

// Analysis says how each step is judged.
type Analysis struct {
	// provider is the Prometheus server.
	// +required
	Provider Provider `json:"provider"`

	// metrics are the checks; a step passes when every one passes.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=10
	// +listType=map
	// +listMapKey=name
	Metrics []Metric `json:"metrics"`

	// resolution is the step of the range queries: the time between two samples
	// (default 5s, at least 1s).
	// +optional
	// +kubebuilder:default="5s"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('1h')",message="resolution must be between 1s and 1h"
	Resolution metav1.Duration `json:"resolution,omitempty,omitzero"`

	// onProviderError: Hold (default) keeps traffic where it is while Prometheus
	// cannot be queried, for up to maxHold, then rolls back; Rollback rolls back at
	// once.
	// +optional
	// +kubebuilder:default=Hold
	OnProviderError ProviderErrorPolicy `json:"onProviderError,omitempty"`

	// maxHold bounds a Hold (default 10m).
	// +optional
	// +kubebuilder:default="10m"
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('1s') && duration(self) <= duration('168h')",message="maxHold must be between 1s and 168h"
	MaxHold metav1.Duration `json:"maxHold,omitempty,omitzero"`

	// maxInconclusive is how many inconclusive analyses in a row one step may have
	// (each over a longer window) before the Canary pauses for a person to promote or
	// abort (default 3).
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=100
	MaxInconclusive int32 `json:"maxInconclusive,omitempty"`
}

// CanarySpec declares how a new version of a Deployment is delivered.
// +kubebuilder:validation:XValidation:rule="self.steps.exists(s, has(s.weight))",message="steps need at least one weight step"
// +kubebuilder:validation:XValidation:rule="self.steps.filter(s, has(s.weight)).map(s, s.weight).isSorted() && self.steps.filter(s, has(s.weight)).all(s, self.steps.filter(t, has(t.weight) && t.weight == s.weight).size() == 1)",message="step weights must increase from one weight step to the next"
type CanarySpec struct {
	// targetRef is the user's Deployment. Orderly runs its pod template in
	// <name>-primary and, for a new template, in <name>-canary, and scales it to zero
	// while the Canary exists (its replica count is restored when the Canary is
	// deleted). Keep editing it: a new pod template starts a new analysis.
	// +required
	TargetRef TargetRef `json:"targetRef"`

	// service is the port of the <target>-primary and <target>-canary Services.
	// +required
	Service CanaryService `json:"service"`

	// traffic is where the weights are written.
	// +required
	Traffic Traffic `json:"traffic"`

	// steps are taken in order for each new revision: weights (e.g. 10, 25, 50, 100)
	// each held for its interval and judged, and pauses. After the last step the
	// canary is promoted.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=20
	// +listType=atomic
	Steps []Step `json:"steps"`

	// analysis says how each weight step is judged.
	// +required
	Analysis Analysis `json:"analysis"`
}

// CanaryPhase is where a Canary is in delivering a revision.
// +kubebuilder:validation:Enum=Initializing;Progressing;Paused;Holding;Promoting;Succeeded;RolledBack
type CanaryPhase string

// Values of CanaryPhase.
const (
	// PhaseInitializing: the primary is being created from the target's template.
	PhaseInitializing CanaryPhase = "Initializing"
	// PhaseProgressing: a new revision is analysed step by step.
	PhaseProgressing CanaryPhase = "Progressing"
	// PhasePaused: waiting for `orderly canary promote` (a pause step, or too many
	// inconclusive analyses).
	PhasePaused CanaryPhase = "Paused"
	// PhaseHolding: Prometheus cannot be queried; traffic stays where it is.
	PhaseHolding CanaryPhase = "Holding"
	// PhasePromoting: the primary takes the canary's template; traffic moves back to
	// it once it is ready.
	PhasePromoting CanaryPhase = "Promoting"
	// PhaseSucceeded: the primary runs the target's template and takes all traffic.
	PhaseSucceeded CanaryPhase = "Succeeded"
	// PhaseRolledBack: the revision failed; all traffic is on the primary, which runs
	// the previous revision, until the target's template changes again.
	PhaseRolledBack CanaryPhase = "RolledBack"
)

// Verdict is the outcome of one step's analysis, or of one metric.
// +kubebuilder:validation:Enum=Pass;Fail;Inconclusive;Promoted;Aborted;HoldExpired;ProviderError
type Verdict string

// Values of Verdict.
const (
	VerdictPass         Verdict = "Pass"
	VerdictFail         Verdict = "Fail"
	VerdictInconclusive Verdict = "Inconclusive"
	// VerdictPromoted: a person passed the step (orderly canary promote).
	VerdictPromoted Verdict = "Promoted"
	// VerdictAborted: a person rolled the revision back (orderly canary abort).
	VerdictAborted Verdict = "Aborted"
	// VerdictHoldExpired: Prometheus could not be queried for maxHold.
	VerdictHoldExpired Verdict = "HoldExpired"
	// VerdictProviderError: Prometheus could not be queried and onProviderError is
	// Rollback.
	VerdictProviderError Verdict = "ProviderError"
)

// SampleSummary summarises the samples of one variant in one analysis window.
// Numbers are decimal strings.
type SampleSummary struct {
	// count is the number of samples.
	// +optional
	Count int32 `json:"count,omitempty"`
	// mean of the samples.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Mean string `json:"mean,omitempty"`
	// median of the samples.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Median string `json:"median,omitempty"`
	// min is the smallest sample.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Min string `json:"min,omitempty"`
	// max is the largest sample.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Max string `json:"max,omitempty"`
}

// MetricDecision is how one metric was judged in one step.
type MetricDecision struct {
	// name of the metric.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Name string `json:"name"`
	// verdict is Pass, Fail or Inconclusive.
	// +required
	Verdict Verdict `json:"verdict"`
	// canary summarises the canary's samples.
	// +optional
	Canary *SampleSummary `json:"canary,omitempty"`
	// baseline summarises the primary's samples (baseline comparisons only).
	// +optional
	Baseline *SampleSummary `json:"baseline,omitempty"`
	// statistic is the Mann-Whitney U of the canary's samples (baseline comparisons).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Statistic string `json:"statistic,omitempty"`
	// pValue is the one-sided p-value of "the canary is worse" (baseline comparisons).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	PValue string `json:"pValue,omitempty"`
	// effect is the Hodges-Lehmann shift of the canary from the baseline, in the
	// worse direction (baseline comparisons).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Effect string `json:"effect,omitempty"`
	// allowedEffect is the largest shift accepted (baseline comparisons).
	// +optional
	// +kubebuilder:validation:MaxLength=32
	AllowedEffect string `json:"allowedEffect,omitempty"`
	// reason says why, in words.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Reason string `json:"reason,omitempty"`
}

// StepDecision is the record of one step's outcome.
type StepDecision struct {
	// revision that was analysed.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Revision string `json:"revision"`
	// step is the index of the step in spec.steps.
	// +required
	Step int32 `json:"step"`
	// weight is the canary's traffic percentage during the step.
	// +optional
	Weight int32 `json:"weight,omitempty"`
	// time of the decision.
	// +required
	Time metav1.Time `json:"time"`
	// windowStart is the start of the analysed window (it ends at time).
	// +optional
	WindowStart *metav1.Time `json:"windowStart,omitempty"`
	// verdict of the step.
	// +required
	Verdict Verdict `json:"verdict"`
	// reason says why, in words.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Reason string `json:"reason,omitempty"`
	// metrics is how each metric was judged.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	Metrics []MetricDecision `json:"metrics,omitempty"`
}

// RouterStatus reports one of spec.traffic's routers.
type RouterStatus struct {
	// kind is HTTPRoute or VirtualService.
	// +required
	// +kubebuilder:validation:MaxLength=32
	Kind string `json:"kind"`
	// name of the route.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// installed is whether the kind's CRD is installed in the cluster.
	// +optional
	Installed bool `json:"installed"`
	// found is whether the route exists (or was created).
	// +optional
	Found bool `json:"found"`
	// canaryWeight is the canary's weight last observed in the route.
	// +optional
	CanaryWeight *int32 `json:"canaryWeight,omitempty"`
}

// Condition types of a Canary.
const (
	// ConditionReady is True while the Canary can deliver: its target, Services,
	// routes and queries are in order and the last revision was not rolled back.
	ConditionReady = "Ready"
	// ConditionTrafficReady is True when every router's CRD is installed and its
	// route exists.
	ConditionTrafficReady = "TrafficReady"
	// ConditionProviderAvailable is False while Prometheus cannot be queried.
	ConditionProviderAvailable = "ProviderAvailable"
	// ConditionQueriesValid is False when Prometheus refuses a query (or a placeholder
	// is unknown).
	ConditionQueriesValid = "QueriesValid"
)

// CanaryStatus is the observed state of a Canary. Everything the analysis needs to
// resume after a restart of Orderly is here.
type CanaryStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase is where the delivery stands.
	// +optional
	Phase CanaryPhase `json:"phase,omitempty"`

	// revision is the revision (hash of the target's pod template) under analysis,
	// or last analysed.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Revision string `json:"revision,omitempty"`

	// primaryRevision is the revision the primary runs.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	PrimaryRevision string `json:"primaryRevision,omitempty"`

	// currentStep is the index in spec.steps of the step under way.
	// +optional
	CurrentStep int32 `json:"currentStep,omitempty"`

	// canaryWeight is the canary's share of traffic, in percent.
	// +optional
	CanaryWeight int32 `json:"canaryWeight,omitempty"`

	// stepStartedAt is when the current step's weight was in place: the start of its
	// analysis window.
	// +optional
	StepStartedAt *metav1.Time `json:"stepStartedAt,omitempty"`

	// nextAnalysisAt is when the current step is judged next.
	// +optional
	NextAnalysisAt *metav1.Time `json:"nextAnalysisAt,omitempty"`

	// inconclusiveCount is how many analyses of the current step were inconclusive.
	// +optional
	InconclusiveCount int32 `json:"inconclusiveCount,omitempty"`

	// holdingSince is when Prometheus stopped answering, while Holding.
	// +optional
	HoldingSince *metav1.Time `json:"holdingSince,omitempty"`

	// replicas is the replica count of the primary (and of the canary while it runs).
	// +optional
	Replicas int32 `json:"replicas,omitempty"`

	// traffic reports each router: whether its CRD is installed, whether the route
	// exists, and the weight observed.
	// +optional
	// +kubebuilder:validation:MaxItems=2
	// +listType=atomic
	Traffic []RouterStatus `json:"traffic,omitempty"`

	// decisions are the last 10 step decisions, newest first.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	Decisions []StepDecision `json:"decisions,omitempty"`

	// conditions: Ready, TrafficReady, ProviderAvailable and QueriesValid.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Canary delivers new versions of a Deployment step by step: it shifts traffic to the
// new version, judges it against the stable one on Prometheus metrics, and promotes it
// or rolls it back by itself, keeping a record of each decision.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Namespaced,shortName=cny,categories=orderly
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Step",type=integer,JSONPath=`.status.currentStep`
// +kubebuilder:printcolumn:name="Weight",type=integer,JSONPath=`.status.canaryWeight`
// +kubebuilder:printcolumn:name="Verdict",type=string,JSONPath=`.status.decisions[0].verdict`
// +kubebuilder:printcolumn:name="Revision",type=string,JSONPath=`.status.revision`,priority=1
// +kubebuilder:printcolumn:name="Primary",type=string,JSONPath=`.status.primaryRevision`,priority=1
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="a Canary's name is used as a label value and must be at most 63 characters"
type Canary struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is how new versions of the target are delivered.
	// +required
	Spec CanarySpec `json:"spec"`

	// status is what Orderly observed and decided.
	// +optional
	Status CanaryStatus `json:"status,omitempty,omitzero"`
}

// CanaryList is a list of Canaries.
// +kubebuilder:object:root=true
type CanaryList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the Canaries.
	Items []Canary `json:"items"`
}
