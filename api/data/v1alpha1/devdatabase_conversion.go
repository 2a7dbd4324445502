package v1alpha1

// Hub marks v1alpha1 as the version DevDatabase is converted through: the version stored
// in this release and the one the controllers read and write. v1beta1 converts to
// and from it (api/data/v1beta1).
func (*DevDatabase) Hub() {}
