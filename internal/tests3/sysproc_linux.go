package tests3

import "syscall"

// sysProcAttr kills the gateway when the test process dies, even by SIGKILL, so a
// killed test never leaves it running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL, Setpgid: true}
}
