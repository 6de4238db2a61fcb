#!/bin/sh
# tools/bench/bench-pipeline.sh - ringfeed beside the two loaders it is meant to
# beat, on the same JPEG files in one run:
#
#   (a) ringfeed: ringfeed-bench on the folder, training transform (random
#       resized crop + flip) to 224x224 uint8, batches of 64, one producer
#       per CPU (the default);
#   (b) a plain decode loop: tools/bench/bench-decode, one process per CPU, each
#       decoding its share of the files at full scale with TurboJPEG and
#       doing nothing else. The floor that crop-region and DCT-scaled
#       decoding should beat;
#   (c) PyTorch's DataLoader with torchvision (tools/bench/bench_torch.py):
#       ImageFolder, RandomResizedCrop(224) + RandomHorizontalFlip +
#       PILToTensor, batches of 64, one worker per CPU.
#
# For each: images/s (median of RUNS runs), CPU-seconds per 1,000 images,
# peak memory, and the ratios a/b and a/c. The runs are interleaved
# a,b,c,a,b,c,... so that drift in the machine's load hits all three alike.
#
# How each figure is taken:
#   images/s  each program's own clock: ringfeed-bench's samples_per_s (from
#             rf_loader_open()'s return to the last batch), bench-decode's
#             images over its wall time (first fork to last reap), and
#             bench_torch.py's images_per_s (from iter(loader)'s return to
#             the last batch). Start-up is shown apart.
#   CPU       user+sys from /usr/bin/time -f around each command: the
#             process and every descendant it reaped (ringfeed's producers,
#             the decode processes, PyTorch's workers). For (c) this
#             includes starting Python and importing torch, so the in-script
#             getrusage figure over the epoch alone is shown too.
#   memory    peak of the sum of Pss over the command's process tree, from
#             /proc/PID/smaps_rollup, by this script: the tree's Rss is
#             checked every 50 ms and its Pss read at each new Rss high and
#             every 2 s (see sample_peak). Pss splits shared pages among
#             their users, so ringfeed's shared slots and PyTorch's shared
#             tensors count once.
#
# Last, the decode work alone: bench-decode --side-by-side times ringfeed's
# crop decode against the full decode in one process, file by file, on the
# CPU clock (no processes, batches or file reads in either), with the floor
# under both: libjpeg's entropy decoding alone, which no crop can skip.
# From it, an estimate of the most a/c can be on this machine: the rate of
# every CPU doing nothing but that decode work, over (c)'s.
#
# The dataset is ringfeed-synth's ImageNet-like JPEGs, written once under
# BUILD_DIR/bench-data/ and reused. Before every round of runs the files are
# read once, so the page cache is warm and no disk is measured.
#
# Usage: tools/bench/bench-pipeline.sh [--images N] [--runs R] [--no-decode-alone]
#                                [BUILD_DIR]
# (defaults 2000, 3, and _build in the source tree). --no-decode-alone
# leaves out the last part, the decode work alone, which decodes every file
# a dozen times in one process (over a minute for 6,000). PyTorch runs under
# /usr/bin/python3 (Debian's python3-torch), or $TORCH_PYTHON. Exits 1 if
# any run failed, 2 on bad usage.
set -u

usage() {
    sed -n '/^# Usage:/,/bad usage\.$/s/^# //p' "$0"
}

images=2000
runs=3
decode_alone=1
classes=10
build_arg=
me="bench-pipeline"
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/dev/lib.sh
. "$top/tools/dev/lib.sh"
while [ $# -gt 0 ]; do
    case $1 in
    --images | --runs)
        count_option "$1" "${2-}"
        if [ "$1" = --images ]; then images=$2; else runs=$2; fi
        shift 2
        ;;
    --no-decode-alone)
        decode_alone=0
        shift
        ;;
    *)
        other_argument "$1"
        shift
        ;;
    esac
done

