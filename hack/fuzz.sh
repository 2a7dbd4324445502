#!/usr/bin/env bash
# Runs every Go fuzz target of the repository, each for FUZZTIME (default 60s), as
# `go test -run '^$' -fuzz '^FuzzX$' -fuzztime $FUZZTIME ./pkg` would. The targets are
# found in the packages' *_test.go files (func FuzzX(f *testing.F), in files without
# build constraints, so that their seed corpora also run as unit tests in
# `go test ./...`). Each package's instrumented test binary is built once
# (go test -c -fuzz) and run once per target in the package's directory, with the
# corpus Go keeps in its cache. Prints one line per target and fails if any target
# fails; Go keeps the failing input under the package's testdata/fuzz/FuzzX/, where
# `go test` runs it as a seed from then on, so the failure stays a failing unit test
# until it is fixed.
#
# A target that fails with a bare "context deadline exceeded" and keeps no input (a race
# of Go 1.26's fuzzing coordinator at the end of -fuzztime) runs once more.
#
# Settings (environment):
#   FUZZTIME          how long each target runs (go test -fuzztime: 60s, 5s, 1000x)
#   FUZZJOBS          targets (and builds) run at once (default 2); each target gets
#                     FUZZPARALLEL fuzzing processes
#   FUZZPARALLEL      fuzzing processes per target (default: the CPUs / FUZZJOBS)
#   FUZZMINIMIZETIME  how long Go minimizes a new or failing input (default 10s: large
#                     inputs, such as an RPM database, otherwise take a minute each)
#   FUZZPKGS          the packages to look in (default ./...)
#   FUZZRUN           a regular expression: only the targets whose name matches
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
go=${GO:-go}
fuzztime=${FUZZTIME:-60s}
minimize=${FUZZMINIMIZETIME:-10s}
jobs=${FUZZJOBS:-2}
parallel=${FUZZPARALLEL:-$(($(nproc 2>/dev/null || echo 2) / jobs))}
((parallel >= 1)) || parallel=1

# Every target, as "import path<TAB>package directory<TAB>name".
mapfile -t targets < <(
	$go list -f '{{.ImportPath}}	{{.Dir}}' ${FUZZPKGS:-./...} | while IFS=$'\t' read -r pkg dir; do
		for f in "$dir"/*_test.go; do
			[[ -e $f ]] || continue
			grep -q '^//go:build' "$f" && continue
			grep -oE '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' "$f" | sed -E 's/^func (Fuzz[A-Za-z0-9_]*).*/\1/' |
				while read -r name; do printf '%s\t%s\t%s\n' "$pkg" "${dir#"$PWD"/}" "$name"; done
		done
	done | sort -t$'\t' -k2,2 -k3,3
)
if [[ -n "${FUZZRUN:-}" ]]; then
	mapfile -t targets < <(printf '%s\n' "${targets[@]}" | awk -F'\t' -v re="$FUZZRUN" '$3 ~ re')
fi
if [[ ${#targets[@]} -eq 0 || -z "${targets[0]}" ]]; then
	echo "fuzz: no fuzz targets found"
	exit 1
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/orderly-fuzz-XXXXXX")
trap 'kill $(jobs -p) 2>/dev/null; rm -rf "$work"' EXIT
cache=$($go env GOCACHE)/fuzz
start=$SECONDS
echo "fuzz: ${#targets[@]} targets, $fuzztime each, $jobs at a time with $parallel fuzzing processes each"

# binary is where the test binary of package directory $1 is built.
binary() { echo "$work/$(tr / _ <<<"$1").test"; }

# build builds the fuzzing test binary of package directory $1, its output in .log.
build() {
	local bin
	bin=$(binary "$1")
	$go test -c -fuzz=. -o "$bin" "./$1" >"$bin.log" 2>&1
}

# run runs target $3 of package $1 (directory $2) and writes its result to $work/$4.
run() {
	local pkg=$1 dir=$2 name=$3 out=$work/result-$4 log=$work/log-$4 tmp=$work/tmp-$4 began=$SECONDS bin execs input
	bin=$(binary "$dir")
	if [[ ! -x $bin ]]; then
		{
			printf 'FAIL  %-40s ./%s: does not build\n' "$name" "$dir"
			sed 's/^/      /' "$bin.log"
		} >"$tmp"
		mv "$tmp" "$out"
		return
	fi
	fuzz_once() {
		(cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^$name\$" -test.fuzztime="$fuzztime" -test.fuzzminimizetime="$minimize" \
			-test.parallel="$parallel" -test.fuzzcachedir="$cache/$pkg") >"$log" 2>&1
	}
	local retried=""
	fuzz_once
	local rc=$?
	# Go 1.26's fuzzing coordinator can fail a target at the end of -fuzztime with a bare
	# "context deadline exceeded" and no input (a race fixed in Go 1.27,
	# Go issue 75804), most often on a loaded machine. Such a failure found
	# nothing: the target runs once more, and only a second failure counts.
	if ((rc != 0)) && grep -q '^    context deadline exceeded$' "$log" && ! grep -q 'testdata/fuzz/' "$log"; then
		retried=", once more after Go's fuzztime race"
		fuzz_once
		rc=$?
	fi
	if ((rc == 0)); then
		execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
		printf 'ok    %-40s ./%s (%ds%s%s)\n' "$name" "$dir" $((SECONDS - began)) "${execs:+, $execs execs}" "$retried" >"$tmp"
	else
		{
			printf 'FAIL  %-40s ./%s (%ds)\n' "$name" "$dir" $((SECONDS - began))
			sed 's/^/      /' "$log"
			input=$(grep -oE 'testdata/fuzz/[^ ]+' "$log" | tail -1)
			if [[ -n "$input" ]]; then
				echo "      The failing input is kept in $dir/$input: \`go test ./$dir\` runs it from now on."
				echo "      Fix the code and commit the input with the fix, as its regression test."
			else
				echo "      No input was kept: the fuzzing process itself failed (above). Run the target again"
				echo "      (FUZZRUN='^$name\$' hack/fuzz.sh) to tell a hang or a crash from an overloaded machine."
			fi
		} >"$tmp"
	fi
	mv "$tmp" "$out"
}

# at most waits until fewer than $1 background jobs run.
at_most() {
	while (($(jobs -rp | wc -l) >= $1)); do
		wait -n
		print_results
	done
}

# print_results prints the results that are in, in the order the targets finished.
print_results() {
	local f
	for f in "$work"/result-*; do
		[[ -e $f && ! -e $work/printed-${f##*-} ]] || continue
		cat "$f"
		touch "$work/printed-${f##*-}"
	done
}

mapfile -t dirs < <(printf '%s\n' "${targets[@]}" | cut -f2 | uniq)
for d in "${dirs[@]}"; do
	at_most "$jobs"
	build "$d" &
done
wait
echo "fuzz: ${#dirs[@]} packages built in $((SECONDS - start))s"

i=0
for t in "${targets[@]}"; do
	IFS=$'\t' read -r pkg dir name <<<"$t"
	at_most "$jobs"
	run "$pkg" "$dir" "$name" "$i" &
	i=$((i + 1))
done
wait
print_results

failed=$(grep -l '^FAIL ' "$work"/result-* 2>/dev/null | xargs -r head -qn1 | awk '{print $2}' | paste -sd' ')
count=$(grep -l '^FAIL ' "$work"/result-* 2>/dev/null | wc -l)
echo "fuzz: ${#targets[@]} targets in $((SECONDS - start))s; $count failed${failed:+: $failed}"
[[ $count -eq 0 ]]
