package devdatabase

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
	"orderly.dev/orderly/internal/labels"
)

// A ttl raised past the server's maxTTL does not keep the database longer: the
// status says when it really expires, and why.
func TestComputeStatusCapsTheTTLAtMaxTTL(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	server := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg"}, Spec: datav1alpha1.DatabaseServerSpec{MaxTTL: metav1.Duration{Duration: 48 * time.Hour}}}
	ready := outcome{phase: datav1alpha1.PhaseReady, reason: ReasonReady, reachable: true}.on(server)
	for _, tc := range []struct {
		name        string
		ttl         time.Duration
		now         time.Time
		wantExpiry  time.Time
		wantCapped  metav1.ConditionStatus
		wantWarning metav1.ConditionStatus
	}{
		{name: "within maxTTL", ttl: 24 * time.Hour, now: created, wantExpiry: created.Add(24 * time.Hour), wantCapped: metav1.ConditionFalse, wantWarning: metav1.ConditionFalse},
		{name: "raised past maxTTL", ttl: 96 * time.Hour, now: created, wantExpiry: created.Add(48 * time.Hour), wantCapped: metav1.ConditionTrue, wantWarning: metav1.ConditionFalse},
		{name: "past maxTTL, last hour before the capped expiry", ttl: 96 * time.Hour, now: created.Add(47*time.Hour + 30*time.Minute),
			wantExpiry: created.Add(48 * time.Hour), wantCapped: metav1.ConditionTrue, wantWarning: metav1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := devDB(tc.ttl, created)
			st := computeStatus(d, ready, tc.now)
			if !st.ExpiresAt.Time.Equal(tc.wantExpiry) {
				t.Errorf("expiresAt = %s, want %s", st.ExpiresAt, tc.wantExpiry)
			}
			capped := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionTTLCapped)
			if capped == nil || capped.Status != tc.wantCapped {
				t.Fatalf("TTLCapped = %+v, want %s", capped, tc.wantCapped)
			}
			if tc.wantCapped == metav1.ConditionTrue && !strings.Contains(capped.Message, "maxTTL 48h0m0s") {
				t.Errorf("TTLCapped message %q does not name the maxTTL", capped.Message)
			}
			if c := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionExpiringSoon); c == nil || c.Status != tc.wantWarning {
				t.Errorf("ExpiringSoon = %+v, want %s", c, tc.wantWarning)
			}
			if !expired(d, 48*time.Hour, tc.wantExpiry) || expired(d, 48*time.Hour, tc.wantExpiry.Add(-time.Second)) {
				t.Error("expired() disagrees with expiresAt")
			}
		})
	}
	// Without the server, what was known stands.
	d := devDB(96*time.Hour, created)
	d.Status = computeStatus(d, ready, created)
	st := computeStatus(d, outcome{phase: datav1alpha1.PhasePending, reason: ReasonServerNotFound}, created)
	if !st.ExpiresAt.Time.Equal(created.Add(48 * time.Hour)) {
		t.Errorf("without the server: expiresAt = %s", st.ExpiresAt)
	}
}

func TestComputeStatusRecordsTheServerIdentity(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := devDB(24*time.Hour, created)
	st := computeStatus(d, outcome{phase: datav1alpha1.PhaseReady, reason: ReasonReady, serverID: "7311"}, created)
	if st.ServerIdentity != "7311" {
		t.Fatalf("serverIdentity = %q", st.ServerIdentity)
	}
	d.Status = st
	if st := computeStatus(d, outcomeFor(database.ErrUnreachable, datav1alpha1.PhasePending), created); st.ServerIdentity != "7311" {
		t.Errorf("kept while unreachable: %q", st.ServerIdentity)
	}
	if st := computeStatus(d, outcome{phase: datav1alpha1.PhaseExpired, reason: ReasonExpired}, created.Add(25*time.Hour)); st.ServerIdentity != "" {
		t.Errorf("an expired DevDatabase has nothing on any server: %q", st.ServerIdentity)
	}
}

