#!/usr/bin/env bash
# Runs the compiled e2e tests ($1) in two shards side by side, each on a local cluster
# of its own: the tests matched by $2 spend minutes waiting on real time (a rotation's
# one-minute look, a schedule's minute boundary, a member cluster's outage), so the
# tier takes about as long as the longer shard instead of the sum. Each shard starts
# its own manager, so no test sees another shard's restarts.
#
# With ORDERLY_E2E_CLUSTER set (a kept cluster to run again on), every test runs in
# one process on that cluster, as before the split.
set -uo pipefail
test_bin=$(realpath "$1")
waiting=$2
cd "$(dirname "$0")/../test/e2e" || exit 1
args=(-test.v -test.count=1 -test.timeout=30m)
if [[ -n "${ORDERLY_E2E_CLUSTER:-}" ]]; then
	exec "$test_bin" "${args[@]}"
fi

waiting_log=$(mktemp "${TMPDIR:-/tmp}/orderly-e2e-waiting-XXXXXX.log")
"$test_bin" "${args[@]}" -test.run="$waiting" >"$waiting_log" 2>&1 &
waiting_pid=$!
trap 'kill "$waiting_pid" 2>/dev/null' INT TERM

"$test_bin" "${args[@]}" -test.skip="$waiting"
rest=$?
wait "$waiting_pid"
waiting_rc=$?

echo "=== e2e shard of the waiting tests ($waiting), on a cluster of its own:"
cat "$waiting_log"
rm -f "$waiting_log"
echo "=== e2e shards: the rest exited $rest, the waiting tests $waiting_rc"
[[ $rest -eq 0 && $waiting_rc -eq 0 ]]
