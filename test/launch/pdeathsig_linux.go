//go:build linux

package launch

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal has the kernel kill the manager when the test process dies
// without stopping it (a test binary killed by `go test -timeout`, say), so no
// manager keeps writing to a cluster after its run is over. The signal follows the
// OS thread that started the process, and the Go runtime ends a thread when a
// goroutine that locked it (LockOSThread) ends without unlocking it: the launcher
// starts the process from a goroutine that holds its thread until the process has
// exited, so no other goroutine can take that thread and end it.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
