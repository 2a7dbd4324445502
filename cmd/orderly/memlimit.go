package main

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// memoryLimitShare is the part of the container's memory limit the manager gives Go
// as its soft limit (GOMEMLIMIT) unless the environment sets one: near the limit the
// collector works harder instead of letting the heap grow into an OOM kill (the
// start-up lists of a large cluster are the peak), and the rest is left for what Go
// does not count (stacks, the binary's pages).
const memoryLimitShare = 0.85

// cgroupMemoryFiles hold the container's memory limit: cgroup v2, then v1.
var cgroupMemoryFiles = []string{"/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"}

// setMemoryLimit sets Go's soft memory limit from the container's, when it has one
// and GOMEMLIMIT is not set. It returns the limit set, 0 when none.
func setMemoryLimit() int64 {
	if os.Getenv("GOMEMLIMIT") != "" {
		return 0
	}
	for _, f := range cgroupMemoryFiles {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		if limit := softLimit(string(b)); limit > 0 {
			debug.SetMemoryLimit(limit)
			return limit
		}
		return 0
	}
	return 0
}

// softLimit is the soft limit for the content of a cgroup memory limit file: 0 for
// "max", for v1's "no limit" (a huge number) and for anything unreadable. Pure.
func softLimit(content string) int64 {
	n, err := strconv.ParseInt(strings.TrimSpace(content), 10, 64)
	if err != nil || n <= 0 || n >= 1<<50 {
		return 0
	}
	return int64(float64(n) * memoryLimitShare)
}
