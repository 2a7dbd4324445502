package databaseserver

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
	"orderly.dev/orderly/internal/database"
)

func TestComputeStatus(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	for _, tc := range []struct {
		name          string
		obs           observation
		wantReachable bool
		wantReason    string
		wantInUse     int32
	}{
		{name: "reachable", obs: observation{info: database.Info{Version: "15.14", OwnedDatabases: 3}, at: t0},
			wantReachable: true, wantReason: ReasonReachable, wantInUse: 3},
		{name: "unreachable", obs: observation{err: database.ErrUnreachable, at: t0}, wantReason: ReasonUnreachable},
		{name: "credentials", obs: observation{err: errors.Join(database.ErrCredentials, errors.New("no Secret")), at: t0}, wantReason: ReasonCredentialsMissing},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg", Generation: 2}, Spec: datav1alpha1.DatabaseServerSpec{Host: "h", Port: 5432}}
			st := computeStatus(s, tc.obs)
			if st.Reachable != tc.wantReachable || st.DatabasesInUse != tc.wantInUse || st.ObservedGeneration != 2 {
				t.Errorf("status = %+v", st)
			}
			for _, typ := range []string{datav1alpha1.ConditionReady, datav1alpha1.ConditionReachable} {
				if c := meta.FindStatusCondition(st.Conditions, typ); c == nil || c.Reason != tc.wantReason {
					t.Errorf("condition %s = %+v, want reason %s", typ, c, tc.wantReason)
				}
			}
			// A second identical check does not move lastCheckTime, so nothing is written.
			s.Status = st
			tc.obs.at = t1
			if again := computeStatus(s, tc.obs); !again.LastCheckTime.Equal(&t0) {
				t.Errorf("lastCheckTime moved to %s on an unchanged check", again.LastCheckTime)
			}
		})
	}
}

func TestComputeStatusWhileDeleting(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		name        string
		obs         observation
		wantMessage string
		wantReach   metav1.ConditionStatus
	}{
		{name: "two users", obs: observation{deleting: true, users: []string{"a/x", "b/y"}, at: t0},
			wantMessage: "waiting for 2 DevDatabase(s) that use this server to be deleted (their databases are dropped first): a/x, b/y", wantReach: metav1.ConditionTrue},
		{name: "many users, unreachable", obs: observation{deleting: true, err: database.ErrUnreachable, users: []string{"n/1", "n/2", "n/3", "n/4", "n/5", "n/6", "n/7"}, at: t0},
			wantMessage: "n/1, n/2, n/3, n/4, n/5 and 2 more", wantReach: metav1.ConditionFalse},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := &datav1alpha1.DatabaseServer{ObjectMeta: metav1.ObjectMeta{Name: "pg", Generation: 3}, Spec: datav1alpha1.DatabaseServerSpec{Host: "h", Port: 5432}}
			st := computeStatus(s, tc.obs)
			c := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionReady)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != ReasonInUse {
				t.Fatalf("Ready = %+v, want False/%s", c, ReasonInUse)
			}
			if !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("message %q does not contain %q", c.Message, tc.wantMessage)
			}
			if r := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionReachable); r == nil || r.Status != tc.wantReach {
				t.Errorf("Reachable = %+v, want %s", r, tc.wantReach)
			}
		})
	}
}

// A mysql server's status names what answers (MariaDB or MySQL) and its usual
// port when spec.port is unset.
func TestComputeStatusNamesTheEngine(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	for _, tc := range []struct {
		spec    datav1alpha1.DatabaseServerSpec
		obs     observation
		wantMsg string
	}{
		{datav1alpha1.DatabaseServerSpec{Engine: datav1alpha1.EngineMySQL, Host: "h"}, observation{info: database.Info{Version: "10.11.19-MariaDB-0+deb12u1"}, at: t0}, "MariaDB 10.11.19-MariaDB-0+deb12u1; 0 DevDatabase(s)"},
		{datav1alpha1.DatabaseServerSpec{Engine: datav1alpha1.EngineMySQL, Host: "h"}, observation{info: database.Info{Version: "8.4.3"}, at: t0}, "MySQL 8.4.3"},
		{datav1alpha1.DatabaseServerSpec{Engine: datav1alpha1.EnginePostgres, Host: "h"}, observation{info: database.Info{Version: "15.14"}, at: t0}, "PostgreSQL 15.14"},
		{datav1alpha1.DatabaseServerSpec{Engine: datav1alpha1.EngineMySQL, Host: "h"}, observation{err: database.ErrUnreachable, at: t0}, "Cannot use server h:3306"},
		{datav1alpha1.DatabaseServerSpec{Host: "h"}, observation{err: database.ErrUnreachable, at: t0}, "Cannot use server h:5432"},
	} {
		st := computeStatus(&datav1alpha1.DatabaseServer{Spec: tc.spec}, tc.obs)
		if c := meta.FindStatusCondition(st.Conditions, datav1alpha1.ConditionReady); c == nil || !strings.Contains(c.Message, tc.wantMsg) {
			t.Errorf("Ready = %+v, want a message with %q", c, tc.wantMsg)
		}
	}
}
