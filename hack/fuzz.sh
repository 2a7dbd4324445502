#!/usr/bin/env bash
# Runs every Go fuzz target of the repository, one after another, each for FUZZTIME
# (default 60s): `go test -run '^$' -fuzz '^FuzzX$' -fuzztime $FUZZTIME ./pkg`. The
# targets are found in the packages' *_test.go files (func FuzzX(f *testing.F), in
# files without build constraints, so that their seed corpora also run as unit tests
# in `go test ./...`). Prints one line per target and fails if any target fails; Go
# keeps the failing input under the package's testdata/fuzz/FuzzX/, where `go test`
# runs it as a seed from then on, so the failure stays a failing unit test until fixed.
#
# Settings (environment):
#   FUZZTIME          how long each target runs (go test -fuzztime: 60s, 5s, 1000x)
#   FUZZMINIMIZETIME  how long Go minimizes a new or failing input (default 10s: large
#                     inputs, such as an RPM database, otherwise take a minute each)
#   FUZZPARALLEL      fuzzing processes per target (default: GOMAXPROCS)
#   FUZZPKGS          the packages to look in (default ./...)
#   FUZZRUN           a regular expression: only the targets whose name matches
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
fuzztime=${FUZZTIME:-60s}
minimize=${FUZZMINIMIZETIME:-10s}
go=${GO:-go}
parallel=()
if [[ -n "${FUZZPARALLEL:-}" ]]; then
	parallel=(-test.parallel="$FUZZPARALLEL")
fi

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

echo "fuzz: ${#targets[@]} targets, $fuzztime each"
work=$(mktemp -d "${TMPDIR:-/tmp}/orderly-fuzz-XXXXXX")
trap 'rm -rf "$work"' EXIT
log=$work/log
cache=$($go env GOCACHE)/fuzz
start=$SECONDS
failed=()
built=""
for t in "${targets[@]}"; do
	IFS=$'\t' read -r pkg dir name <<<"$t"
	began=$SECONDS
	# One instrumented test binary per package (go test -c -fuzz), run once per target
	# in the package's directory, where its testdata is; the generated corpus goes
	# where `go test -fuzz` keeps it.
	if [[ $built != "$dir" ]]; then
		built=$dir
		bin=$work/$(tr / _ <<<"$dir").test
		if ! $go test -c -fuzz=. -o "$bin" "./$dir" >"$log" 2>&1; then
			printf 'FAIL  %-40s ./%s: does not build\n' "$name" "$dir"
			sed 's/^/      /' "$log"
			bin=""
		fi
	fi
	if [[ -z $bin ]]; then
		failed+=("$name")
		continue
	fi
	if (cd "$dir" && "$bin" -test.run='^$' -test.fuzz="^$name\$" -test.fuzztime="$fuzztime" -test.fuzzminimizetime="$minimize" \
		-test.fuzzcachedir="$cache/$pkg" "${parallel[@]}") >"$log" 2>&1; then
		execs=$(grep -oE 'execs: [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+')
		printf 'ok    %-40s ./%s (%ds%s)\n' "$name" "$dir" $((SECONDS - began)) "${execs:+, $execs execs}"
	else
		printf 'FAIL  %-40s ./%s (%ds)\n' "$name" "$dir" $((SECONDS - began))
		sed 's/^/      /' "$log"
		input=$(grep -oE 'testdata/fuzz/[^ ]+' "$log" | tail -1)
		if [[ -n "$input" ]]; then
			echo "      The failing input is kept in $dir/$input: \`go test ./$dir\` runs it from now on."
			echo "      Fix the code and commit the input with the fix, as its regression test."
		fi
		failed+=("$name")
	fi
done
echo "fuzz: ${#targets[@]} targets in $((SECONDS - start))s; ${#failed[@]} failed${failed[*]:+: ${failed[*]}}"
[[ ${#failed[@]} -eq 0 ]]
