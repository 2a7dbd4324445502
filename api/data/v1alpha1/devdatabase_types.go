package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Labels and annotations Orderly puts on what it creates for a DevDatabase.
const (
	// DevDatabaseLabel names the DevDatabase a connection Secret belongs to.
	DevDatabaseLabel = "data.orderly.dev/devdatabase"
	// AbandonAnnotation, set to "true" on a DevDatabase being deleted, lets its
	// finalizer go when its database cannot be dropped (the server is gone for good,
	// or now answers as another server): the database and role are left on the
	// server, and a Warning Event (Abandoned) says so.
	AbandonAnnotation = "data.orderly.dev/abandon"
)

// Keys of the connection Secret.
const (
	SecretKeyHost     = "host"
	SecretKeyPort     = "port"
	SecretKeyDatabase = "database"
	SecretKeyUsername = "username"
	SecretKeyPassword = "password"
	SecretKeyURI      = "uri"
	SecretKeyJDBCURL  = "jdbcUrl"
	// SecretKeyCACert holds the server's CA certificates when its DatabaseServer has
	// a caSecretRef (sslmode verify-full in the URIs).
	SecretKeyCACert = "ca.crt"
)

// DatabaseDeletionPolicy says what happens to the database when the DevDatabase
// expires or is deleted.
// +kubebuilder:validation:Enum=Delete;Retain
type DatabaseDeletionPolicy string

const (
	// DatabaseDeletionPolicyDelete terminates connections and drops the database and
	// its role.
	DatabaseDeletionPolicyDelete DatabaseDeletionPolicy = "Delete"
	// DatabaseDeletionPolicyRetain keeps the database (handed to the admin role) and
	// removes only the login role and the Secret.
	DatabaseDeletionPolicyRetain DatabaseDeletionPolicy = "Retain"
)

// DevDatabaseSpec asks for an isolated database on a DatabaseServer.
// +kubebuilder:validation:XValidation:rule="has(self.extensions) == has(oldSelf.extensions) && (!has(self.extensions) || self.extensions == oldSelf.extensions)",message="extensions cannot be changed: they are created with the database; create a new DevDatabase"
type DevDatabaseSpec struct {
	// serverRef is the name of the DatabaseServer to create the database on.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="serverRef cannot be changed: create a new DevDatabase"
	ServerRef string `json:"serverRef"`

	// template is the name of one of the server's spec.templates to clone; unset
	// creates an empty database.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="template cannot be changed: create a new DevDatabase"
	Template string `json:"template,omitempty"`

	// ttl is how long the database lives, counted from the DevDatabase's creation.
	// Raise it (or run `orderly db extend`) to keep the database longer. The
	// server's spec.maxTTL is the most allowed: a new DevDatabase asking for more is
	// refused (TTLTooLong), and one whose ttl is raised past it still expires at
	// creation + maxTTL (condition TTLCapped).
	// +optional
	// +kubebuilder:default="24h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="ttl must be positive"
	TTL metav1.Duration `json:"ttl,omitempty,omitzero"`

	// extensions are created (CREATE EXTENSION) by the admin role when the database
	// is created, in the schema "extensions", which the database's role may use but
	// not write. Each must be in the server's spec.allowedExtensions. They cannot be
	// changed afterwards.
	// +optional
	// +kubebuilder:validation:MaxItems=16
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[a-z_][a-z0-9_-]{0,62}$`
	Extensions []string `json:"extensions,omitempty"`

	// secretName is the name of the connection Secret in the DevDatabase's
	// namespace; default the DevDatabase's name.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$`
	SecretName string `json:"secretName,omitempty"`

	// deletionPolicy is Delete (default: drop the database and its role on expiry or
	// deletion) or Retain (keep the database, remove only the role and the Secret).
	// +optional
	// +kubebuilder:default=Delete
	DeletionPolicy DatabaseDeletionPolicy `json:"deletionPolicy,omitempty"`
}

// DevDatabasePhase is a one-word summary of a DevDatabase.
// +kubebuilder:validation:Enum=Pending;Ready;Expired;Deleting;Failed
type DevDatabasePhase string

// Values of DevDatabasePhase.
const (
	// PhasePending: waiting (for the server, a limit, the template) or being created.
	PhasePending DevDatabasePhase = "Pending"
	// PhaseReady: the database, its role and the Secret exist.
	PhaseReady DevDatabasePhase = "Ready"
	// PhaseExpired: the ttl ran out and the database was dropped (or retained).
	PhaseExpired DevDatabasePhase = "Expired"
	// PhaseDeleting: the DevDatabase is being deleted.
	PhaseDeleting DevDatabasePhase = "Deleting"
	// PhaseFailed: the request cannot be served as written; see the Ready condition.
	PhaseFailed DevDatabasePhase = "Failed"
)

// Condition types of a DevDatabase.
const (
	// ConditionReady is True when the database, its role and the Secret exist.
	ConditionReady = "Ready"
	// ConditionServerReachable is False when the server could not be reached.
	ConditionServerReachable = "ServerReachable"
	// ConditionExpiringSoon is True shortly before the database expires.
	ConditionExpiringSoon = "ExpiringSoon"
	// ConditionTTLCapped is True when spec.ttl is longer than the server's maxTTL, so
	// that the database expires at creation + maxTTL instead.
	ConditionTTLCapped = "TTLCapped"
)

// DevDatabaseStatus is the observed state of a DevDatabase.
type DevDatabaseStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// phase: Pending, Ready, Expired, Deleting or Failed.
	// +optional
	Phase DevDatabasePhase `json:"phase,omitempty"`

	// database is the name of the database on the server.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Database string `json:"database,omitempty"`

	// role is the name of the database's login role.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Role string `json:"role,omitempty"`

	// secretName is the connection Secret in this namespace.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`

	// expiresAt is when the database is dropped: creation time plus ttl, or plus
	// the server's maxTTL when that is shorter.
	// +optional
	ExpiresAt *metav1.Time `json:"expiresAt,omitempty"`

	// serverIdentity is the identity (system_identifier) of the server the database
	// was created on. Orderly neither creates nor drops anything on a server that
	// answers with another identity. Empty while no database exists, or when the
	// admin may not read the identity.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ServerIdentity string `json:"serverIdentity,omitempty"`

	// conditions: Ready, ServerReachable, ExpiringSoon and TTLCapped.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DevDatabase is an isolated, short-lived database with its own login role on a
// DatabaseServer, with a connection Secret in the same namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=devdb,categories=orderly
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.serverRef`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretName`,priority=1
// +kubebuilder:printcolumn:name="Database",type=string,JSONPath=`.status.database`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DevDatabase struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the database asked for.
	// +required
	Spec DevDatabaseSpec `json:"spec"`

	// status is what Orderly observed.
	// +optional
	Status DevDatabaseStatus `json:"status,omitempty,omitzero"`
}

// DevDatabaseList is a list of DevDatabases.
// +kubebuilder:object:root=true
type DevDatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the DevDatabases.
	Items []DevDatabase `json:"items"`
}
