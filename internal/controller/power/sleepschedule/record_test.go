package sleepschedule

import (
	"errors"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

func TestReadRecordRefusesWhatCannotBeRestored(t *testing.T) {
	tests := []struct {
		name    string
		kind    string
		raw     *string // nil: no annotation
		wantErr string  // "" for a record that can be restored
	}{
		{"Deployment record", powerv1alpha1.KindDeployment, ptr.To(`{"replicas":3,"sleepReplicas":0}`), ""},
		{"zero replicas is a value", powerv1alpha1.KindStatefulSet, ptr.To(`{"replicas":0}`), ""},
		{"no annotation", powerv1alpha1.KindDeployment, nil, "no sleep record"},
		{"not JSON", powerv1alpha1.KindDeployment, ptr.To(`replicas=3`), "not readable JSON"},
		{"negative replicas", powerv1alpha1.KindDeployment, ptr.To(`{"replicas":-1}`), "replicas -1 is negative"},
		{"negative sleepReplicas", powerv1alpha1.KindStatefulSet, ptr.To(`{"replicas":2,"sleepReplicas":-4}`), "sleepReplicas -4 is negative"},
		{"no replicas", powerv1alpha1.KindDeployment, ptr.To(`{"suspend":true}`), "holds no replicas"},
		{"CronJob record", powerv1alpha1.KindCronJob, ptr.To(`{"suspend":false}`), ""},
		{"CronJob without suspend", powerv1alpha1.KindCronJob, ptr.To(`{"replicas":1}`), "holds no suspend"},
		{"HPA record", kindHPA, ptr.To(`{"minReplicas":2,"maxReplicas":10}`), ""},
		{"HPA without minReplicas", kindHPA, ptr.To(`{"maxReplicas":10}`), ""},
		{"HPA min above max", kindHPA, ptr.To(`{"minReplicas":5,"maxReplicas":2}`), "minReplicas 5 is not between 0 and maxReplicas 2"},
		{"HPA without max", kindHPA, ptr.To(`{"minReplicas":1}`), "maxReplicas 0 is below 1"},
		{"HPA negative min", kindHPA, ptr.To(`{"minReplicas":-1,"maxReplicas":3}`), "minReplicas -1"},
		{"KEDA user-paused record", recordKEDA, ptr.To(`{"paused":"true","targetKind":"Deployment","targetName":"consumer","targetReplicas":3}`), ""},
		{"KEDA negative target replicas", recordKEDA, ptr.To(`{"targetKind":"Deployment","targetName":"c","targetReplicas":-1}`), "target replicas -1 is negative"},
		{"KEDA target of another kind", recordKEDA, ptr.To(`{"targetKind":"Secret","targetName":"c","targetReplicas":1}`), `target kind "Secret"`},
		{"KEDA target without a name", recordKEDA, ptr.To(`{"targetKind":"StatefulSet","targetReplicas":1}`), "target name is empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "w"}}
			if tt.raw != nil {
				d.Annotations = map[string]string{powerv1alpha1.SleepStateAnnotation: *tt.raw}
			}
			rec, err := readRecord(d, tt.kind)
			switch {
			case tt.wantErr == "" && (err != nil || rec == nil):
				t.Errorf("readRecord = %+v, %v; want a record", rec, err)
			case tt.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tt.wantErr)):
				t.Errorf("readRecord error = %v, want one containing %q", err, tt.wantErr)
			}
			if tt.raw == nil && !errors.Is(err, errNoRecord) {
				t.Errorf("no annotation: err = %v, want errNoRecord", err)
			}
		})
	}
}

// A record that cannot be restored releases the workload, asleep or awake: neither a
// wake nor the schedule's deletion waits on it.
func TestDecideReleasesABadRecord(t *testing.T) {
	for _, want := range []bool{false, true} {
		w := &workload{kind: powerv1alpha1.KindDeployment, value: 0, want: want, asleepBy: "me", badRecord: errors.New("bad")}
		if got := decide(w, "me"); got != actRelease {
			t.Errorf("want asleep %v: decide = %v, want actRelease", want, got)
		}
	}
}
