package devdatabase

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/kit"
)

// lifetime is how long d's database lives: its ttl, or the server's maxTTL (none
// when zero) when that is shorter. The maxTTL is enforced here, not only by the
// CLI: a ttl raised past it by hand does not keep the database longer.
func lifetime(d *datav1alpha1.DevDatabase, maxTTL time.Duration) time.Duration {
	if maxTTL > 0 && d.Spec.TTL.Duration > maxTTL {
		return maxTTL
	}
	return d.Spec.TTL.Duration
}

// expiryOf is the creation time plus the lifetime.
func expiryOf(d *datav1alpha1.DevDatabase, maxTTL time.Duration) time.Time {
	return d.CreationTimestamp.Add(lifetime(d, maxTTL))
}

// expiresAt is the creation time plus the ttl: the expiry when the server's maxTTL
// does not cap it.
func expiresAt(d *datav1alpha1.DevDatabase) time.Time { return expiryOf(d, 0) }

// ttlTooLong says whether server s refuses a DevDatabase with ttl: longer than its
// maxTTL (none when zero).
func ttlTooLong(s *datav1alpha1.DatabaseServer, ttl time.Duration) bool {
	return s.Spec.MaxTTL.Duration > 0 && ttl > s.Spec.MaxTTL.Duration
}

func expired(d *datav1alpha1.DevDatabase, maxTTL time.Duration, now time.Time) bool {
	return !now.Before(expiryOf(d, maxTTL))
}

// warnAt is when the ExpiringSoon Event is sent: an hour before expiry, or a
// quarter of the lifetime for shorter ones.
func warnAt(d *datav1alpha1.DevDatabase, maxTTL time.Duration) time.Time {
	lead := min(time.Hour, lifetime(d, maxTTL)/4)
	return expiryOf(d, maxTTL).Add(-lead)
}

func databaseName(d *datav1alpha1.DevDatabase) string {
	db, _ := database.Names(string(d.UID))
	return db
}

func secretName(d *datav1alpha1.DevDatabase) string {
	if d.Spec.SecretName != "" {
		return d.Spec.SecretName
	}
	return d.Name
}

// engineDatabase is d's database on server s: its role expires with it, and it is
// touched only on the server it was created on. Its users have no passwords yet.
func engineDatabase(d *datav1alpha1.DevDatabase, s *datav1alpha1.DatabaseServer) database.Database {
	db, role := database.NamesFor(string(s.Spec.Engine), string(d.UID))
	out := database.Database{Name: db, Role: role, OwnerUID: string(d.UID), Extensions: d.Spec.Extensions,
		ValidUntil: expiryOf(d, s.Spec.MaxTTL.Duration), ServerID: d.Status.ServerIdentity}
	for _, u := range d.Spec.Users {
		out.Users = append(out.Users, database.User{Name: u.Name, Role: database.UserRoleFor(string(s.Spec.Engine), string(d.UID), u.Name), Access: database.Access(u.Access)})
	}
	return out
}

// provisioned says whether d's database has been created (and has not expired):
// it is Ready, or it was created and something after (its Secret, its init SQL, a
// template) is what holds it back. Rules for new databases (ttl, extensions,
// limits, a server being deleted) do not apply to it.
func provisioned(d *datav1alpha1.DevDatabase) bool {
	return d.Status.Phase == datav1alpha1.PhaseReady || (d.Status.Phase != datav1alpha1.PhaseExpired && (d.Status.ServerIdentity != "" || d.Status.Init != nil))
}

// connect reads the server's credentials and connects. Its errors, and those of the
// engine it returns, go through database.Scrub before they reach status or Events.
func (r *Reconciler) connect(ctx context.Context, s *datav1alpha1.DatabaseServer) (database.Engine, database.Server, error) {
	srv, err := database.ServerFor(ctx, r.APIReader, s, r.Namespace)
	if err != nil {
		return nil, srv, database.Scrub(err, s, srv)
	}
	e, err := r.Connector.Connect(ctx, string(s.Spec.Engine), srv)
	return e, srv, database.Scrub(err, s, srv)
}

