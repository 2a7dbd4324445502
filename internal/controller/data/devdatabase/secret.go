package devdatabase

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"slices"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/database/mysql"
	"orderly.dev/orderly/internal/labels"
)

var errSecretConflict = errors.New("secret belongs to someone else")

// currentSecret reads one of the DevDatabase's Secrets (name) once per reconcile,
// straight from the API server (the cache holds Secrets' metadata only): its
// password is the role's, and a Secret that vanishes after this read must not be
// recreated with it (the write then fails and the retry sets a new password). nil
// when missing.
func (r *Reconciler) currentSecret(ctx context.Context, d *datav1alpha1.DevDatabase, name string) (*corev1.Secret, error) {
	var sec corev1.Secret
	err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, &sec)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !metav1.IsControlledBy(&sec, d) {
		return nil, fmt.Errorf("%w: Secret %s exists and is not this DevDatabase's; %s", errSecretConflict, sec.Name, conflictAdvice(d, name))
	}
	return &sec, nil
}

// conflictAdvice says how to get out of a Secret name conflict.
func conflictAdvice(d *datav1alpha1.DevDatabase, name string) string {
	if name == secretName(d) {
		return "choose another spec.secretName"
	}
	return "choose another spec.secretName or user name"
}

// userSecretName is the Secret of d's user.
func userSecretName(d *datav1alpha1.DevDatabase, user string) string {
	return secretName(d) + "-" + user
}

// passwordFrom is the password a Secret holds, when it has the form Orderly
// generates: the Secret is editable by the namespace's users, and what it says is
// theirs, not ours. Empty otherwise.
func passwordFrom(sec *corev1.Secret) string {
	if sec != nil && database.ValidPassword(string(sec.Data[datav1alpha1.SecretKeyPassword])) {
		return string(sec.Data[datav1alpha1.SecretKeyPassword])
	}
	return ""
}

// connectionData is a Secret's content for db's login role db.Role (a user's
// Secret gets a Database whose Role and Password are the user's).
func connectionData(srv database.Server, d database.Database) map[string][]byte {
	if srv.Engine == string(datav1alpha1.EngineMySQL) {
		return mysql.ConnectionData(srv, d)
	}
	db, role, password := d.Name, d.Role, d.Password
	port := strconv.Itoa(int(srv.Port))
	hostPort := net.JoinHostPort(srv.Host, port)
	sslMode := srv.EffectiveSSLMode()
	uri := url.URL{Scheme: "postgresql", User: url.UserPassword(role, password), Host: hostPort, Path: "/" + db,
		RawQuery: url.Values{"sslmode": {sslMode}}.Encode()}
	jdbcSSL := "prefer"
	switch sslMode {
	case "disable", "allow", "prefer", "require", "verify-ca", "verify-full":
		jdbcSSL = sslMode
	}
	jdbc := url.URL{Scheme: "postgresql", Host: hostPort, Path: "/" + db,
		RawQuery: url.Values{"user": {role}, "password": {password}, "sslmode": {jdbcSSL}}.Encode()}
	data := map[string][]byte{
		datav1alpha1.SecretKeyHost:     []byte(srv.Host),
		datav1alpha1.SecretKeyPort:     []byte(port),
		datav1alpha1.SecretKeyDatabase: []byte(db),
		datav1alpha1.SecretKeyUsername: []byte(role),
		datav1alpha1.SecretKeyPassword: []byte(password),
		datav1alpha1.SecretKeyURI:      []byte(uri.String()),
		datav1alpha1.SecretKeyJDBCURL:  []byte("jdbc:" + jdbc.String()),
	}
	// With verify-full the workloads need the CA too (sslrootcert=<mounted ca.crt>).
	if len(srv.CACert) > 0 {
		data[datav1alpha1.SecretKeyCACert] = srv.CACert
	}
	return data
}

