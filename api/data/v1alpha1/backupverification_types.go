package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// BackupVerificationLabel names the BackupVerification an object belongs to.
const BackupVerificationLabel = "data.orderly.dev/backupverification"

// Keys of a BackupVerification's credentials Secret.
const (
	// S3AccessKeyIDKey holds the access key id.
	S3AccessKeyIDKey = "accessKeyID"
	// S3SecretAccessKeyKey holds the secret access key.
	S3SecretAccessKeyKey = "secretAccessKey"
	// S3SessionTokenKey optionally holds a session token (temporary credentials).
	S3SessionTokenKey = "sessionToken"
	// CACertKey holds PEM certificates in a CA Secret.
	CACertKey = "ca.crt"
)

// MaxBackupVerificationHistory is how many past runs status.history keeps.
const MaxBackupVerificationHistory = 10

// LocalSecretKeyReference names a Secret in the object's own namespace (never
// another one: a BackupVerification cannot make Orderly read another team's Secret).
type LocalSecretKeyReference struct {
	// name of the Secret, in the BackupVerification's namespace.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
}

// S3BackupSource is a prefix of an S3-compatible bucket holding logical dumps.
// +kubebuilder:validation:XValidation:rule="self.endpoint.startsWith('https://') || (has(self.insecure) && self.insecure)",message="endpoint must be https:// (set insecure: true to send the credentials over plain http, e.g. to a store on loopback)"
type S3BackupSource struct {
	// endpoint is the store's URL, https://host[:port] (http:// only with insecure).
	// Requests use path-style addressing (https://host/bucket/key), which every
	// S3-compatible store serves.
	// +required
	// +kubebuilder:validation:MinLength=8
	// +kubebuilder:validation:MaxLength=512
	// +kubebuilder:validation:Pattern=`^https?://[^/?#\s]+/?$`
	Endpoint string `json:"endpoint"`

	// insecure allows an http:// endpoint, over which the credentials' signatures
	// and the dumps travel unencrypted.
	// +optional
	Insecure bool `json:"insecure,omitempty"`

	// bucket holding the dumps. Orderly only reads it (list and get); it never
	// writes to it.
	// +required
	// +kubebuilder:validation:MinLength=3
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9][a-z0-9.-]*[a-z0-9]$`
	Bucket string `json:"bucket"`

	// prefix under which the dumps are, e.g. "nightly/orders/". Empty for the whole
	// bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Prefix string `json:"prefix,omitempty"`

	// region of the bucket; us-east-1 when unset (most S3-compatible stores ignore it).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:Pattern=`^[a-z0-9-]+$`
	Region string `json:"region,omitempty"`

	// credentialsSecretRef names a Secret in this namespace with the keys
	// accessKeyID and secretAccessKey (and optionally sessionToken). Read-only
	// credentials are enough, and recommended.
	// +required
	CredentialsSecretRef LocalSecretKeyReference `json:"credentialsSecretRef"`

	// caSecretRef names a Secret in this namespace whose key ca.crt holds the PEM
	// certificates that sign the endpoint's certificate; the system's roots when unset.
	// +optional
	CASecretRef *LocalSecretKeyReference `json:"caSecretRef,omitempty"`

	// keyPattern is a regular expression (RE2) that keys under the prefix must
	// match to count as dumps (other objects, such as .sha256 files, are ignored).
	// When it has a group named ts (e.g. `orders-(?P<ts>\d{8}T\d{6}Z)\.dump\.gz$`), the
	// newest dump is the one with the greatest ts (compared as text, so use a
	// sortable format), else the one last modified. Unset: every key not ending in
	// .sha256, newest by last modification.
	// +optional
	// +kubebuilder:validation:MaxLength=256
	KeyPattern string `json:"keyPattern,omitempty"`
}

// BackupSource says where the backups are. Exactly one kind is set.
// +kubebuilder:validation:XValidation:rule="has(self.s3)",message="source needs exactly one kind; the only kind so far is s3"
// +kubebuilder:validation:MinProperties=1
type BackupSource struct {
	// s3: pg_dump dumps (custom or plain format, each optionally gzip-compressed;
	// told apart by their first bytes) in an S3-compatible bucket. An object
	// <key>.sha256 beside a dump, when present, holds its SHA-256 (hex, as
	// sha256sum writes it), which is verified.
	// +optional
	S3 *S3BackupSource `json:"s3,omitempty"`
}

// BackupSchedule is a cron schedule in a time zone.
type BackupSchedule struct {
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

// BackupTarget is where the throwaway database of each run is created.
type BackupTarget struct {
	// serverRef is the name of a DatabaseServer whose allowedNamespaces admit this
	// namespace. Each run creates a database (and a login role) there, restores
	// into it as that role, never as the admin, and drops both afterwards. Never
	// point this at the production server the dumps come from.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	ServerRef string `json:"serverRef"`
}

// SQLCheck is a query whose single value is compared with what is expected.
// +kubebuilder:validation:XValidation:rule="has(self.expect) != (has(self.min) || has(self.max))",message="a SQL check needs either expect, or min and/or max, not both"
type SQLCheck struct {
	// name of the check, unique among the checks, shown in status.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=63
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9_]*[a-z0-9])?$`
	Name string `json:"name"`
	// query returns one row of one column. It runs read-only in the restored
	// database, as the run's throwaway role, with a statement timeout.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=4096
	Query string `json:"query"`
	// expect is the exact value (as PostgreSQL prints it as text; NULL is "").
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Expect *string `json:"expect,omitempty"`
	// min is the smallest number the value may be (a decimal, e.g. "1000" or "0.5").
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	Min *string `json:"min,omitempty"`
	// max is the greatest number the value may be.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	// +kubebuilder:validation:Pattern=`^-?[0-9]+(\.[0-9]+)?$`
	Max *string `json:"max,omitempty"`
}

