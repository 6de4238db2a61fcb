#!/bin/sh
# tools/bench/bench-python.sh - ringfeed from Python beside ringfeed from C
# and the loaders a PyTorch user would otherwise pick, in one run, on the
# same JPEG files (issue 21, item 7). Five contenders, each with WORKERS
# processes or threads (default 2), batches of 64, the training transform
# (random resized crop + horizontal flip) to 224x224 uint8:
#
#   (a) ringfeed.Loader in a Python loop, torch tensors (N, 3, 224, 224):
#       tools/bench/bench_loaders.py ringfeed, the package in python/ of
#       this tree over the build's libringfeed.so;
#   (b) ringfeed-bench, the C tool, on the same folder, --layout nchw;
#   (c) torch 2.x DataLoader + ImageFolder whose loader decodes with
#       torchvision.io.decode_jpeg, then v2.RandomResizedCrop(224,
#       antialias=True) + v2.RandomHorizontalFlip;
#   (d) torch 2.x DataLoader + ImageFolder with PIL, the same transforms;
#   (e) NVIDIA DALI's CPU pipeline: fn.readers.file +
#       fn.decoders.image_random_crop (device="cpu") + fn.resize + fn.flip,
#       no GPU, WORKERS threads.
#
# bench_loaders.py says exactly what (a), (c), (d) and (e) do, and what their
# clocks cover. Per batch each loop only receives the batch and counts its
# labels; ringfeed-bench takes each batch and gives it back. None reads a
# pixel.
#
# torch, torchvision and DALI come from PyPI into a virtual environment
# this script makes and keeps (--venv, default .bench-venv/ in the source
# tree, which git ignores): first torch's CPU wheels from PyTorch's own
# index, else PyPI's; DALI as nvidia-dali-cuda130, else -cuda120 (it runs
# on the CPU alone here). What cannot be installed or imported is said,
# with pip's reason, and the rest runs without it. Nothing here runs in CI.
#
# Figures, for each kind of image: images/s (each loader's own clock, from
# the end of its start-up to the last batch; start-up shown apart),
# CPU-seconds per 1,000 images (user+sys of the process, all its threads
# and the children it reaped: for the Python loaders over the loader's own
# span, from building it to closing it, without the interpreter's start
# or imports, which are shown apart; for ringfeed-bench its whole command)
# and peak memory (the sum of Pss over the process tree, sampled; see
# bench_measure.py). Medians of RUNS runs, interleaved a b c d e, a b c d
# e, ... with the page cache warmed before each round, so that drift in
# the machine's load hits all alike. Then the ratios a/b, a/c, a/d and
# a/e of the medians, of each round's own and by CPU per image, against
# the targets (a >= 0.95 b, a >= 2.5 c, a >= 2.5 e), and one JSON line.
#
# Kinds of image: the synthetic ImageNet-like folder of ringfeed-synth
# (short side 256-500, JPEG quality 90-95, ~82 KB), written once under
# BUILD_DIR/bench-data/ and reused; and, with --photos DIR, a folder of
# class folders of real photographs, benchmarked the same way.
#
# Usage: tools/bench/bench-python.sh [--images N] [--epochs E] [--runs R]
#                  [--workers W] [--photos DIR] [--venv DIR] [BUILD_DIR]
# (defaults 5000 images, 1 epoch, 3 runs, 2 workers, .bench-venv in the
# source tree, _build in the source tree). Each run goes over the folder
# E times in one process, so that a fast loader runs long enough to
# measure. PYTHON names the interpreter the environment is made from
# (default /usr/bin/python3). Exits 1 if any run failed, 2 on bad usage
# or a missing build.
set -u

usage() {
    sed -n '/^# Usage:/,/missing build\.$/s/^# \{0,1\}//p' "$0"
}

images=5000
epochs=1
runs=3
workers=2
photos=
venv=
build_arg=
me="bench-python"
top=$(cd "$(dirname "$0")/../.." && pwd)
# shellcheck source=tools/dev/lib.sh
. "$top/tools/dev/lib.sh"
while [ $# -gt 0 ]; do
    case $1 in
    --images | --runs | --epochs | --workers)
        count_option "$1" "${2-}"
        case $1 in
        --images) images=$2 ;;
        --runs) runs=$2 ;;
        --epochs) epochs=$2 ;;
        --workers) workers=$2 ;;
        esac
        shift 2
        ;;
    --photos | --venv)
        if [ -z "${2-}" ]; then
            printf 'bench-python: %s wants a folder\n' "$1" >&2
            exit 2
        fi
        if [ "$1" = --photos ]; then photos=$2; else venv=$2; fi
        shift 2
        ;;
    *)
        other_argument "$1"
        shift
        ;;
    esac
done

find_build "$build_arg"
bench_program
producer=$build/tools/ringfeed-producer
synth=$build/tools/ringfeed-synth
library=$build/.libs/libringfeed.so
base_python=${PYTHON:-/usr/bin/python3}
# The harness and the report need the standard library only.
python=$base_python
measure_py=$top/tools/bench/bench_measure.py
loaders_py=$top/tools/bench/bench_loaders.py
venv=${venv:-$top/.bench-venv}
data=$build/bench-data/synth-$images-10

