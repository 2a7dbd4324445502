package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine is the kind of database server.
// +kubebuilder:validation:Enum=postgres
type Engine string

const (
	// EnginePostgres is PostgreSQL 13 or later.
	EnginePostgres Engine = "postgres"
)

// SSLMode is how Orderly and the connection Secrets' URIs use TLS to the server,
// with libpq's meanings.
// +kubebuilder:validation:Enum=disable;allow;prefer;require;verify-ca;verify-full
type SSLMode string

// SecretReference names a Secret in a namespace.
type SecretReference struct {
	// namespace of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`

	// name of the Secret.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// DatabaseServerLimits bounds how many DevDatabases a server holds.
type DatabaseServerLimits struct {
	// maxDatabases is the most DevDatabases the server holds at once; further ones
	// wait with the condition LimitExceeded. Unset means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxDatabases *int32 `json:"maxDatabases,omitempty"`

	// maxDatabasesPerNamespace is the most DevDatabases one namespace holds on the
	// server at once. Unset means no limit.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MaxDatabasesPerNamespace *int32 `json:"maxDatabasesPerNamespace,omitempty"`
}

// DatabaseTemplate is an existing database on the server that DevDatabases may clone.
type DatabaseTemplate struct {
	// name by which DevDatabases refer to the template (spec.template).
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// database is the name of the database on the server to clone. While it is
	// cloned nobody may be connected to it (a PostgreSQL rule); Orderly retries and
	// reports TemplateInUse meanwhile.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Database string `json:"database"`
}

// DatabaseServerSpec registers a shared database server for DevDatabases.
type DatabaseServerSpec struct {
	// engine of the server: postgres.
	// +optional
	// +kubebuilder:default=postgres
	Engine Engine `json:"engine,omitempty"`

	// host name or IP address of the server, as reachable from Orderly and from the
	// workloads that use the connection Secrets.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`

	// port of the server.
	// +optional
	// +kubebuilder:default=5432
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// sslMode is libpq's sslmode for Orderly's connections and the Secrets' URIs.
	// +optional
	// +kubebuilder:default=prefer
	SSLMode SSLMode `json:"sslMode,omitempty"`

	// adminCredentialsSecretRef names a Secret with the keys username and password of
	// a role that may create databases and roles (CREATEDB and CREATEROLE, or superuser).
	// +required
	AdminCredentialsSecretRef SecretReference `json:"adminCredentialsSecretRef"`

	// allowedNamespaces selects the namespaces whose DevDatabases may use this
	// server, by namespace labels. Unset allows every namespace; an empty selector
	// also allows every namespace.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`

	// limits bounds how many DevDatabases the server holds.
	// +optional
	Limits DatabaseServerLimits `json:"limits,omitempty,omitzero"`

	// maxTTL is the longest ttl a DevDatabase on this server may ask for.
	// +optional
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxTTL must be positive"
	MaxTTL metav1.Duration `json:"maxTTL,omitempty,omitzero"`

	// templates are existing databases that DevDatabases may clone.
	// +optional
	// +kubebuilder:validation:MaxItems=32
	// +listType=map
	// +listMapKey=name
	Templates []DatabaseTemplate `json:"templates,omitempty"`
}

// Condition types of a DatabaseServer.
const (
	// ConditionReachable is True when Orderly connected and logged in as the admin.
	ConditionReachable = "Reachable"
)

// DatabaseServerStatus is the observed state of a DatabaseServer.
type DatabaseServerStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// reachable is true when Orderly last connected and logged in successfully.
	// +optional
	Reachable bool `json:"reachable,omitempty"`

	// serverVersion is the version the server reports (server_version).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	ServerVersion string `json:"serverVersion,omitempty"`

	// databasesInUse is the number of databases on the server that Orderly created
	// for DevDatabases and that still exist.
	// +optional
	DatabasesInUse int32 `json:"databasesInUse,omitempty"`

	// lastCheckTime is when a check (every minute; every 15 s while unreachable) last
	// changed this status; checks that find nothing new are not written.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// conditions: Ready and Reachable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DatabaseServer registers a shared database server on which developers get
// DevDatabases.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=dbs,categories=orderly
// +kubebuilder:printcolumn:name="Engine",type=string,JSONPath=`.spec.engine`
// +kubebuilder:printcolumn:name="Host",type=string,JSONPath=`.spec.host`
// +kubebuilder:printcolumn:name="Version",type=string,JSONPath=`.status.serverVersion`
// +kubebuilder:printcolumn:name="In Use",type=integer,JSONPath=`.status.databasesInUse`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DatabaseServer struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec is the server and its rules.
	// +required
	Spec DatabaseServerSpec `json:"spec"`

	// status is what Orderly observed.
	// +optional
	Status DatabaseServerStatus `json:"status,omitempty,omitzero"`
}

// DatabaseServerList is a list of DatabaseServers.
// +kubebuilder:object:root=true
type DatabaseServerList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the DatabaseServers.
	Items []DatabaseServer `json:"items"`
}
