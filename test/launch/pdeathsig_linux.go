//go:build linux

package launch

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the manager when the test process dies
// without stopping it (a test binary killed by `go test -timeout`, say), so no
// manager keeps writing to a cluster after its run is over. The signal follows the
// OS thread that started the process; the Go runtime only ends threads locked by
// LockOSThread, which nothing in the tests does.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