// admit checks what the server's rules allow: namespace, ttl, template, limits.
func (r *Reconciler) admit(ctx context.Context, d *datav1alpha1.DevDatabase, s *datav1alpha1.DatabaseServer) (outcome, bool) {
	if err := database.AdmitNamespace(ctx, r.APIReader, s, d.Namespace, r.Namespace); err != nil {
		if errors.Is(err, database.ErrNamespaceNotAllowed) {
			return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonNamespaceNotAllowed, message: err.Error()}, false
		}
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonNamespaceNotAllowed, message: err.Error(), err: err}, false
	}
	// A database that exists lives on until creation + maxTTL (TTLCapped); one not
	// created yet is not created for a ttl the server does not grant.
	if ttlTooLong(s, d.Spec.TTL.Duration) && !provisioned(d) {
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonTTLTooLong,
			message: fmt.Sprintf("ttl %s is longer than DatabaseServer %s allows (maxTTL %s); lower spec.ttl", d.Spec.TTL.Duration, s.Name, s.Spec.MaxTTL.Duration)}, false
	}
	if !provisioned(d) {
		// Extensions are created as the admin: only those the platform team allows.
		var refused []string
		for _, e := range d.Spec.Extensions {
			if !slices.Contains(s.Spec.AllowedExtensions, e) {
				refused = append(refused, e)
			}
		}
		if len(refused) > 0 {
			allowed := "none"
			if len(s.Spec.AllowedExtensions) > 0 {
				allowed = kit.FirstN(s.Spec.AllowedExtensions, 10)
			}
			return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonExtensionNotAllowed,
				message: fmt.Sprintf("DatabaseServer %s does not allow the extension(s) %s (its allowedExtensions: %s); create a DevDatabase without them, or ask its administrators",
					s.Name, strings.Join(refused, ", "), allowed)}, false
		}
	}
	if d.Spec.Template != "" && templateDatabase(s, d.Spec.Template) == "" {
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonTemplateNotFound,
			message: fmt.Sprintf("DatabaseServer %s has no template %q (spec.templates)", s.Name, d.Spec.Template)}, false
	}
	if _, err := parseTemplates(d.Spec.SecretTemplate); err != nil {
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonInvalidSecretTemplate,
			message: fmt.Sprintf("%v; correct spec.secretTemplate (Go text/template over .Host, .Port, .Database, .Username, .Password). Nothing is created or changed until it parses", err)}, false
	}
	if msg, ok, err := r.withinLimits(ctx, d, s); err != nil {
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonLimitExceeded, message: err.Error(), err: err}, false
	} else if !ok {
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonLimitExceeded, message: msg, retry: recheckLimit}, false
	}
	return outcome{}, true
}

func templateDatabase(s *datav1alpha1.DatabaseServer, name string) string {
	for _, t := range s.Spec.Templates {
		if t.Name == name {
			return t.Database
		}
	}
	return ""
}

// withinLimits admits DevDatabases in a deterministic order (ready ones first, then
// by creation time), so that concurrent reconciles agree on who gets the last slot.
func (r *Reconciler) withinLimits(ctx context.Context, d *datav1alpha1.DevDatabase, s *datav1alpha1.DatabaseServer) (string, bool, error) {
	lim := s.Spec.Limits
	if lim.MaxDatabases == nil && lim.MaxDatabasesPerNamespace == nil {
		return "", true, nil
	}
	var list datav1alpha1.DevDatabaseList
	if err := r.List(ctx, &list, client.MatchingFields{serverIndex: s.Name}); err != nil {
		return "", false, fmt.Errorf("listing DevDatabases on server %s: %w", s.Name, err)
	}
	now := r.Clock.Now()
	live := make([]*datav1alpha1.DevDatabase, 0, len(list.Items))
	for i := range list.Items {
		o := &list.Items[i]
		if o.DeletionTimestamp.IsZero() && !expired(o, s.Spec.MaxTTL.Duration, now) {
			live = append(live, o)
		}
	}
	ready := provisioned
	notReady := func(o *datav1alpha1.DevDatabase) int {
		if ready(o) {
			return 0
		}
		return 1
	}
	slices.SortStableFunc(live, func(a, b *datav1alpha1.DevDatabase) int {
		return cmp.Or(
			cmp.Compare(notReady(a), notReady(b)),
			a.CreationTimestamp.Compare(b.CreationTimestamp.Time),
			strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name),
		)
	})
	if ready(d) {
		return "", true, nil
	}
	// Admit in order; one held back by its namespace's limit takes no server slot.
	total, perNamespace := 0, map[string]int{}
	for _, o := range live {
		nsFull := lim.MaxDatabasesPerNamespace != nil && int32(perNamespace[o.Namespace]) >= *lim.MaxDatabasesPerNamespace
		serverFull := lim.MaxDatabases != nil && int32(total) >= *lim.MaxDatabases
		if o.UID == d.UID {
			switch {
			case nsFull:
				return fmt.Sprintf("Namespace %s holds its limit of %d DevDatabases on DatabaseServer %s; waiting for one to expire or be deleted", d.Namespace, *lim.MaxDatabasesPerNamespace, s.Name), false, nil
			case serverFull:
				return fmt.Sprintf("DatabaseServer %s holds its limit of %d DevDatabases; waiting for one to expire or be deleted", s.Name, *lim.MaxDatabases), false, nil
			}
			return "", true, nil
		}
		if !nsFull && !serverFull {
			total++
			perNamespace[o.Namespace]++
		}
	}
	// Not in the cache yet: judge by the others alone.
	if m := lim.MaxDatabases; m != nil && int32(total) >= *m {
		return fmt.Sprintf("DatabaseServer %s holds its limit of %d DevDatabases; waiting for one to expire or be deleted", s.Name, *m), false, nil
	}
	if m := lim.MaxDatabasesPerNamespace; m != nil && int32(perNamespace[d.Namespace]) >= *m {
		return fmt.Sprintf("Namespace %s holds its limit of %d DevDatabases on DatabaseServer %s; waiting for one to expire or be deleted", d.Namespace, *m, s.Name), false, nil
	}
	return "", true, nil
}

