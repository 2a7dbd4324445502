package v1beta1

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

// DevDatabaseUserLabel, on an extra user's connection Secret, names the user
// (spec.users[].name).
const DevDatabaseUserLabel = "data.orderly.dev/devdatabase-user"

// Limits of what a DevDatabase may ask for.
const (
	// MaxInitSQLBytes is the most SQL spec.init may run: 256 KiB.
	MaxInitSQLBytes = 256 << 10
	// MaxSecretTemplateBytes is the most one spec.secretTemplate value may hold.
	MaxSecretTemplateBytes = 4096
)

// UserAccess is what an extra user may do in the database.
// +kubebuilder:validation:Enum=ReadOnly;ReadWrite
type UserAccess string

const (
	// UserAccessReadOnly: connect, use the schemas, SELECT every table, present and
	// future (tables the database's role creates later included).
	UserAccessReadOnly UserAccess = "ReadOnly"
	// UserAccessReadWrite: ReadOnly plus INSERT, UPDATE and DELETE on every table and
	// use of every sequence, present and future. No DDL: the schema stays the
	// database role's.
	UserAccessReadWrite UserAccess = "ReadWrite"
)

// DevDatabaseUser is an extra login role of the database, with its own Secret.
type DevDatabaseUser struct {
	// name of the user: lower-case letters, digits and '-', starting with a letter, at
	// most 16 characters. Its login role is orderly_<uid>_<name> ('-' becomes '_');
	// on mysql servers, whose user names have at most 32 characters,
	// ou_<12 hex digits of the SHA-256 of the uid>_<name>. Its Secret is
	// <secretName>-<name>.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:Pattern=`^[a-z]([-a-z0-9]*[a-z0-9])?$`
	Name string `json:"name"`

	// access is ReadOnly (SELECT) or ReadWrite (SELECT, INSERT, UPDATE, DELETE), on
	// every table of the database, present and future (on mysql servers a grant on
	// the database, with SHOW VIEW).
	// +required
	Access UserAccess `json:"access"`
}

// ConfigMapKeyReference names one key of a ConfigMap in the DevDatabase's namespace.
type ConfigMapKeyReference struct {
	// name of the ConfigMap, in the DevDatabase's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// key of the ConfigMap whose value is the SQL.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[-._a-zA-Z0-9]+$`
	Key string `json:"key"`
}

// DevDatabaseInit is SQL run once in a new database.
type DevDatabaseInit struct {
	// configMapRef names the ConfigMap key (in the DevDatabase's namespace) that holds
	// the SQL: at most 256 KiB, run once, after the database is created, as the
	// database's own role (never as the server's admin), in one transaction with the
	// server's statement_timeout. On mysql servers DDL and account statements
	// (CREATE TABLE, GRANT, ...) commit implicitly, so a failed run keeps what ran up
	// to the last of them before the failure; the rest is rolled back.
	// +required
	ConfigMapRef ConfigMapKeyReference `json:"configMapRef"`
}

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
// +kubebuilder:validation:XValidation:rule="has(self.init) == has(oldSelf.init) && (!has(self.init) || self.init == oldSelf.init)",message="init cannot be changed: it runs once, when the database is created; create a new DevDatabase"
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
	// +kubebuilder:validation:items:MaxLength=63
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

	// users are extra login roles of the database, each with its own generated
	// password and its own connection Secret <secretName>-<name> (the same keys as
	// the main Secret). A user removed from the list is dropped and its Secret
	// deleted; all are dropped with the database.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Users []DevDatabaseUser `json:"users,omitempty"`

	// secretTemplate adds keys to the connection Secret(s): each value is a Go
	// text/template over .Host, .Port, .Database, .Username and .Password (those of
	// the Secret's own role), with text/template's built-in functions only (urlquery
	// escapes for URLs), e.g. DATABASE_URL:
	// "postgres://{{urlquery .Username}}:{{urlquery .Password}}@{{.Host}}:{{.Port}}/{{.Database}}".
	// Keys are Secret keys other than the standard ones (host, port, database,
	// username, password, uri, jdbcUrl, ca.crt); a value is at most 4096 bytes. A
	// template that does not parse is reported (Ready=False, reason
	// InvalidSecretTemplate) and nothing of it is written.
	// +optional
	// +kubebuilder:validation:MaxProperties=16
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(k) <= 253 && k.matches('^[-._a-zA-Z0-9]+$'))",message="secretTemplate keys must be Secret keys: letters, digits, '-', '_' and '.'"
	// +kubebuilder:validation:XValidation:rule="self.all(k, !(k in ['host', 'port', 'database', 'username', 'password', 'uri', 'jdbcUrl', 'ca.crt']))",message="secretTemplate cannot replace the standard keys host, port, database, username, password, uri, jdbcUrl and ca.crt"
	// +kubebuilder:validation:XValidation:rule="self.all(k, size(self[k]) <= 4096)",message="each secretTemplate value is at most 4096 bytes"
	SecretTemplate map[string]string `json:"secretTemplate,omitempty"`

	// init runs SQL from a ConfigMap once, when the database is new (a schema,
	// fixtures). It never runs again, not even after a restart of Orderly; its result
	// is in status.init and the condition Initialized. Cannot be changed.
	// +optional
	Init *DevDatabaseInit `json:"init,omitempty"`

	// deletionProtected, when true, makes the API server refuse to delete this
	// DevDatabase (and so its namespace's deletion waits) until it is set to false
	// again. It does not stop the ttl: extend it to keep the database longer.
	// +optional
	DeletionProtected bool `json:"deletionProtected,omitempty"`
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
	// ConditionInitialized says whether spec.init's SQL ran: True (InitSucceeded),
	// False (InitFailed, InitPending, InitSourceNotFound, ...). Absent without init.
	ConditionInitialized = "Initialized"
)