find_build "$build_arg"
# The program itself rather than libtool's wrapper (see bench_program).
bench_program
bench_env=${bench_libs:+LD_LIBRARY_PATH=$bench_libs}
producer=$build/tools/ringfeed-producer
synth=$build/tools/ringfeed-synth
decode=$build/tools/bench/bench-decode
torch_py=$top/tools/bench/bench_torch.py
python=${TORCH_PYTHON:-/usr/bin/python3}
data=$build/bench-data/synth-$images-$classes
cpus=$(nproc)

require_built "$bench" "$producer" "$synth" "$decode" "$python"
scratch_folder
failed=0

# ---- the dataset -------------------------------------------------------

# write_data DIR: the dataset, into DIR (see write_once).
# shellcheck disable=SC2317 # write_once calls it
write_data() {
    say "== writing the dataset (once): $data"
    "$synth" "$1" --images "$images" --classes "$classes" --quiet
}

# Reads every file once so that all three find them in the page cache;
# imports torch once too, so the first PyTorch run does not page in its
# libraries from disk.
warm_up() {
    find "$data" -type f -exec cat {} + >/dev/null
    "$python" -c 'import torch, torchvision' 2>/dev/null
}

# ---- measuring one command ---------------------------------------------

# sample_peak ROOT OUT: the peak over the run of the sum of Pss over ROOT's
# descendants (not ROOT itself, which is /usr/bin/time), in kB, and the
# sampler's own CPU seconds, written to OUT once the file $tmp/stop
# appears.
#
# Every 50 ms it sums their Rss from /proc/PID/statm, which costs next to
# nothing. Reading smaps_rollup walks every resident page: for PyTorch's
# tree that took ~12 ms of kernel time per sample here, 25% of a CPU at 20
# samples a second, stolen from the runs it measures, and the most from
# the biggest. So Pss is read when the Rss sum reaches a new high (by 2%)
# and otherwise every 2 s; that cost ~0.35 s of CPU in a 12 s PyTorch run,
# and its peak came within 2% of reading Pss at every sample.
#
# tools/bench/bench_measure.py's `sample` does it (the same sampler as
# bench-python.sh's), in one Python process: it reads /proc cheaply and
# survives a process that exits under it.
sample_peak() {
    "$python" "$top/tools/bench/bench_measure.py" sample "$1" "$tmp/stop" "$2"
}

# measure NAME RUN COMMAND...: runs COMMAND under /usr/bin/time with the
# sampler beside it. Leaves in $tmp/NAME.RUN.{out,err,time,pss} its
# stdout, stderr, "wall user sys" and peak Pss in kB; records the command
# line in $tmp/NAME.cmd. Returns COMMAND's exit status.
measure() {
    name=$1
    run=$2
    shift 2
    base=$tmp/$name.$run
    quote "$@" >"$tmp/$name.cmd"
    rm -f "$tmp/stop"
    /usr/bin/time -f '%e %U %S' -o "$base.time" "$@" \
        >"$base.out" 2>"$base.err" &
    root=$!
    sample_peak "$root" "$base.pss" &
    sampler=$!
    wait "$root"
    rc=$?
    : >"$tmp/stop"
    wait "$sampler"
    return "$rc"
}

# cpu_s NAME RUN: user+sys seconds from /usr/bin/time (its last line: a
# failed command's status comes first).
cpu_s() {
    tail -n 1 "$tmp/$1.$2.time" | awk '{ printf "%.3f\n", $2 + $3 }'
}

# record NAME FIGURE VALUE: one value a line, for the medians.
record() {
    printf '%s\n' "$3" >>"$tmp/$1.$2"
}

# fail NAME RUN WHY: says the run failed and shows its output verbatim.
fail() {
    failed=1
    say "  run $2 $1: FAILED ($3); its output:"
    sed 's/^/    | /' "$tmp/$1.$2.out" "$tmp/$1.$2.err"
}