// TableCheck requires a table and a minimum number of rows in it.
type TableCheck struct {
	// name of the table, schema-qualified ("sales.orders"); public when the schema
	// is left out.
	// +required
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=127
	// +kubebuilder:validation:Pattern=`^([A-Za-z_][A-Za-z0-9_$]*\.)?[A-Za-z_][A-Za-z0-9_$]*$`
	Name string `json:"name"`
	// minRows is the fewest rows the table may have (exact count); 0 only requires
	// the table to exist.
	// +optional
	// +kubebuilder:validation:Minimum=0
	MinRows int64 `json:"minRows,omitempty"`
}

// BackupChecks are what a restored backup must satisfy.
type BackupChecks struct {
	// sql checks, run in order after the restore.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=32
	SQL []SQLCheck `json:"sql,omitempty"`
	// tables that must exist, with their minimum row counts.
	// +optional
	// +listType=map
	// +listMapKey=name
	// +kubebuilder:validation:MaxItems=64
	Tables []TableCheck `json:"tables,omitempty"`
	// requiredSchemas must exist in the restored database.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=63
	// +kubebuilder:validation:items:Pattern=`^[A-Za-z_][A-Za-z0-9_$]*$`
	RequiredSchemas []string `json:"requiredSchemas,omitempty"`
}

// BackupSelection says which backup a run verifies.
// +kubebuilder:validation:Enum=latest;latestPassed
type BackupSelection string

const (
	// SelectionLatest: every run restores the newest backup, even one that already
	// passed.
	SelectionLatest BackupSelection = "latest"
	// SelectionLatestPassed: a run restores the newest backup unless it is the one
	// that passed last (same key and ETag), in which case the run passes without
	// restoring again; Ready says whether the newest passed backup is within maxAge.
	SelectionLatestPassed BackupSelection = "latestPassed"
)

// BackupVerificationSpec declares which backups are restored, where, when and
// checked how.
type BackupVerificationSpec struct {
	// source of the backups; read-only.
	// +required
	Source BackupSource `json:"source"`

	// schedule runs a verification at the times of a cron expression. Unset: only
	// when the object is created and when verifyNow changes.
	// +optional
	Schedule *BackupSchedule `json:"schedule,omitempty"`

	// verifyNow, set to a new value (any token, e.g. a timestamp), runs a
	// verification now; status.lastVerifyNow records the token handled.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	VerifyNow string `json:"verifyNow,omitempty"`

	// target is the DatabaseServer on which each run's throwaway database lives.
	// +required
	Target BackupTarget `json:"target"`

	// checks the restored database must pass. With none, a restore that succeeds is
	// the whole verification.
	// +optional
	Checks BackupChecks `json:"checks,omitempty,omitzero"`

	// maxRestoreDuration bounds the restore: past it the restore is stopped and the
	// run fails (RestoreTooSlow). Default 30m.
	// +optional
	// +kubebuilder:default="30m"
	MaxRestoreDuration metav1.Duration `json:"maxRestoreDuration,omitempty"`

	// selection is latest (default) or latestPassed.
	// +optional
	// +kubebuilder:default=latest
	Selection BackupSelection `json:"selection,omitempty"`

	// maxAge fails a run, without restoring, when the newest backup is older than
	// this (e.g. 26h for nightly dumps). Unset: no limit.
	// +optional
	MaxAge *metav1.Duration `json:"maxAge,omitempty"`
}

