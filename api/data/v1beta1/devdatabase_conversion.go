package v1beta1

import (
	"encoding/json"
	"fmt"

	"sigs.k8s.io/controller-runtime/pkg/conversion"

	datav1alpha1 "orderly.dev/orderly/api/data/v1alpha1"
)

// ConvertTo converts this DevDatabase to the hub version, v1alpha1. The two versions have
// the same fields, so every field is carried as it is; the round-trip fuzz test
// (devdatabase_conversion_test.go) fails when a field is added to one version only.
func (src *DevDatabase) ConvertTo(dstRaw conversion.Hub) error {
	dst, ok := dstRaw.(*datav1alpha1.DevDatabase)
	if !ok {
		return fmt.Errorf("converting DevDatabase v1beta1: unexpected hub %T", dstRaw)
	}
	if err := sameFields(src, dst); err != nil {
		return err
	}
	dst.SetGroupVersionKind(datav1alpha1.GroupVersion.WithKind("DevDatabase"))
	return nil
}

// ConvertFrom converts the hub version, v1alpha1, to this DevDatabase.
func (dst *DevDatabase) ConvertFrom(srcRaw conversion.Hub) error {
	src, ok := srcRaw.(*datav1alpha1.DevDatabase)
	if !ok {
		return fmt.Errorf("converting DevDatabase to v1beta1: unexpected hub %T", srcRaw)
	}
	if err := sameFields(src, dst); err != nil {
		return err
	}
	dst.SetGroupVersionKind(GroupVersion.WithKind("DevDatabase"))
	return nil
}

// sameFields copies src into dst, a zeroed value of the other version, through their
// JSON form, which the two versions share.
func sameFields(src, dst any) error {
	b, err := json.Marshal(src)
	if err != nil {
		return fmt.Errorf("converting DevDatabase: %w", err)
	}
	if err := json.Unmarshal(b, dst); err != nil {
		return fmt.Errorf("converting DevDatabase: %w", err)
	}
	return nil
}