# common_figures NAME RUN IMAGES: CPU and memory, which every run has;
# memory is "?" when the sampler left nothing.
common_figures() {
    cpu=$(cpu_s "$1" "$2")
    record "$1" cpu_per_k "$(awk -v c="$cpu" -v n="$3" \
        'BEGIN { printf "%.4f\n", c / n * 1000 }')"
    mb='?'
    if { read -r pss sampler <"$tmp/$1.$2.pss"; } 2>/dev/null; then
        mb=$(awk -v k="$pss" 'BEGIN { printf "%.1f\n", k / 1024 }')
        record "$1" pss_mb "$mb"
        record "$1" sampler_cpu "$sampler"
    fi
    printf 'CPU %s s, peak PSS %s MB' "$cpu" "$mb"
}

# measured NAME RUN FIELD COMMAND...: measure, then sets `out` to the
# run's stdout and `n` to the number FIELD in its JSON line; says the run
# failed and returns 1 when COMMAND did.
measured() {
    name=$1
    run=$2
    field=$3
    shift 3
    if ! measure "$name" "$run" "$@"; then
        fail "$name" "$run" "exit status $rc"
        return 1
    fi
    out=$tmp/$name.$run.out
    n=$(json_field "$out" "$field")
}

# all_images NAME RUN: whether the run yielded all the images, which it
# fails when not.
all_images() {
    [ "${n:-0}" = "$images" ] && return 0
    fail "$1" "$2" "$n of $images images"
    return 1
}

# ---- the three contenders ----------------------------------------------

run_ringfeed() {
    measured ringfeed "$1" samples env ${bench_env:+"$bench_env"} \
        RINGFEED_PRODUCER="$producer" "$bench" \
        --source "$data" --transform train --size 224 --batch 64 --json ||
        return
    errors=$(json_field "$out" errors)
    if [ "${n:-0}" != "$images" ] || [ "${errors:-1}" != 0 ]; then
        fail ringfeed "$1" "$n of $images images, errors: $errors"
        return
    fi
    rate=$(json_field "$out" samples_per_s)
    secs=$(json_field "$out" seconds)
    startup=$(json_field "$out" startup_s)
    record ringfeed rate "$rate"
    record ringfeed startup "$startup"
    record ringfeed rate_all "$(awk -v n="$n" -v s="$secs" -v u="$startup" \
        'BEGIN { printf "%.1f\n", n / (s + u) }')"
    printf '  run %s (a) ringfeed: %.1f images/s, start-up %.3f s, %s\n' \
        "$1" "$rate" "$startup" "$(common_figures ringfeed "$1" "$n")"
}

run_decode() {
    measured decode "$1" images "$decode" "$data" --processes "$cpus" \
        --json && all_images decode "$1" || return
    rate=$(json_field "$out" images_per_s)
    record decode rate "$rate"
    record decode rate_all "$rate"
    printf '  run %s (b) decode loop: %.1f images/s, %s\n' \
        "$1" "$rate" "$(common_figures decode "$1" "$n")"
}

run_torch() {
    measured torch "$1" images "$python" "$torch_py" "$data" --batch 64 \
        --size 224 --workers "$cpus" && all_images torch "$1" || return
    rate=$(json_field "$out" images_per_s)
    startup=$(json_field "$out" startup_s)
    first=$(json_field "$out" first_batch_s)
    inner=$(json_field "$out" cpu_s)
    record torch rate "$rate"
    record torch startup "$startup"
    record torch rate_all "$(json_field "$out" images_per_s_with_startup)"
    record torch epoch_cpu_per_k "$(awk -v c="$inner" -v n="$n" \
        'BEGIN { printf "%.4f\n", c / n * 1000 }')"
    printf '  run %s (c) PyTorch: %.1f images/s, start-up %.3f s (first' \
        "$1" "$rate" "$startup"
    printf ' batch %.3f s later), epoch CPU %.2f s, %s\n' "$first" "$inner" \
        "$(common_figures torch "$1" "$n")"
}

# ---- the table -----------------------------------------------------------