// BackupRunResult is the verdict of one run.
// +kubebuilder:validation:Enum=Passed;Failed;Error
type BackupRunResult string

const (
	// RunPassed: the backup was restored within maxRestoreDuration and every check passed.
	RunPassed BackupRunResult = "Passed"
	// RunFailed: the backup is not good: corrupt, truncated, checksum mismatch,
	// too old, too slow to restore, or a check failed.
	RunFailed BackupRunResult = "Failed"
	// RunError: the run could not judge the backup (bucket missing, bad
	// credentials, no backup, target server unavailable); retried with backoff.
	RunError BackupRunResult = "Error"
)

// BackupObject is the backup a run looked at.
type BackupObject struct {
	// key of the object in the bucket.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key,omitempty"`
	// etag the store reports for it.
	// +optional
	// +kubebuilder:validation:MaxLength=128
	ETag string `json:"etag,omitempty"`
	// sizeBytes of the object as stored.
	// +optional
	SizeBytes int64 `json:"sizeBytes,omitempty"`
	// lastModified is when the store says it was written.
	// +optional
	LastModified *metav1.Time `json:"lastModified,omitempty"`
	// age of the backup when the run started.
	// +optional
	Age *metav1.Duration `json:"age,omitempty"`
	// sha256 of the bytes read (hex), computed while restoring.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	SHA256 string `json:"sha256,omitempty"`
	// checksumVerified is true when a <key>.sha256 object was found and matched.
	// +optional
	ChecksumVerified bool `json:"checksumVerified,omitempty"`
	// format of the dump: custom or plain, with +gzip when compressed.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Format string `json:"format,omitempty"`
}

// BackupCheckResult is one check's outcome.
type BackupCheckResult struct {
	// name of the check: the SQL check's name, table/<name> or schema/<name>.
	// +required
	// +kubebuilder:validation:MaxLength=200
	Name string `json:"name"`
	// passed is true when the check held.
	// +required
	Passed bool `json:"passed"`
	// value the check observed (the query's value, the row count).
	// +optional
	// +kubebuilder:validation:MaxLength=256
	Value string `json:"value,omitempty"`
	// message says what was expected, or why the check could not run.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	Message string `json:"message,omitempty"`
}

// BackupRun is one verification.
type BackupRun struct {
	// number of the run, counting from 1.
	// +required
	Number int64 `json:"number"`
	// trigger: Initial, Schedule or VerifyNow.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Trigger string `json:"trigger,omitempty"`
	// startTime of the run.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// completionTime of the run.
	// +optional
	CompletionTime *metav1.Time `json:"completionTime,omitempty"`
	// result: Passed, Failed or Error.
	// +optional
	Result BackupRunResult `json:"result,omitempty"`
	// reason in CamelCase (Passed, ChecksumMismatch, RestoreFailed, RestoreTooSlow,
	// CheckFailed, BackupTooOld, NoBackup, BucketNotFound, AccessDenied, ...).
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// message says what happened, and what to do about it.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// backup the run verified.
	// +optional
	Backup *BackupObject `json:"backup,omitempty"`
	// restoreDuration is how long the restore took.
	// +optional
	RestoreDuration *metav1.Duration `json:"restoreDuration,omitempty"`
	// checks are each check's outcome.
	// +optional
	// +kubebuilder:validation:MaxItems=128
	// +listType=atomic
	Checks []BackupCheckResult `json:"checks,omitempty"`
}

// BackupRunSummary is a past run, in brief.
type BackupRunSummary struct {
	// number of the run.
	// +required
	Number int64 `json:"number"`
	// startTime of the run.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
	// result of the run.
	// +optional
	Result BackupRunResult `json:"result,omitempty"`
	// reason of the result.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	Reason string `json:"reason,omitempty"`
	// key of the backup.
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Key string `json:"key,omitempty"`
	// restoreDuration of the run.
	// +optional
	RestoreDuration *metav1.Duration `json:"restoreDuration,omitempty"`
}

