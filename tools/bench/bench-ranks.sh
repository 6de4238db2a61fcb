#!/bin/sh
# tools/bench/bench-ranks.sh - several ranks on one machine, as torchrun
# --nproc_per_node=R starts them: R ringfeed-bench processes at once over
# the same JPEG folder, each with the launchers' variables (RANK,
# WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE) and so its own shard. Prints
# the aggregate images/s of 1, 2 and 4 ranks against one rank alone:
#
#   budget       the default producer count and CPUs (the CPU budget per
#                rank: the mask split among the local ranks);
#   budget, -p1  --producers 1 per rank, with the budget's pinning;
#   before, -pN  each rank as if alone (RF_LOCAL_WORLD_SIZE=1): one
#                producer per CPU of the mask, producer i pinned to CPU i,
#                as every rank did before the budget;
#   before, -p1  the same with --producers 1: every rank's producer on
#                CPU 0 (the "floor(N/M)" advice, which collapsed).
#
# The aggregate is the samples of all ranks over the wall time from the
# start of the first to the end of the last; medians of --runs rounds.
# A benchmark that prints figures, never a test.
#
# Usage: tools/bench/bench-ranks.sh [--images N] [--runs R] [BUILD_DIR]
set -u
images=2000
runs=3
build_arg=
while [ $# -gt 0 ]; do
    case $1 in
    --images) images=$2; shift 2 ;;
    --runs) runs=$2; shift 2 ;;
    -h | --help) sed -n '2,22s/^# \{0,1\}//p' "$0"; exit 0 ;;
    *) build_arg=$1; shift ;;
    esac
done

me="bench-ranks"
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/dev/lib.sh
. "$top/tools/dev/lib.sh"
find_build "$build_arg"
bench=$build/tools/ringfeed-bench
synth=$build/tools/ringfeed-synth
RINGFEED_PRODUCER=$build/tools/ringfeed-producer
export RINGFEED_PRODUCER
data=$build/bench-data/synth-$images-10
cpus=$(nproc)
require_built "$bench" "$synth" "$RINGFEED_PRODUCER"
scratch_folder

# write_data DIR: the dataset, into DIR (see write_once).
write_data() {
    say "== writing the dataset (once): $data"
    "$synth" "$1" --images "$images" --classes 10 --quiet
}
write_once "$data" write_data || exit 2
find "$data" -type f -exec cat {} + >/dev/null

now() { date +%s.%N; }

# run_ranks R MODE PRODUCERS: prints the aggregate images/s of R ranks.
# MODE "budget" or "before"; PRODUCERS "" for the default.
run_ranks() {
    n=$1 mode=$2 p=$3
    start=$(now)
    r=0
    while [ "$r" -lt "$n" ]; do
        (
            export RANK=$r WORLD_SIZE=$n LOCAL_RANK=$r LOCAL_WORLD_SIZE=$n
            if [ "$mode" = before ]; then
                export RF_LOCAL_RANK=0 RF_LOCAL_WORLD_SIZE=1
            fi
            exec "$bench" --source "$data" --batch 64 --json \
                ${p:+--producers "$p"} >"$tmp/rank$r.json" 2>"$tmp/rank$r.err"
        ) &
        r=$((r + 1))
    done
    wait
    end=$(now)
    total=0
    r=0
    while [ "$r" -lt "$n" ]; do
        s=$(sed -n 's/.*"samples": \([0-9]*\),.*/\1/p' "$tmp/rank$r.json")
        [ -n "$s" ] || { echo "bench-ranks: rank $r failed:" >&2;
            cat "$tmp/rank$r.err" >&2; return 1; }
        total=$((total + s))
        r=$((r + 1))
    done
    awk -v t="$total" -v a="$start" -v b="$end" 'BEGIN { printf "%.0f\n", t / (b - a) }'
}

median() { sort -n | awk '{ v[NR] = $1 } END { print v[int((NR + 1) / 2)] }'; }

echo "== $images images, batch 64, train at 224; $cpus CPUs; medians of $runs rounds"
printf '%-14s %6s %12s %10s\n' config ranks images/s "x 1 rank"
for config in "budget:" "budget:1" "before:$cpus" "before:1"; do
    mode=${config%%:*} p=${config#*:}
    label="$mode${p:+, -p$p}"
    for n in 1 2 4; do
        i=0
        : >"$tmp/runs"
        while [ "$i" -lt "$runs" ]; do
            run_ranks "$n" "$mode" "$p" >>"$tmp/runs" || exit 1
            i=$((i + 1))
        done
        m=$(median <"$tmp/runs")
        # One rank alone with the default is the reference for every row.
        [ "$config" = "budget:" ] && [ "$n" = 1 ] && alone=$m
        printf '%-14s %6s %12s %10s\n' "$label" "$n" "$m" \
            "$(awk -v a="$m" -v b="$alone" 'BEGIN { printf "%.2f", a / b }')"
    done
done
