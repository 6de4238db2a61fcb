#!/bin/sh
# tools/bench/bench-transport.sh - what does moving a batch cost, before any work
# is done on it? Two measurements, then one table:
#
#   1. the bare channel between two processes (tools/bench/bench-channel):
#      one-way handles/s, and round trips with the reader spinning or
#      sleeping on its futex bell, then the same round trip over a pair of
#      pipes: the OS floor for a reader that sleeps, measured in the same
#      run so the sleeping figure can be read as a ratio to it;
#   2. the transport ceiling of the whole loader: ringfeed-bench with an
#      empty source and 1-sample batches, so every batch is pure overhead.
#
# Usage: tools/bench/bench-transport.sh [BUILD_DIR]     (default: _build in the
# source tree). `make bench` runs it. Environment: REPEAT (runs of each
# ceiling measurement, default 5), CHANNEL_ARGS (extra bench-channel
# options, e.g. "--repeat 3"). Exits 1 if any part failed.
set -u

me="bench-transport"
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/dev/lib.sh
. "$top/tools/dev/lib.sh"
find_build "${1-}"
repeat=${REPEAT:-5}
channel_args=${CHANNEL_ARGS:-}
channel=$build/tools/bench/bench-channel
bench=$build/tools/ringfeed-bench
# The loader finds its producer helper here, not in the install directory.
RINGFEED_PRODUCER=$build/tools/ringfeed-producer
export RINGFEED_PRODUCER

scratch_folder
failed=0

# median: of the numbers on stdin, one a line (the lower middle one when
# their count is even, as bench-channel does).
median() {
    awk '{ v[n++] = $1 + 0 }
        END {
            if (n == 0) exit 1
            for (i = 1; i < n; i++)
                for (j = i; j > 0 && v[j - 1] > v[j]; j--) {
                    t = v[j]; v[j] = v[j - 1]; v[j - 1] = t
                }
            print v[int((n - 1) / 2)]
        }'
}

# human VALUE UNIT: 23100000 handles/s -> "23.1 M handles/s".
human() {
    awk -v v="$1" -v u="$2" 'BEGIN {
        if (v >= 1e6) printf "%.1f M %s\n", v / 1e6, u
        else if (v >= 1e3) printf "%.1f k %s\n", v / 1e3, u
        else printf "%.0f %s\n", v, u
    }'
}

# ns VALUE: 412 -> "412 ns", 61352 -> "61.4 us".
ns() {
    awk -v v="$1" 'BEGIN {
        if (v >= 1e4) printf "%.1f us\n", v / 1e3
        else printf "%.0f ns\n", v
    }'
}

# ---- 1. the channel ------------------------------------------------------

# channel_mode MODE: runs bench-channel, shows its report, and leaves its
# JSON line in $tmp/MODE.
channel_mode() {
    say ""
    # shellcheck disable=SC2086 # CHANNEL_ARGS is a list of words
    if ! "$channel" --mode "$1" --json $channel_args >"$tmp/$1" \
        2>"$tmp/$1.err"; then
        failed=1
        say "bench-channel --mode $1 FAILED:"
        cat "$tmp/$1" "$tmp/$1.err"
        return 1
    fi
    sed '$d' "$tmp/$1"
    cat "$tmp/$1.err"
}

say "== the channel between two processes ($channel)"
if [ -x "$channel" ]; then
    for mode in throughput pingpong-spin pingpong-sleep pingpong-pipe; do
        channel_mode "$mode"
    done
else
    say "not built; run: make -C $build tools/bench/bench-channel"
    failed=1
fi

# ---- 2. the transport ceiling -------------------------------------------

# ceiling NAME [OPTIONS]: REPEAT runs of ringfeed-bench on an empty source;
# leaves the batches/s of each run in $tmp/ceiling-NAME, one a line.
ceiling() {
    name=$1
    shift
    : >"$tmp/ceiling-$name"
    i=1
    while [ "$i" -le "$repeat" ]; do
        if ! "$bench" --source empty --size 1 --channels 1 --batch 1 \
            --samples 1000000 --epochs 1 --json "$@" >"$tmp/run" \
            2>"$tmp/run.err"; then
            say "  run $i: ringfeed-bench FAILED:"
            tail -n 5 "$tmp/run" "$tmp/run.err"
            return 1
        fi
        rate=$(json_field "$tmp/run" batches_per_s)
        if [ -z "$rate" ]; then
            say "  run $i: no batches_per_s in the last line of its output:"
            tail -n 1 "$tmp/run"
            return 1
        fi
        say "  run $i: $(human "$rate" batches/s)"
        say "$rate" >>"$tmp/ceiling-$name"
        i=$((i + 1))
    done
}

say ""
say "== transport ceiling: ringfeed-bench --source empty --size 1" \
    "--batch 1, $repeat runs each"
if [ -x "$bench" ]; then
    say "producers: default"
    ceiling default || failed=1
    say "producers: 1"
    ceiling one --producers 1 || failed=1
else
    say "not built; run: make -C $build tools/ringfeed-bench"
    failed=1
fi

# ---- the table -------------------------------------------------------------

# row LABEL FIGURE: one line of the table, "-" when it was not measured.
row() {
    printf '  %-38s %s\n' "$1" "${2:--}"
}

# channel_figure MODE FIELD: that field of bench-channel's JSON, or empty.
channel_figure() {
    [ -s "$tmp/$1" ] && json_field "$tmp/$1" "$2"
}

round_trip() {
    med=$(channel_figure "$1" rtt_median_ns)
    p99=$(channel_figure "$1" rtt_p99_ns)
    [ -n "$med" ] && printf '%s (p99 %s)\n' "$(ns "$med")" "$(ns "$p99")"
}

# sleep_over_pipe: median sleeping round trip / median pipe round trip, to
# 2 decimals, or empty when either is missing.
sleep_over_pipe() {
    sleep_ns=$(channel_figure pingpong-sleep rtt_median_ns)
    pipe_ns=$(channel_figure pingpong-pipe rtt_median_ns)
    [ -n "$sleep_ns" ] && [ -n "$pipe_ns" ] &&
        awk -v s="$sleep_ns" -v p="$pipe_ns" \
            'BEGIN { if (p > 0) printf "%.2f\n", s / p }'
}

ceiling_figure() {
    [ -s "$tmp/ceiling-$1" ] || return 0
    m=$(median <"$tmp/ceiling-$1") && human "$m" batches/s
}

cpu=$(sed -n 's/^model name[[:space:]]*: *//p' /proc/cpuinfo 2>/dev/null |
    head -n 1)
rate=$(channel_figure throughput handles_per_s)

say ""
say "== summary (medians)"
row "machine" "$(nproc 2>/dev/null || echo '?') CPUs, ${cpu:-unknown CPU}"
row "channel one way" "$([ -n "$rate" ] && human "$rate" handles/s)"
row "round trip, spinning reader" "$(round_trip pingpong-spin)"
row "round trip, sleeping reader" "$(round_trip pingpong-sleep)"
row "round trip, pipe (OS floor)" "$(round_trip pingpong-pipe)"
row "sleeping / pipe ratio" "$(sleep_over_pipe)"
row "transport ceiling, producers default" "$(ceiling_figure default)"
row "transport ceiling, 1 producer" "$(ceiling_figure one)"
[ "$failed" -eq 0 ] || say "bench-transport: some parts FAILED (see above)"
exit "$failed"