# median: of the numbers on stdin, one a line (the lower middle one when
# their count is even).
median() {
    sort -n | awk '{ v[n++] = $1 } END { if (n) print v[int((n - 1) / 2)] }'
}

# figure NAME FIGURE [FORMAT]: the median, or "-" when no run yielded it.
figure() {
    if [ -s "$tmp/$1.$2" ]; then
        median <"$tmp/$1.$2" | awk -v f="${3:-%.1f}" '{ printf f "\n", $1 }'
    else
        say -
    fi
}

# ratio A B TARGET: A/B to 2 decimals, and whether it meets TARGET.
ratio() {
    awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN {
        if (a == "-" || b == "-" || b <= 0) { print "-"; exit }
        r = a / b
        printf "%.2f  (target >= %s: %s)\n", r, t, (r >= t ? "met" : "NOT met")
    }'
}

# round_ratio NAME TARGET: the median over rounds of ringfeed's images/s
# over NAME's in the same round. A round runs the three back to back, so
# this is less exposed to the machine's drift than the ratio of the
# medians. Only when every round of both succeeded, so that lines pair up.
round_ratio() {
    lines() { awk 'END { print NR }' "$1" 2>/dev/null; }
    if [ "$(lines "$tmp/ringfeed.rate")" != "$runs" ] ||
        [ "$(lines "$tmp/$1.rate")" != "$runs" ]; then
        say -
        return
    fi
    ratio "$(paste "$tmp/ringfeed.rate" "$tmp/$1.rate" |
        awk '$2 > 0 { print $1 / $2 }' | median)" 1 "$2"
}

row() {
    printf '  %-22s %9s %11s %9s %13s %12s\n' "$@"
}

# ---- the run -------------------------------------------------------------

write_once "$data" write_data || {
    say "bench-pipeline: could not write the dataset $data"
    exit 1
}
say "== $images images in $classes classes: $data" \
    "($(du -sh "$data" | cut -f 1))"
say "== machine: $cpus CPUs, $(sed -n 's/^model name[[:space:]]*: *//p' \
    /proc/cpuinfo | head -n 1), load average $(cut -d ' ' -f 1-3 \
    /proc/loadavg) at the start"
say "== library: $(git -C "$top" describe --always --dirty 2>/dev/null ||
    say unknown) as built in $build; uncommitted in lib/:" \
    "$(git -C "$top" status --porcelain -- lib 2>/dev/null | wc -l) files"
# Others change lib/ while this runs: say when the binaries are older.
stale=$(find "$top/lib" -name '*.[ch]' -newer "$producer" | wc -l)
[ "$stale" -eq 0 ] || say "== WARNING: $stale files in lib/ are newer than" \
    "$producer: run make in $build"

i=1
while [ "$i" -le "$runs" ]; do
    say "== round $i of $runs (page cache warmed first)"
    warm_up
    run_ringfeed "$i"
    run_decode "$i"
    run_torch "$i"
    i=$((i + 1))
done

say ""
say "== commands"
say "  dataset (once): $(quote "$synth" "$data.partial" --images \
    "$images" --classes "$classes" --quiet), then renamed to $data"
say "  warm-up (every round): $(quote find "$data" -type f -exec cat {} +) \
>/dev/null"
say "  then each of these under /usr/bin/time -f '%e %U %S', sampled:"
for name in ringfeed decode torch; do
    [ -s "$tmp/$name.cmd" ] && say "  $(cat "$tmp/$name.cmd")"
done

a=$(figure ringfeed rate)
b=$(figure decode rate)
c=$(figure torch rate)
say ""
say "== medians of $runs runs; $images images, 224x224 uint8 batches of 64;" \
    "$cpus processes each"
say "   load average at the end: $(cut -d ' ' -f 1-3 /proc/loadavg)"
row "" images/s "incl. start" "start s" "CPU s/1k img" "peak PSS MB"
row "(a) ringfeed" "$a" "$(figure ringfeed rate_all)" \
    "$(figure ringfeed startup %.3f)" "$(figure ringfeed cpu_per_k %.2f)" \
    "$(figure ringfeed pss_mb)"
