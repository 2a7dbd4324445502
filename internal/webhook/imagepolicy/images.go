package imagepolicy

import orderlyadmission "orderly.dev/orderly/internal/admission"

// Images returns the images of the pod spec in raw, an object of kind (one of
// admission.PodKinds; a pods/ephemeralcontainers request carries a Pod).
func Images(kind string, raw []byte) ([]string, error) {
	spec, err := orderlyadmission.PodSpecOf(kind, raw)
	if err != nil {
		return nil, err
	}
	return orderlyadmission.ImagesOf(spec), nil
}
