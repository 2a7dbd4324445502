package backupverification

import "syscall"

// toolProcAttr kills pg_restore or psql when the manager dies, even by SIGKILL, so
// a crashed manager leaves no restore running against the database it dropped
// after its restart.
func toolProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
