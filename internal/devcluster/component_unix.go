//go:build unix

package devcluster

import (
	"bytes"
	"errors"
	"os"
	"strconv"
	"syscall"
)

// processRuns reports whether pid is a live process running binary. Where /proc
// tells (Linux), a process running something else has only inherited the id of the
// one the pid file named, which is gone; elsewhere the pid file is trusted, as
// kwokctl trusts it.
func processRuns(pid int, binary string) (bool, error) {
	if gone, err := processGone(pid); gone || err != nil {
		return false, err
	}
	cmdline, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if errors.Is(err, os.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	argv0, _, _ := bytes.Cut(cmdline, []byte{0})
	return string(argv0) == binary, nil
}

// processGone reports whether pid has exited: no such process, or a zombie that
// nobody has reaped yet.
func processGone(pid int) (bool, error) {
	err := syscall.Kill(pid, 0)
	switch {
	case errors.Is(err, syscall.ESRCH):
		return true, nil
	case err != nil && !errors.Is(err, syscall.EPERM):
		return false, err
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if errors.Is(err, os.ErrNotExist) {
		// With /proc, the process went away in between; without (not Linux), it runs
		// as far as kill can tell.
		return procMounted(), nil
	}
	if err != nil {
		return false, err
	}
	return zombie(stat), nil
}

// zombie reads the state from /proc/PID/stat: "PID (COMM) STATE ...", where COMM
// may itself hold spaces and parentheses.
func zombie(stat []byte) bool {
	i := bytes.LastIndexByte(stat, ')')
	return i >= 0 && i+2 < len(stat) && stat[i+2] == 'Z'
}

func procMounted() bool {
	_, err := os.Stat("/proc/self/stat")
	return err == nil
}

func killProcess(pid int) error {
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	return nil
}