// BackupRunInProgress records a run's throwaway database before it is created, so
// that a manager that crashes mid-run drops it after its restart.
type BackupRunInProgress struct {
	// number of the run.
	// +required
	Number int64 `json:"number"`
	// trigger of the run.
	// +optional
	// +kubebuilder:validation:MaxLength=32
	Trigger string `json:"trigger,omitempty"`
	// serverRef is the DatabaseServer the database is on.
	// +required
	// +kubebuilder:validation:MaxLength=253
	ServerRef string `json:"serverRef"`
	// database is the throwaway database's name.
	// +required
	// +kubebuilder:validation:MaxLength=63
	Database string `json:"database"`
	// startTime of the run.
	// +optional
	StartTime *metav1.Time `json:"startTime,omitempty"`
}

// Condition types of a BackupVerification.
const (
	// ConditionVerified: the last run passed.
	ConditionVerified = "Verified"
	// ConditionSourceAvailable: the source could be listed and read.
	ConditionSourceAvailable = "SourceAvailable"
)

// BackupVerificationStatus is what the verifications found.
type BackupVerificationStatus struct {
	// observedGeneration is the generation of the spec this status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// runs counts the runs started.
	// +optional
	Runs int64 `json:"runs,omitempty"`

	// currentRun is the run in progress: its throwaway database is recorded here
	// before it is created and removed from here after it is dropped.
	// +optional
	CurrentRun *BackupRunInProgress `json:"currentRun,omitempty"`

	// lastRun is the last finished run, with its evidence.
	// +optional
	LastRun *BackupRun `json:"lastRun,omitempty"`

	// lastSuccessTime is when a run last passed.
	// +optional
	LastSuccessTime *metav1.Time `json:"lastSuccessTime,omitempty"`

	// lastPassedBackup is the backup that passed last.
	// +optional
	LastPassedBackup *BackupObject `json:"lastPassedBackup,omitempty"`

	// consecutiveFailures counts the runs since the last one that passed.
	// +optional
	ConsecutiveFailures int32 `json:"consecutiveFailures,omitempty"`

	// nextRunTime is when the schedule runs next.
	// +optional
	NextRunTime *metav1.Time `json:"nextRunTime,omitempty"`

	// lastVerifyNow is the spec.verifyNow token last handled.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	LastVerifyNow string `json:"lastVerifyNow,omitempty"`

	// history of the last runs, newest first.
	// +optional
	// +kubebuilder:validation:MaxItems=10
	// +listType=atomic
	History []BackupRunSummary `json:"history,omitempty"`

	// conditions: Ready, Verified and SourceAvailable.
	// +optional
	// +listType=map
	// +listMapKey=type
	// +kubebuilder:validation:MaxItems=8
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// BackupVerification restores the latest backup into a throwaway database on a
// schedule, checks it, drops it, and keeps the evidence.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=bv,categories=orderly
// +kubebuilder:printcolumn:name="Target",type=string,JSONPath=`.spec.target.serverRef`
// +kubebuilder:printcolumn:name="Last Result",type=string,JSONPath=`.status.lastRun.result`
// +kubebuilder:printcolumn:name="Last Success",type=date,JSONPath=`.status.lastSuccessTime`
// +kubebuilder:printcolumn:name="Failures",type=integer,JSONPath=`.status.consecutiveFailures`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`,priority=1
// +kubebuilder:printcolumn:name="Backup",type=string,JSONPath=`.status.lastRun.backup.key`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BackupVerification struct {
	metav1.TypeMeta `json:",inline"`
	// metadata is the standard object metadata.
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// spec says what to verify, where and when.
	// +required
	Spec BackupVerificationSpec `json:"spec"`

	// status is what the verifications found.
	// +optional
	Status BackupVerificationStatus `json:"status,omitempty,omitzero"`
}

// BackupVerificationList is a list of BackupVerifications.
// +kubebuilder:object:root=true
type BackupVerificationList struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ListMeta `json:"metadata,omitempty"`
	// items are the BackupVerifications.
	Items []BackupVerification `json:"items"`
}

// The kind registers itself, so that groupversion_info.go lists only the kinds of
// the DevDatabase capability.
func init() {
	SchemeBuilder.Register(func(s *runtime.Scheme) error {
		s.AddKnownTypes(GroupVersion, &BackupVerification{}, &BackupVerificationList{})
		return nil
	})
}
