//go:build !linux

package backupverification

import "syscall"

func toolProcAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{} }
