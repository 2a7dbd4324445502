package sleepschedule

import (
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"sigs.k8s.io/controller-runtime/pkg/client"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// kindHPA is how records and Events name a HorizontalPodAutoscaler.
const kindHPA = "HorizontalPodAutoscaler"

// sleepRecord is what SleepStateAnnotation holds: the values before sleep, and the
// value Orderly set, by which a change made by someone else is recognised.
type sleepRecord struct {
	Replicas      *int32 `json:"replicas,omitempty"`
	SleepReplicas *int32 `json:"sleepReplicas,omitempty"`
	Suspend       *bool  `json:"suspend,omitempty"`
	MinReplicas   *int32 `json:"minReplicas,omitempty"`
	MaxReplicas   int32  `json:"maxReplicas,omitempty"`
	// Fields are the fields of a kind of targets.kinds that sleeps by patch.
	Fields []fieldRecord `json:"fields,omitempty"`
	// PausedReplicas is a KEDA ScaledObject's paused-replicas annotation before
	// sleep; nil when it had none (and the annotation is removed on waking).
	PausedReplicas *string `json:"pausedReplicas,omitempty"`
	// Paused is a KEDA ScaledObject's paused annotation before sleep, as its user set
	// it (Orderly never changes it); nil when it had none.
	Paused *string `json:"paused,omitempty"`
	// TargetKind, TargetName and TargetReplicas are the target of a ScaledObject its
	// user paused at its current count, and that count before sleep: KEDA keeps the
	// target where it is once paused-replicas is removed, so Orderly scales it back.
	TargetKind     string `json:"targetKind,omitempty"`
	TargetName     string `json:"targetName,omitempty"`
	TargetReplicas *int32 `json:"targetReplicas,omitempty"`
	// Waking is set on a ScaledObject whose annotations were restored and whose
	// target was not yet scaled back (two requests).
	Waking bool `json:"waking,omitempty"`
}

// errNoRecord is readRecord's answer for a workload without the annotation.
var errNoRecord = errors.New("no sleep record")

// readRecord reads and checks the SleepStateAnnotation of o, a workload of kind. The
// annotation is input: whoever may edit the workload can write it, and a value that
// cannot be restored (negative replicas, an HPA whose minReplicas is above its
// maxReplicas) would make every wake, and so the schedule's deletion, fail. Such a
// record is an error, and the workload is released without being restored.
//
// The record returned is shared: it must not be modified.
func readRecord(o client.Object, kind string) (*sleepRecord, error) {
	raw, ok := o.GetAnnotations()[powerv1alpha1.SleepStateAnnotation]
	if !ok {
		return nil, errNoRecord
	}
	key := recordKey{kind: kind, raw: raw}
	parsed.Lock()
	r, ok := parsed.m[key]
	parsed.Unlock()
	if ok {
		return r.rec, r.err
	}
	r.rec, r.err = parseRecord(raw, kind)
	parsed.Lock()
	if len(parsed.m) >= maxParsedRecords {
		clear(parsed.m)
	}
	parsed.m[key] = r
	parsed.Unlock()
	return r.rec, r.err
}

func parseRecord(raw, kind string) (*sleepRecord, error) {
	var rec sleepRecord
	if err := json.Unmarshal([]byte(raw), &rec); err != nil {
		return nil, errors.New("the sleep record is not readable JSON")
	}
	if err := rec.check(kind); err != nil {
		return nil, err
	}
	return &rec, nil
}

// parsed holds records already read, by kind and annotation: every reconcile reads
// the records of all the workloads a schedule holds asleep, and thousands of them
// share a handful of values ({"replicas":1,"sleepReplicas":0}). It is emptied when it
// reaches maxParsedRecords, so that users writing many values cannot grow it.
var parsed = struct {
	sync.Mutex
	m map[recordKey]parsedRecord
}{m: map[recordKey]parsedRecord{}}

const maxParsedRecords = 4096

type recordKey struct{ kind, raw string }

type parsedRecord struct {
	rec *sleepRecord
	err error
}

// check reports a record that cannot be restored on a workload of kind.
func (r *sleepRecord) check(kind string) error {
	switch kind {
	case powerv1alpha1.KindDeployment, powerv1alpha1.KindStatefulSet:
		if r.Replicas == nil {
			return errors.New("the sleep record holds no replicas")
		}
		if *r.Replicas < 0 {
			return fmt.Errorf("the recorded replicas %d is negative", *r.Replicas)
		}
		if r.SleepReplicas != nil && *r.SleepReplicas < 0 {
			return fmt.Errorf("the recorded sleepReplicas %d is negative", *r.SleepReplicas)
		}
	case recordScale:
		return r.check(powerv1alpha1.KindDeployment)
	case recordPatch:
		return checkFields(r.Fields)
	case recordKEDA:
		if r.PausedReplicas != nil && len(*r.PausedReplicas) > 63 {
			return errors.New("the recorded paused-replicas annotation is longer than 63 characters")
		}
		if r.Paused != nil && len(*r.Paused) > 63 {
			return errors.New("the recorded paused annotation is longer than 63 characters")
		}
		if r.TargetReplicas != nil {
			if *r.TargetReplicas < 0 {
				return fmt.Errorf("the recorded target replicas %d is negative", *r.TargetReplicas)
			}
			if r.TargetKind != powerv1alpha1.KindDeployment && r.TargetKind != powerv1alpha1.KindStatefulSet {
				return fmt.Errorf("the recorded target kind %q is not Deployment or StatefulSet", r.TargetKind)
			}
			if r.TargetName == "" || len(r.TargetName) > 253 {
				return errors.New("the recorded target name is empty or longer than 253 characters")
			}
		}
	case powerv1alpha1.KindCronJob:
		if r.Suspend == nil {
			return errors.New("the sleep record holds no suspend")
		}
	case kindHPA:
		if r.MaxReplicas < 1 {
			return fmt.Errorf("the recorded maxReplicas %d is below 1", r.MaxReplicas)
		}
		if r.MinReplicas != nil && (*r.MinReplicas < 0 || *r.MinReplicas > r.MaxReplicas) {
			return fmt.Errorf("the recorded minReplicas %d is not between 0 and maxReplicas %d", *r.MinReplicas, r.MaxReplicas)
		}
	}
	return nil
}