// ensure creates what is missing on the server (database, roles), the connection
// Secrets, and runs the init SQL once.
func (r *Reconciler) ensure(ctx context.Context, d *datav1alpha1.DevDatabase, s *datav1alpha1.DatabaseServer) outcome {
	// admit has parsed them already; a failure here is not expected.
	ts, err := parseTemplates(d.Spec.SecretTemplate)
	if err != nil {
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonInvalidSecretTemplate, message: err.Error()}
	}
	e, srv, err := r.connect(ctx, s)
	if err != nil {
		return outcomeFor(err, datav1alpha1.PhasePending)
	}
	db := engineDatabase(d, s)
	db.Template = templateDatabase(s, d.Spec.Template)
	secretFailed := func(err error, serverID string) outcome {
		if errors.Is(err, errSecretConflict) {
			return outcome{phase: datav1alpha1.PhasePending, reason: ReasonSecretConflict, message: err.Error(), serverID: serverID}
		}
		return outcome{phase: datav1alpha1.PhasePending, reason: ReasonSecretFailed, message: err.Error(), err: err, serverID: serverID}
	}
	current, err := r.currentSecret(ctx, d, secretName(d))
	if err != nil {
		return secretFailed(err, "")
	}
	if p := passwordFrom(current); p != "" {
		db.Password = p
	} else {
		db.Password, db.SetPassword = database.Password(), true
	}
	userSecrets := make([]*corev1.Secret, len(db.Users))
	for i := range db.Users {
		u := &db.Users[i]
		if userSecrets[i], err = r.currentSecret(ctx, d, userSecretName(d, u.Name)); err != nil {
			return secretFailed(err, "")
		}
		if p := passwordFrom(userSecrets[i]); p != "" {
			u.Password = p
		} else {
			u.Password, u.SetPassword = database.Password(), true
		}
	}
	res, err := e.Ensure(ctx, db)
	if err != nil {
		return outcomeFor(database.Scrub(err, s, srv), datav1alpha1.PhasePending)
	}
	if res.Created {
		what := "empty"
		if db.Template != "" {
			what = "cloned from template " + d.Spec.Template
		}
		r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, "DatabaseCreated", "Create", "Created database %s (%s) with role %s on %s", db.Name, what, db.Role, s.Name)
		countCreated(s.Name)
	}
	if len(res.UsersDropped) > 0 {
		r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, ReasonUserDropped, "Delete",
			"Dropped user(s) %s, no longer in spec.users, and deleted their Secrets", kit.FirstN(res.UsersDropped, 8))
	}
	keep := []string{secretName(d)}
	data, err := secretData(srv, db, ts)
	if err != nil {
		return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonInvalidSecretTemplate, serverID: res.ServerID, reachable: true,
			message: err.Error() + "; correct spec.secretTemplate"}
	}
	if err := r.ensureSecret(ctx, d, secretName(d), "", current, data); err != nil {
		return secretFailed(err, res.ServerID)
	}
	var users []datav1alpha1.DevDatabaseUserStatus
	for i, u := range db.Users {
		name := userSecretName(d, u.Name)
		data, err := secretData(srv, database.Database{Name: db.Name, Role: u.Role, Password: u.Password}, ts)
		if err != nil {
			return outcome{phase: datav1alpha1.PhaseFailed, reason: ReasonInvalidSecretTemplate, serverID: res.ServerID, reachable: true,
				message: err.Error() + "; correct spec.secretTemplate"}
		}
		if err := r.ensureSecret(ctx, d, name, u.Name, userSecrets[i], data); err != nil {
			return secretFailed(err, res.ServerID)
		}
		keep = append(keep, name)
		users = append(users, datav1alpha1.DevDatabaseUserStatus{Name: u.Name, Role: u.Role, Access: datav1alpha1.UserAccess(u.Access), SecretName: name})
	}
	if err := r.deleteSecrets(ctx, d, keep...); err != nil {
		return secretFailed(err, res.ServerID)
	}
	if res.Created {
		readySeconds.Observe(r.Clock.Since(d.CreationTimestamp.Time).Seconds())
	}
	ready := outcome{phase: datav1alpha1.PhaseReady, reason: ReasonReady, reachable: true, serverID: res.ServerID, users: users, usersKnown: true,
		message: fmt.Sprintf("Database %s is ready; credentials in Secret %s", db.Name, secretName(d))}
	if d.Spec.Init != nil {
		if out, done := r.initialize(ctx, d, e, db, s, srv); !done {
			out.serverID, out.users, out.usersKnown = res.ServerID, users, true
			return out
		}
	}
	return ready
}