func TestOutcomeForSecurityErrors(t *testing.T) {
	for _, tc := range []struct {
		err        error
		wantReason string
		wantRetry  bool
	}{
		{fmt.Errorf("%w: adminCredentialsSecretRef names namespace team-a", database.ErrCredentialsNotAllowed), ReasonCredentialsNotAllowed, false},
		{fmt.Errorf("%w: created on 1, now 2", database.ErrServerChanged), ReasonServerChanged, false},
		{fmt.Errorf("%w: dropping database: lock timeout", database.ErrTimeout), ReasonTimeout, true},
	} {
		o := outcomeFor(tc.err, datav1alpha1.PhaseDeleting)
		if o.reason != tc.wantReason || (o.err != nil) != tc.wantRetry || o.phase != datav1alpha1.PhaseDeleting {
			t.Errorf("%v: %+v", tc.err, o)
		}
	}
}

// What the cache keeps of a Secret someone labelled as a connection Secret: its
// identity, the two labels and the owner references to DevDatabases; no data, no
// annotations, nothing else that could be large.
func TestTrimSecret(t *testing.T) {
	big := strings.Repeat("x", 200_000)
	sec := &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "forged", UID: "u1",
			Labels:        map[string]string{labels.ManagedBy: labels.ManagedByValue, datav1alpha1.DevDatabaseLabel: "app", "padding": big[:63]},
			Annotations:   map[string]string{"kubectl.kubernetes.io/last-applied-configuration": big},
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
			OwnerReferences: []metav1.OwnerReference{
				{APIVersion: datav1alpha1.GroupVersion.String(), Kind: "DevDatabase", Name: "app", UID: "d1"},
				{APIVersion: "v1", Kind: "ConfigMap", Name: "other", UID: "c1"},
			}},
		Data: map[string][]byte{"blob": []byte(big)},
	}
	out, err := trimSecret(sec)
	if err != nil {
		t.Fatal(err)
	}
	got := out.(*corev1.Secret)
	if got.Data != nil || got.Annotations != nil || got.ManagedFields != nil || len(got.Labels) != 2 || len(got.OwnerReferences) != 1 || got.Name != "forged" {
		t.Errorf("trimmed: %+v", got.ObjectMeta)
	}
	meta := &metav1.PartialObjectMetadata{ObjectMeta: *sec.ObjectMeta.DeepCopy()}
	meta.Annotations = map[string]string{"a": big}
	if out, _ := trimSecret(meta); out.(*metav1.PartialObjectMetadata).Annotations != nil {
		t.Error("metadata kept its annotations")
	}
	if !connectionSecrets().Matches(fakeLabels(sec.Labels)) || connectionSecrets().Matches(fakeLabels{labels.ManagedBy: labels.ManagedByValue}) {
		t.Error("the cache selects Secrets by the wrong labels")
	}
}

type fakeLabels map[string]string

func (l fakeLabels) Has(k string) bool              { _, ok := l[k]; return ok }
func (l fakeLabels) Get(k string) string            { return l[k] }
func (l fakeLabels) Lookup(k string) (string, bool) { v, ok := l[k]; return v, ok }

func TestConnectionDataCarriesTheCA(t *testing.T) {
	data := connectionData(database.Server{Host: "db.example", Port: 5432, CACert: []byte("-----BEGIN CERTIFICATE-----")},
		database.Database{Name: "orderly_x", Role: "orderly_x", Password: "P"})
	if string(data[datav1alpha1.SecretKeyCACert]) != "-----BEGIN CERTIFICATE-----" || !strings.Contains(string(data[datav1alpha1.SecretKeyURI]), "sslmode=verify-full") {
		t.Errorf("data = %s", data)
	}
	if _, has := connectionData(database.Server{Host: "h", Port: 1}, database.Database{})[datav1alpha1.SecretKeyCACert]; has {
		t.Error("ca.crt without a CA")
	}
}
