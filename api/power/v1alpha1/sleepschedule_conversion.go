package v1alpha1

// Hub marks v1alpha1 as the version SleepSchedule is converted through: the version stored
// in this release and the one the controllers read and write. v1beta1 converts to
// and from it (api/power/v1beta1).
func (*SleepSchedule) Hub() {}