// secretData is connectionData plus the keys of spec.secretTemplate rendered over it.
func secretData(srv database.Server, d database.Database, ts secretTemplates) (map[string][]byte, error) {
	data := connectionData(srv, d)
	extra, err := ts.render(templateData{Host: srv.Host, Port: string(data[datav1alpha1.SecretKeyPort]), Database: d.Name, Username: d.Role, Password: d.Password})
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, standard := data[k]; !standard {
			data[k] = v
		}
	}
	return data, nil
}

// ensureSecret creates or corrects the connection Secret name (of the user named
// user, or the main one when empty) with data, owned by the DevDatabase.
func (r *Reconciler) ensureSecret(ctx context.Context, d *datav1alpha1.DevDatabase, name, user string, current *corev1.Secret, data map[string][]byte) error {
	exists := current != nil
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: d.Namespace, Name: name}}
	if exists {
		sec = current.DeepCopy()
	}
	before := sec.DeepCopy()
	if sec.Labels == nil {
		sec.Labels = map[string]string{}
	}
	sec.Labels[labels.ManagedBy] = labels.ManagedByValue
	sec.Labels[datav1alpha1.DevDatabaseLabel] = d.Name
	if user != "" {
		sec.Labels[datav1alpha1.DevDatabaseUserLabel] = user
	}
	sec.Type = corev1.SecretTypeOpaque
	sec.Data = data
	if err := controllerutil.SetControllerReference(d, sec, r.Scheme()); err != nil {
		return err
	}
	if !exists {
		if err := r.Create(ctx, sec, client.FieldOwner(labels.FieldManager)); err != nil {
			if apierrors.IsAlreadyExists(err) {
				// Not there when read just now: made since, by someone else.
				return fmt.Errorf("%w: Secret %s exists and is not this DevDatabase's; %s", errSecretConflict, sec.Name, conflictAdvice(d, name))
			}
			return fmt.Errorf("creating Secret %s: %w", sec.Name, err)
		}
		return nil
	}
	if equalSecret(before, sec) {
		return nil
	}
	if err := r.Patch(ctx, sec, client.MergeFrom(before), client.FieldOwner(labels.FieldManager)); err != nil {
		return fmt.Errorf("updating Secret %s: %w", sec.Name, err)
	}
	return nil
}

func equalSecret(a, b *corev1.Secret) bool {
	if len(a.Data) != len(b.Data) || a.Labels[datav1alpha1.DevDatabaseLabel] != b.Labels[datav1alpha1.DevDatabaseLabel] ||
		a.Labels[datav1alpha1.DevDatabaseUserLabel] != b.Labels[datav1alpha1.DevDatabaseUserLabel] ||
		a.Labels[labels.ManagedBy] != b.Labels[labels.ManagedBy] || len(a.OwnerReferences) != len(b.OwnerReferences) {
		return false
	}
	for k, v := range b.Data {
		if string(a.Data[k]) != string(v) {
			return false
		}
	}
	return true
}

// deleteSecrets deletes the DevDatabase's Secrets except those named in keep (after
// a change of spec.secretName, a user removed, or all of them with keep empty).
func (r *Reconciler) deleteSecrets(ctx context.Context, d *datav1alpha1.DevDatabase, keep ...string) error {
	// Metadata is enough to decide, and all the cache holds.
	list := metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("SecretList"))
	if err := r.List(ctx, &list, client.InNamespace(d.Namespace), client.MatchingLabels{datav1alpha1.DevDatabaseLabel: d.Name}); err != nil {
		return fmt.Errorf("listing Secrets: %w", err)
	}
	for i := range list.Items {
		sec := &list.Items[i]
		if slices.Contains(keep, sec.Name) || !metav1.IsControlledBy(sec, d) {
			continue
		}
		sec.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Secret"))
		if err := r.Delete(ctx, sec, client.Preconditions{UID: &sec.UID}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting Secret %s: %w", sec.Name, err)
		}
	}
	return nil
}
