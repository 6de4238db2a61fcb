#!/bin/sh
# tools/bench/bench-two-builds.sh - ringfeed-bench of two build trees side
# by side on one folder: has a change moved the pipeline's speed?
#
#     tools/bench/bench-two-builds.sh [--transform T] BUILD_A BUILD_B DIR [RUNS]
#
# BUILD_A and BUILD_B are build folders (each with tools/ringfeed-bench and
# tools/ringfeed-producer), e.g. one of an older commit checked out with
# `git worktree add`; DIR is a folder of class folders of JPEG files.
# Runs RUNS rounds (default 7), each A then B, of `ringfeed-bench --source
# DIR --transform T --size 224 --batch 64 --epochs 2` (T: train unless
# --transform says eval or none), interleaved so
# that drift in the machine's load hits both alike, and prints each run's
# images/s, the medians, B/A of the medians and the range of B/A round by
# round. Exits 2 on bad usage, 1 when a run fails.
set -eu

usage() {
    echo "usage: $0 [--transform train|eval|none] BUILD_A BUILD_B DIR [RUNS]" >&2
    exit 2
}
transform=train
if [ "${1:-}" = --transform ]; then
    [ $# -ge 2 ] || usage
    transform=$2
    shift 2
fi
case $transform in train | eval | none) ;; *) usage ;; esac
if [ $# -lt 3 ] || [ $# -gt 4 ]; then usage; fi
a=$1 b=$2 dir=$3 runs=${4:-7}
case $runs in '' | *[!0-9]*) usage ;; esac
for build in "$a" "$b"; do
    [ -x "$build/tools/ringfeed-bench" ] || {
        echo "$0: no $build/tools/ringfeed-bench: build it first" >&2
        exit 2
    }
done
[ -d "$dir" ] || usage

# One run of BUILD: its images/s, from the JSON line.
one_run() {
    RINGFEED_PRODUCER=$1/tools/ringfeed-producer \
        "$1/tools/ringfeed-bench" --source "$dir" --transform "$transform" \
        --size 224 --batch 64 --epochs 2 --json 2>/dev/null | tail -n 1 |
        sed -n 's/.*"samples_per_s": \([0-9.e+]*\).*/\1/p'
}

out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$runs" ]; do
    for side in A B; do
        build=$a
        [ "$side" = B ] && build=$b
        v=$(one_run "$build")
        [ -n "$v" ] || { echo "$0: a run of $build failed" >&2; exit 1; }
        echo "$side $v" | tee -a "$out"
    done
    i=$((i + 1))
done
awk '
function median(x, n,   i, j, t) {
    for (i = 1; i <= n; i++)
        for (j = i + 1; j <= n; j++)
            if (x[j] < x[i]) { t = x[i]; x[i] = x[j]; x[j] = t }
    return n % 2 ? x[(n + 1) / 2] : (x[n / 2] + x[n / 2 + 1]) / 2
}
$1 == "A" { a[++na] = $2 }
$1 == "B" { b[++nb] = $2; r = $2 / a[nb]; lo = nb == 1 || r < lo ? r : lo;
            hi = nb == 1 || r > hi ? r : hi }
END {
    ma = median(a, na); mb = median(b, nb)
    printf "A median %.1f images/s, B median %.1f images/s\n", ma, mb
    printf "B/A of the medians %.3f; round by round %.3f..%.3f\n", \
        mb / ma, lo, hi
}' "$out"
