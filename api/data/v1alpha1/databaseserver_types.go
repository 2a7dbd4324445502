package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Engine is the kind of database server.
// +kubebuilder:validation:Enum=postgres;mysql
type Engine string

const (
	// EnginePostgres is PostgreSQL 13 or later.
	EnginePostgres Engine = "postgres"
	// EngineMySQL is MariaDB 10.5 or later, or MySQL 8.0 or later.
	EngineMySQL Engine = "mysql"
)

// SecretKeyDSN is the connection Secret's key, on mysql servers only, with a DSN in
// the form of Go's github.com/go-sql-driver/mysql
// (user:password@tcp(host:port)/database?tls=...).
const SecretKeyDSN = "dsn"

// DefaultPort is the port of a server of engine e whose spec.port is unset.
func DefaultPort(e Engine) int32 {
	if e == EngineMySQL {
		return 3306
	}
	return 5432
}

// SSLMode is how Orderly and the connection Secrets' URIs use TLS to the server,
// with libpq's meanings.
// +kubebuilder:validation:Enum=disable;allow;prefer;require;verify-ca;verify-full
type SSLMode string

// SecretReference names a Secret in Orderly's own namespace (orderly-system unless
// the manager runs elsewhere). Orderly reads the Secrets that a DatabaseServer names
// from there only, as cert-manager does for a ClusterIssuer: whoever may create a
// DatabaseServer cannot have Orderly read, and send to a host of their choosing, a
// Secret from any other namespace.
type SecretReference struct {
	// namespace of the Secret: unset, or the manager's namespace. Any other
	// namespace is refused with the condition Ready=False, reason
	// CredentialsNotAllowed, and the Secret is not read.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace,omitempty"`

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
	// reports TemplateInUse meanwhile. On mysql servers the template is a schema
	// whose tables (with their indexes and rows; not their foreign keys, views,
	// triggers or routines) are copied.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	Database string `json:"database"`
}

// DatabaseServerSpec registers a shared database server for DevDatabases.
// +kubebuilder:validation:XValidation:rule="!has(self.caSecretRef) || !has(self.sslMode) || self.sslMode == 'verify-full'",message="with caSecretRef, sslMode must be verify-full or unset: the CA is there to verify the server"
// +kubebuilder:validation:XValidation:rule="!has(self.engine) || self.engine != 'mysql' || !has(self.allowedExtensions) || size(self.allowedExtensions) == 0",message="allowedExtensions is for postgres servers: MySQL and MariaDB have no extensions"
type DatabaseServerSpec struct {
	// engine of the server: postgres (PostgreSQL 13 or later) or mysql (MariaDB 10.5
	// or later, MySQL 8.0 or later). Immutable: the databases already on a server
	// are the engine's, so a server of another engine is another DatabaseServer.
	// +optional
	// +kubebuilder:default=postgres
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="engine is immutable: create another DatabaseServer for a server of another engine"
	Engine Engine `json:"engine,omitempty"`

	// host name or IP address of the server, as reachable from Orderly and from the
	// workloads that use the connection Secrets.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Host string `json:"host"`

	// port of the server. Unset means the engine's usual port: 5432 for postgres,
	// 3306 for mysql.
	// +optional
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	Port int32 `json:"port,omitempty"`

	// sslMode is libpq's sslmode for Orderly's connections and the Secrets' URIs.
	// Unset means verify-full when caSecretRef is set, else prefer. Only verify-ca
	// and verify-full check the server's certificate; with any other mode the
	// condition TLSVerified is False, since prefer falls back to plaintext and
	// require accepts any certificate, so the admin password can be intercepted.
	// On mysql servers the same modes apply (disable is no TLS, allow and prefer
	// TLS when the server offers it, require TLS without checking the
	// certificate, verify-ca and verify-full TLS checked against caSecretRef or the
	// system's CAs, verify-full also checking the host name); the DSN in the Secret
	// says tls=false, preferred, skip-verify or true.
	// +optional
	SSLMode SSLMode `json:"sslMode,omitempty"`

	// adminCredentialsSecretRef names a Secret, in the manager's namespace, with the
	// keys username and password of a role that may create databases and roles
	// (CREATEDB and CREATEROLE, or superuser). On mysql servers: a user with ALL
	// PRIVILEGES ON *.* WITH GRANT OPTION (docs/devdatabase.md, "MySQL / MariaDB",
	// lists the narrower set that is enough).
	// +required
	AdminCredentialsSecretRef SecretReference `json:"adminCredentialsSecretRef"`

	// caSecretRef names a Secret, in the manager's namespace, whose key ca.crt holds
	// the PEM certificates of the authorities that sign the server's certificate.
	// With it Orderly connects with sslMode verify-full, and the connection Secrets
	// carry the same ca.crt.
	// +optional
	CASecretRef *SecretReference `json:"caSecretRef,omitempty"`

	// allowedNamespaces selects the namespaces whose DevDatabases may use this
	// server, by namespace labels. Unset allows every namespace; an empty selector
	// also allows every namespace.
	// +optional
	AllowedNamespaces *metav1.LabelSelector `json:"allowedNamespaces,omitempty"`

	// limits bounds how many DevDatabases the server holds.
	// +optional
	Limits DatabaseServerLimits `json:"limits,omitempty,omitzero"`

	// maxTTL is the longest a database on this server lives: a new DevDatabase
	// asking for a longer ttl is refused (TTLTooLong), and every database is dropped
	// at the latest at its DevDatabase's creation + maxTTL, whatever its ttl says
	// later. Lowering it shortens the life of the databases already there.
	// +optional
	// +kubebuilder:default="168h"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:XValidation:rule="duration(self) > duration('0s')",message="maxTTL must be positive"
	MaxTTL metav1.Duration `json:"maxTTL,omitempty,omitzero"`

	// allowedExtensions are the extensions DevDatabases on this server may ask for
	// (spec.extensions); unset or empty allows none. Orderly creates them as the
	// admin, once, when the database is created, in the schema "extensions", which
	// the database's role may use but not write. Allow only extensions whose install
	// scripts you trust to run as the admin.
	// +optional
	// +kubebuilder:validation:MaxItems=64
	// +listType=set
	// +kubebuilder:validation:items:Pattern=`^[a-z_][a-z0-9_-]{0,62}$`
	// +kubebuilder:validation:items:MaxLength=63
	AllowedExtensions []string `json:"allowedExtensions,omitempty"`

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
	// ConditionTLSVerified is True when Orderly's connections verify the server's
	// certificate (sslMode verify-ca or verify-full), False when they do not and the
	// admin password could be intercepted.
	ConditionTLSVerified = "TLSVerified"
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

	// systemIdentifier is the server's identity (PostgreSQL's system_identifier;
	// MySQL's @@server_uuid; on MariaDB, which has none, a UUID Orderly records in
	// its admin-only schema orderly on the server):
	// each DevDatabase records the one its database was created on, and Orderly
	// refuses to create or drop anything when the server answering is another one
	// (after a change of host). Empty when the admin may not read it.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SystemIdentifier string `json:"systemIdentifier,omitempty"`

	// databasesInUse is the number of databases on the server that Orderly created
	// for DevDatabases and that still exist.
	// +optional
	DatabasesInUse int32 `json:"databasesInUse,omitempty"`

	// lastCheckTime is when a check (every minute; every 15 s while unreachable) last
	// changed this status; checks that find nothing new are not written.
	// +optional
	LastCheckTime *metav1.Time `json:"lastCheckTime,omitempty"`

	// conditions: Ready, Reachable and TLSVerified.
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
	// metadata is the standard object metadata.
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
