package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// LabelValue is one value of a LabelValueSet.
type LabelValue struct {
	// value is the label value, e.g. cc-1234.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$`
	Value string `json:"value"`

	// active is false for a retired value: refused for new workloads, reported for the
	// ones running with it.
	// +optional
	// +kubebuilder:default=true
	Active *bool `json:"active,omitempty"`

	// expires retires the value at that time, as active: false would. Unset: never.
	// +optional
	Expires *metav1.Time `json:"expires,omitempty"`

	// description says what the value stands for (a team, a budget), for people.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Description string `json:"description,omitempty"`
}

// LabelValueSetSpec is a list of label values kept by whoever owns them (finance for
// cost centres).
type LabelValueSetSpec struct {
	// values are the values, each listed once.
	// +required
	// +kubebuilder:validation:MinItems=1
	// +kubebuilder:validation:MaxItems=1024
	// +listType=map
	// +listMapKey=value
	Values []LabelValue `json:"values"`
}

// LabelValueSetConditionReady is the LabelValueSet's Ready condition: True while at
// least one value is allowed.
const LabelValueSetConditionReady = "Ready"

// LabelValueSetStatus is what Orderly observed of the set.
type LabelValueSetStatus struct {
	// conditions: Ready (True while at least one value is allowed; NoActiveValue when
	// every value is retired or expired), with a reason.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// observedGeneration is the generation the status was computed for.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// active is how many values are allowed now.
	// +optional
	Active int32 `json:"active,omitempty"`
	// retired is how many values are listed but not allowed: active: false, or
	// expired.
	// +optional
	Retired int32 `json:"retired,omitempty"`
	// nextExpiry is when the next value still allowed expires; unset when none will.
	// +optional
	NextExpiry *metav1.Time `json:"nextExpiry,omitempty"`
}

// LabelValueSet is a cluster-wide list of the values a label may take, such as the
// cost centres finance keeps, each active or retired. A LabelPolicy refers to it with
// spec.allowedValuesFrom; the API server reads it as the parameter of the generated
// ValidatingAdmissionPolicy, so editing the list changes what is admitted without a
// policy edit.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=lvs,categories=orderly
// +kubebuilder:printcolumn:name="Active",type=integer,JSONPath=`.status.active`
// +kubebuilder:printcolumn:name="Retired",type=integer,JSONPath=`.status.retired`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Next expiry",type=date,JSONPath=`.status.nextExpiry`,priority=1
// +kubebuilder:printcolumn:name="Values",type=integer,JSONPath=`.spec.values.size()`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type LabelValueSet struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the list of values.
	// +required
	Spec LabelValueSetSpec `json:"spec"`
	// status counts the values allowed and retired now.
	// +optional
	Status LabelValueSetStatus `json:"status,omitempty"`
}

// LabelValueSetList is a list of LabelValueSets.
// +kubebuilder:object:root=true
type LabelValueSetList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the LabelValueSets.
	Items []LabelValueSet `json:"items"`
}