row "(b) TurboJPEG loop" "$b" "$(figure decode rate_all)" - \
    "$(figure decode cpu_per_k %.2f)" "$(figure decode pss_mb)"
row "(c) PyTorch DataLoader" "$c" "$(figure torch rate_all)" \
    "$(figure torch startup %.3f)" "$(figure torch cpu_per_k %.2f)" \
    "$(figure torch pss_mb)"
say "  CPU s/1k img: user+sys from /usr/bin/time, of the whole command"
say "    and the children it reaped; (c) over the epoch alone (getrusage"
say "    in bench_torch.py, no interpreter start or imports):" \
    "$(figure torch epoch_cpu_per_k %.2f)"
say "  peak PSS: sum over the process tree; Rss checked every 50 ms, Pss"
say "    read at each new Rss high and every 2 s. The sampler's own CPU"
say "    (in no figure above), median per run:" \
    "(a) $(figure ringfeed sampler_cpu %.2f) s," \
    "(b) $(figure decode sampler_cpu %.2f) s," \
    "(c) $(figure torch sampler_cpu %.2f) s"
say "  a/b  $(ratio "$a" "$b" 1.2)"
say "  a/c  $(ratio "$a" "$c" 3.5)"
say "  the median of each round's own ratio (a, b, c run back to back):"
say "  a/b  $(round_ratio decode 1.2)"
say "  a/c  $(round_ratio torch 3.5)"
# On a busy machine the wall clock says how much CPU the others left us;
# CPU per image says what each pipeline costs, which on a machine they have
# to themselves bounds the rate (CPUs / CPU-s per image).
say "  the same from CPU-s per image (less sensitive to others' load):"
say "  a/b  $(ratio "$(figure decode cpu_per_k %.4f)" \
    "$(figure ringfeed cpu_per_k %.4f)" 1.2)"
say "  a/c  $(ratio "$(figure torch cpu_per_k %.4f)" \
    "$(figure ringfeed cpu_per_k %.4f)" 3.5); with (c)'s epoch alone:" \
    "$(ratio "$(figure torch epoch_cpu_per_k %.4f)" \
        "$(figure ringfeed cpu_per_k %.4f)" 3.5)"
# The decode alone, no processes, batches or file reads: ringfeed's crop
# decode and the full decode alternate file by file in one process.
# Its output goes through a file: in a pipeline the exit status would be
# sed's, and a failed decode would pass unseen.
# It also gives an estimate of the most a/c can be on this machine: CPUs
# doing nothing but ringfeed's decode work, with no file reads, batches or
# processes, would give CPUs / (ms per image) images/s.
if [ "$decode_alone" -eq 1 ]; then
    say "  decode work alone, one process, the two alternating per file" \
        "($(quote "$decode" "$data" --side-by-side 3)):"
    if "$decode" "$data" --side-by-side 3 --json >"$tmp/side-by-side"; then
        sed -n 's/^  /    /p' "$tmp/side-by-side"
        crop_ms=$(json_field "$tmp/side-by-side" crop_ms)
        say "  the most a/c can be here (an estimate), $cpus CPUs doing" \
            "only that work:" \
            "$(awk -v n="$cpus" -v ms="$crop_ms" -v c="$c" 'BEGIN {
                if (ms <= 0 || c == "-" || c <= 0) { print "-"; exit }
                printf "%d / %.3f ms = %.0f images/s, over (c)\x27s %s: %.2f\n",
                    n, ms, n * 1000 / ms, c, n * 1000 / ms / c }')"
    else
        cat "$tmp/side-by-side"
        say "bench-pipeline: the side-by-side decode FAILED"
        failed=1
    fi
fi
[ "$failed" -eq 0 ] || say "bench-pipeline: some runs FAILED (see above)"
exit "$failed"
