package devdatabase

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
)

func devDB(ttl time.Duration, created time.Time) *datav1alpha1.DevDatabase {
	return &datav1alpha1.DevDatabase{
		ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: "team", UID: "0a1b2c3d-0000-4000-8000-00000000abcd", CreationTimestamp: metav1.NewTime(created), Generation: 3},
		Spec:       datav1alpha1.DevDatabaseSpec{ServerRef: "pg", TTL: metav1.Duration{Duration: ttl}},
	}
}

func TestComputeStatus(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name             string
		now              time.Time
		out              outcome
		wantPhase        datav1alpha1.DevDatabasePhase
		wantReady        metav1.ConditionStatus
		wantExpiringSoon metav1.ConditionStatus
		wantReachable    metav1.ConditionStatus
		wantSecret       string
	}{
		{name: "ready, far from expiry", now: created.Add(time.Hour), out: outcome{phase: datav1alpha1.PhaseReady, reason: ReasonReady, reachable: true},
			wantPhase: datav1alpha1.PhaseReady, wantReady: metav1.ConditionTrue, wantExpiringSoon: metav1.ConditionFalse, wantReachable: metav1.ConditionTrue, wantSecret: "app"},
		{name: "ready, within the last hour", now: created.Add(23*time.Hour + time.Minute), out: outcome{phase: datav1alpha1.PhaseReady, reason: ReasonReady, reachable: true},
			wantPhase: datav1alpha1.PhaseReady, wantReady: metav1.ConditionTrue, wantExpiringSoon: metav1.ConditionTrue, wantReachable: metav1.ConditionTrue, wantSecret: "app"},
		{name: "unreachable", now: created.Add(time.Hour), out: outcomeFor(database.ErrUnreachable, datav1alpha1.PhasePending),
			wantPhase: datav1alpha1.PhasePending, wantReady: metav1.ConditionFalse, wantExpiringSoon: metav1.ConditionFalse, wantReachable: metav1.ConditionFalse},
		{name: "expired", now: created.Add(25 * time.Hour), out: outcome{phase: datav1alpha1.PhaseExpired, reason: ReasonExpired, reachable: true},
			wantPhase: datav1alpha1.PhaseExpired, wantReady: metav1.ConditionFalse, wantExpiringSoon: metav1.ConditionFalse, wantReachable: metav1.ConditionTrue},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := devDB(24*time.Hour, created)
			st := computeStatus(d, tc.out, tc.now)
			if st.Phase != tc.wantPhase {
				t.Errorf("phase = %s, want %s", st.Phase, tc.wantPhase)
			}
			for typ, want := range map[string]metav1.ConditionStatus{
				datav1alpha1.ConditionReady: tc.wantReady, datav1alpha1.ConditionExpiringSoon: tc.wantExpiringSoon, datav1alpha1.ConditionServerReachable: tc.wantReachable,
			} {
				if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Status != want {
					t.Errorf("condition %s = %+v, want %s", typ, c, want)
				}
			}
			if st.SecretName != tc.wantSecret {
				t.Errorf("secretName = %q, want %q", st.SecretName, tc.wantSecret)
			}
			if st.Database != "orderly_0a1b2c3d00004000800000000000abcd" || st.Role != st.Database {
				t.Errorf("database = %q", st.Database)
			}
			if !st.ExpiresAt.Time.Equal(created.Add(24 * time.Hour)) {
				t.Errorf("expiresAt = %s", st.ExpiresAt)
			}
			if st.ObservedGeneration != 3 {
				t.Errorf("observedGeneration = %d", st.ObservedGeneration)
			}
		})
	}
}

func TestRequeueAfterAimsAtWarningThenExpiry(t *testing.T) {
	created := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	d := devDB(8*time.Hour, created)
	ready := outcome{phase: datav1alpha1.PhaseReady}
	if got := ready.requeueAfter(d, created); got < 7*time.Hour || got > 7*time.Hour+time.Second {
		t.Errorf("before the warning: %s, want about 7h (1h lead)", got)
	}
	if got := ready.requeueAfter(d, created.Add(7*time.Hour+30*time.Minute)); got < 30*time.Minute || got > 30*time.Minute+time.Second {
		t.Errorf("after the warning: %s, want about 30m", got)
	}
	short := devDB(8*time.Second, created)
	if got := ready.requeueAfter(short, created); got < 6*time.Second || got > 6*time.Second+time.Second {
		t.Errorf("short ttl: %s, want about 6s (a quarter of the ttl as lead)", got)
	}
	if got := (outcome{phase: datav1alpha1.PhaseExpired}).requeueAfter(d, created.Add(9*time.Hour)); got != 0 {
		t.Errorf("expired: %s, want 0", got)
	}
}

func TestConnectionData(t *testing.T) {
	data := connectionData(database.Server{Host: "db.example", Port: 5433, SSLMode: "require"},
		database.Database{Name: "orderly_x", Role: "orderly_x", Password: "p@ss/w:rd"})
	u, err := url.Parse(string(data[datav1alpha1.SecretKeyURI]))
	if err != nil {
		t.Fatal(err)
	}
	if p, _ := u.User.Password(); p != "p@ss/w:rd" || u.Host != "db.example:5433" || u.Path != "/orderly_x" || u.Query().Get("sslmode") != "require" {
		t.Errorf("uri = %s", data[datav1alpha1.SecretKeyURI])
	}
	if got := string(data[datav1alpha1.SecretKeyJDBCURL]); !strings.HasPrefix(got, "jdbc:postgresql://db.example:5433/orderly_x?") {
		t.Errorf("jdbcUrl = %s", got)
	}
	for _, k := range []string{"host", "port", "database", "username", "password", "uri", "jdbcUrl"} {
		if len(data[k]) == 0 {
			t.Errorf("key %s missing", k)
		}
	}
}
