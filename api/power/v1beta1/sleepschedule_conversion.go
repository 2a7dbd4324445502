package v1beta1

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	powerv1alpha1 "orderly.dev/orderly/api/power/v1alpha1"
)

// ConvertTo converts this SleepSchedule to the hub version, v1alpha1. The two versions have
// the same fields, so every field is carried as it is; the round-trip fuzz test
// (sleepschedule_conversion_test.go) fails when a field is added to one version only.
func (src *SleepSchedule) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*powerv1alpha1.SleepSchedule)
	if !ok {
		return fmt.Errorf("converting SleepSchedule v1beta1: unexpected hub %T", dstRaw)
	}
	if err := sameFields(src, dst); err != nil {
		return err
	}
	dst.SetGroupVersionKind(powerv1alpha1.GroupVersion.WithKind("SleepSchedule"))
	return nil
}

// ConvertFrom converts the hub version, v1alpha1, to this SleepSchedule.
func (dst *SleepSchedule) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*powerv1alpha1.SleepSchedule)
	if !ok {
		return fmt.Errorf("converting SleepSchedule to v1beta1: unexpected hub %T", srcRaw)
	}
	if err := sameFields(src, dst); err != nil {
		return err
	}
	dst.SetGroupVersionKind(GroupVersion.WithKind("SleepSchedule"))
	return nil
}

// sameFields copies src into dst, a zeroed value of the other version, through their
// JSON form, which the two versions share.
func sameFields(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("converting SleepSchedule: %w", err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("converting SleepSchedule: %w", err)
	}
	return nil
}