require_built "$bench" "$producer" "$synth" "$base_python"
[ -e "$library" ] || {
    printf '%s: %s is missing; run make in %s\n' "$me" "$library" "$build" >&2
    exit 2
}
if [ -n "$photos" ]; then
    given=$photos
    photos=$(cd "$given" 2>/dev/null && pwd) || {
        printf '%s: --photos: no folder %s\n' "$me" "$given" >&2
        exit 2
    }
fi
scratch_folder
results=$tmp/results
mkdir -p "$results/unavailable"

# unavailable NAME WHY...: NAME will not run; the report says why.
unavailable() {
    name=$1
    shift
    say "$*" >"$results/unavailable/$name"
    say "== $name will not run: $*"
}

# ---- the virtual environment ---------------------------------------------

vpython=$venv/bin/python

# pip_install LOG ARG...: pip install into the environment, its output in
# LOG; says pip's last error line when it fails.
pip_install() {
    log=$1
    shift
    say "   pip install $*"
    if "$vpython" -m pip install --disable-pip-version-check -q "$@" \
        >"$log" 2>&1; then
        return 0
    fi
    say "   failed: $(last_error "$log")"
    return 1
}

# last_error LOG: pip's last error line in LOG, for the report, and why
# the index could not be reached when that was the cause (pip then says
# only that no version was found).
last_error() {
    why=$(grep -E '^ERROR|rror:' "$1" | tail -n 1 | cut -c 1-300)
    net=$(sed -n \
        's/.*\(Failed to establish a new connection: [^'"'"']*\).*/\1/p;
        s/.*\(Read timed out\).*/\1/p' "$1" | tail -n 1)
    say "$why${net:+ (the index could not be reached: $net)}"
}

# has_torch: whether the environment imports torch 2.x and torchvision.
has_torch() {
    "$vpython" -c 'import torch, torchvision, sys
sys.exit(int(torch.__version__.split(".")[0]) < 2)' >/dev/null 2>&1
}

has_dali() {
    "$vpython" -c 'import nvidia.dali' >/dev/null 2>&1
}

make_venv() {
    if [ ! -x "$vpython" ]; then
        say "== making the virtual environment $venv (from $base_python)"
        "$base_python" -m venv "$venv" >"$tmp/venv.log" 2>&1 || {
            unavailable torch-io "no virtual environment: $(tail -n 1 \
                "$tmp/venv.log")"
            cp "$results/unavailable/torch-io" "$results/unavailable/torch-pil"
            cp "$results/unavailable/torch-io" "$results/unavailable/dali"
            cp "$results/unavailable/torch-io" "$results/unavailable/ringfeed"
            return 1
        }
    fi
    if has_torch; then
        say "== torch 2.x and torchvision: already in $venv"
    else
        say "== installing torch and torchvision into $venv"
        # PyTorch's CPU wheels are a tenth the size of PyPI's, which bring
        # CUDA's libraries; where its index cannot be reached, PyPI's.
        pip_install "$tmp/pip-torch-cpu.log" --retries 0 --timeout 20 \
            --index-url https://download.pytorch.org/whl/cpu \
            torch torchvision ||
            pip_install "$tmp/pip-torch.log" torch torchvision
        has_torch || {
            why="torch 2.x and torchvision could not be installed from"
            why="$why PyPI: $(last_error "$tmp/pip-torch.log")"
            unavailable torch-io "$why"
            unavailable torch-pil "$why"
        }
    fi
    if has_dali; then
        say "== NVIDIA DALI: already in $venv"
    else
        say "== installing NVIDIA DALI into $venv"
        # Both wheels hold the CPU operators; cuda130 shares the CUDA 13
        # libraries that PyPI's torch brings.
        pip_install "$tmp/pip-dali130.log" nvidia-dali-cuda130 ||
            pip_install "$tmp/pip-dali120.log" nvidia-dali-cuda120
        has_dali || unavailable dali "DALI could not be installed:" \
            "nvidia-dali-cuda130: $(last_error "$tmp/pip-dali130.log");" \
            "nvidia-dali-cuda120: $(last_error "$tmp/pip-dali120.log")"
    fi
}

# The environment in which (a) imports this tree's package.
ringfeed_env() {
    env PYTHONPATH="$top/python" RINGFEED_LIBRARY="$library" \
        RINGFEED_PRODUCER="$producer" "$@"
}

check_ringfeed_package() {
    [ -e "$results/unavailable/ringfeed" ] && return
    if [ ! -d "$top/python/ringfeed" ]; then
        unavailable ringfeed "this tree has no python/ringfeed package"
        return
    fi
    if ! ringfeed_env "$vpython" -c 'import ringfeed, torch' \
        >"$tmp/import-ringfeed.log" 2>&1; then
        unavailable ringfeed "python/ringfeed does not import:" \
            "$(tail -n 1 "$tmp/import-ringfeed.log")"
    fi
}

# ---- the contenders ---------------------------------------------------------

# one NAME KIND DIR RUN: runs contender NAME over DIR, measured, into
# $results/KIND/NAME.RUN.*; prints its line.
one() {
    name=$1 kind=$2 dir=$3 run=$4
    [ -e "$results/unavailable/$name" ] && return 0
    out=$results/$kind/$name.$run
    set -- --batch 64 --size 224 --workers "$workers" --epochs "$epochs" \
        --seed "$run"
    case $name in
    ringfeed-bench)
        set -- env ${bench_libs:+LD_LIBRARY_PATH="$bench_libs"} \
            RINGFEED_PRODUCER="$producer" "$bench" --source "$dir" \
            --transform train --size 224 --batch 64 --producers "$workers" \
            --layout nchw --epochs "$epochs" --seed "$run" --json --quiet
        ;;
    ringfeed)
        set -- env PYTHONPATH="$top/python" RINGFEED_LIBRARY="$library" \
            RINGFEED_PRODUCER="$producer" "$vpython" "$loaders_py" \
            "$name" "$dir" "$@"
        ;;
    *)
        set -- "$vpython" "$loaders_py" "$name" "$dir" "$@"
        ;;
    esac
    quote "$@" >"$results/$name.cmd"
    if "$python" "$measure_py" run "$out" -- "$@"; then
        # The loader's own line; ringfeed-bench --json prints none.
        line=$(grep -v '^{' "$out.out" | tail -n 1)
        if [ -z "$line" ]; then
            line=$(printf \
                '%s images in %.3f s (%.1f images/s), start-up %.3f s' \
                "$(json_field "$out.out" samples)" \
                "$(json_field "$out.out" seconds)" \
                "$(json_field "$out.out" samples_per_s)" \
                "$(json_field "$out.out" startup_s)")
        fi
        say "  run $run $name: $line"
    else
        failed=1
        say "  run $run $name: FAILED; its output:"
        sed 's/^/    | /' "$out.out" "$out.err" | tail -n 20
    fi
}