// InitState is where spec.init's one run stands.
// +kubebuilder:validation:Enum=Running;Succeeded;Failed
type InitState string

// Values of InitState.
const (
	// InitRunning: the SQL's transaction has begun and its outcome is not yet
	// recorded. After a restart Orderly asks the server whether that transaction
	// committed, and never runs the SQL a second time.
	InitRunning InitState = "Running"
	// InitSucceededState: the SQL committed.
	InitSucceededState InitState = "Succeeded"
	// InitFailedState: the SQL failed and was rolled back (on mysql servers, but for
	// what MySQL committed implicitly before the failure); it is not run again.
	InitFailedState InitState = "Failed"
)

// DevDatabaseInitStatus records spec.init's one run.
type DevDatabaseInitStatus struct {
	// state: Running, Succeeded or Failed.
	// +optional
	State InitState `json:"state,omitempty"`
	// configMap and key are where the SQL was read from.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	ConfigMap string `json:"configMap,omitempty"`
	// +optional
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key,omitempty"`
	// resourceVersion of the ConfigMap the SQL was read from.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	ResourceVersion string `json:"resourceVersion,omitempty"`
	// sha256 of the SQL that ran, in hex.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256,omitempty"`
	// transaction is the server's identifier of the SQL's transaction (on mysql
	// servers its session's CONNECTION_ID()), recorded before the SQL runs, so that
	// its outcome can be asked after a restart.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Transaction string `json:"transaction,omitempty"`
	// message says how the run ended: the server's error when it failed (never a
	// password).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// startedAt and finishedAt bound the run.
	// +optional
	StartedAt *metav1.Time `json:"startedAt,omitempty"`
	// +optional
	FinishedAt *metav1.Time `json:"finishedAt,omitempty"`
}

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

	// users are the login roles of spec.users that exist, with their Secrets.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=8
	Users []DevDatabaseUserStatus `json:"users,omitempty"`

	// init records the one run of spec.init's SQL.
	// +optional
	Init *DevDatabaseInitStatus `json:"init,omitempty"`

	// conditions: Ready, ServerReachable, ExpiringSoon, TTLCapped and Initialized.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DevDatabaseUserStatus is one extra user as it exists.
type DevDatabaseUserStatus struct {
	// name is spec.users[].name.
	// +required
	// +kubebuilder:validation:MaxLength=16
	Name string `json:"name"`
	// role is the user's login role.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	Role string `json:"role,omitempty"`
	// access the role has.
	// +optional
	Access UserAccess `json:"access,omitempty"`
	// secretName is the user's connection Secret.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	SecretName string `json:"secretName,omitempty"`
}

// DevDatabase is an isolated, short-lived database with its own login role on a
// DatabaseServer, with a connection Secret in the same namespace.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=devdb,categories=orderly
// +kubebuilder:validation:XValidation:rule="!has(self.spec.users) || size(self.spec.users) == 0 || size(has(self.spec.secretName) ? self.spec.secretName : self.metadata.name) <= 236",message="with spec.users, the Secret name (spec.secretName, or the DevDatabase's name) is at most 236 characters, so that <secretName>-<user> is a valid name"
// +kubebuilder:printcolumn:name="Server",type=string,JSONPath=`.spec.serverRef`
// +kubebuilder:printcolumn:name="Phase",type=string,JSONPath=`.status.phase`
// +kubebuilder:printcolumn:name="Expires",type=string,JSONPath=`.status.expiresAt`
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.status.secretName`,priority=1
// +kubebuilder:printcolumn:name="Database",type=string,JSONPath=`.status.database`,priority=1
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type DevDatabase struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
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
