//go:build !linux

package launch

import "os/exec"

// setParentDeathSignal does nothing where the kernel offers no parent-death signal:
// a manager whose test process dies has to be stopped by hand there.
func setParentDeathSignal(*exec.Cmd) {}