# warm_up DIR: every file read once, so that all find them in the page
# cache, and torch imported once, so that no run pages in its libraries.
warm_up() {
    find "$1" -type f -exec cat {} + >/dev/null
    "$vpython" -c 'import torch, torchvision' >/dev/null 2>&1
    "$vpython" -c 'import nvidia.dali' >/dev/null 2>&1
}

# rounds KIND DIR: RUNS rounds of the five over DIR.
rounds() {
    mkdir -p "$results/$1"
    say "== $1: $(find "$2" -type f | wc -l) files in $2 ($(du -sh "$2" |
        cut -f 1))"
    i=1
    while [ "$i" -le "$runs" ]; do
        say "== $1, round $i of $runs (page cache warmed first)"
        warm_up "$2"
        for name in ringfeed ringfeed-bench torch-io torch-pil dali; do
            one "$name" "$1" "$2" "$i"
        done
        i=$((i + 1))
    done
}

# ---- the run ----------------------------------------------------------------

# write_data DIR: the dataset, into DIR (see write_once).
# shellcheck disable=SC2317 # write_once calls it
write_data() {
    say "== writing the dataset (once): $data"
    "$synth" "$1" --images "$images" --classes 10 --quiet
}

failed=0
make_venv
check_ringfeed_package
write_once "$data" write_data || {
    say "bench-python: could not write the dataset $data"
    exit 1
}
say "== machine: $(nproc) CPUs, $(sed -n 's/^model name[[:space:]]*: *//p' \
    /proc/cpuinfo | head -n 1), load average $(cut -d ' ' -f 1-3 \
    /proc/loadavg) at the start"
say "== library: $(git -C "$top" describe --always --dirty 2>/dev/null ||
    say unknown) as built in $build"
stale=$(find "$top/lib" -name '*.[ch]' -newer "$library" | wc -l)
[ "$stale" -eq 0 ] || say "== WARNING: $stale files in lib/ are newer than" \
    "$library: run make in $build"
say "== $workers workers each, batches of 64, train at 224, $epochs" \
    "epoch(s) a run"

kinds=synthetic
rounds synthetic "$data"
if [ -n "$photos" ]; then
    kinds="$kinds photos"
    rounds photos "$photos"
fi

say ""
say "== commands (DIR: the folder of each kind), each run as"
say "   $(quote "$python" "$measure_py" run OUT --) COMMAND:"
for name in ringfeed ringfeed-bench torch-io torch-pil dali; do
    [ -s "$results/$name.cmd" ] && say "   $(cat "$results/$name.cmd")"
done
say "   load average at the end: $(cut -d ' ' -f 1-3 /proc/loadavg)"
set --
for k in $kinds; do set -- "$@" --kind "$k"; done
"$python" "$measure_py" report "$results" --runs "$runs" "$@" || failed=1
[ "$failed" -eq 0 ] || say "bench-python: some runs FAILED (see above)" >&2
exit "$failed"