// drop drops or releases the database and roles according to deletionPolicy.
func (r *Reconciler) drop(ctx context.Context, d *datav1alpha1.DevDatabase, s *datav1alpha1.DatabaseServer) (database.DropResult, error) {
	e, srv, err := r.connect(ctx, s)
	if err != nil {
		return database.DropResult{}, err
	}
	retain := d.Spec.DeletionPolicy == datav1alpha1.DatabaseDeletionPolicyRetain
	res, err := e.Drop(ctx, engineDatabase(d, s), retain)
	if err != nil {
		return res, database.Scrub(err, s, srv)
	}
	countDropped(s.Name)
	countTerminated(s.Name, res.Terminated)
	return res, nil
}

// dropNote says what a drop did, for its Event.
func dropNote(d *datav1alpha1.DevDatabase, res database.DropResult) string {
	what := "dropped"
	if d.Spec.DeletionPolicy == datav1alpha1.DatabaseDeletionPolicyRetain {
		what = "retained (its roles were dropped)"
	}
	return fmt.Sprintf("database %s %s; %d open connection(s) terminated", databaseName(d), what, res.Terminated)
}

// expire drops the database of an expired DevDatabase and removes the Secret; the
// DevDatabase stays, Expired, until someone deletes it or raises its ttl.
func (r *Reconciler) expire(ctx context.Context, d *datav1alpha1.DevDatabase, s *datav1alpha1.DatabaseServer) outcome {
	maxTTL := s.Spec.MaxTTL.Duration
	if d.Status.Phase != datav1alpha1.PhaseExpired {
		res, err := r.drop(ctx, d, s)
		if err != nil {
			return outcomeFor(err, d.Status.Phase)
		}
		r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, ReasonExpired, "Expire", "%s ran out: %s", lifetimeText(d, s), dropNote(d, res))
	}
	if err := r.deleteSecrets(ctx, d); err != nil {
		return outcome{phase: d.Status.Phase, reason: ReasonSecretFailed, message: err.Error(), err: err}
	}
	advice := "raise spec.ttl (orderly db extend) for a new empty database, or delete this DevDatabase"
	if ttlTooLong(s, d.Spec.TTL.Duration) {
		advice = "delete this DevDatabase and create a new one"
	}
	return outcome{phase: datav1alpha1.PhaseExpired, reason: ReasonExpired, reachable: true,
		message: fmt.Sprintf("%s ran out at %s; %s", lifetimeText(d, s), expiryOf(d, maxTTL).UTC().Format(time.RFC3339), advice)}
}

// lifetimeText says what ran out: the ttl, or the server's maxTTL that capped it.
func lifetimeText(d *datav1alpha1.DevDatabase, s *datav1alpha1.DatabaseServer) string {
	if ttlTooLong(s, d.Spec.TTL.Duration) {
		return fmt.Sprintf("DatabaseServer %s's maxTTL %s (shorter than the ttl %s)", s.Name, s.Spec.MaxTTL.Duration, d.Spec.TTL.Duration)
	}
	return fmt.Sprintf("ttl %s", d.Spec.TTL.Duration)
}
