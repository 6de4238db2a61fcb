#!/bin/sh
# tools/dev/gpu-check.sh - the GPU consumer's checks, for a machine with a GPU:
# test-cuda, test-cuda-upload, test-cuda-convert and the cuda-train example
# (all skip without a GPU, so here a
# skip counts as a failure), the same under compute-sanitizer where the
# toolkit has it, then ringfeed-bench --gpu in a few shapes, then the
# figures in one table.
#
#   sh tools/dev/gpu-check.sh [BUILD_DIR]
#
# BUILD_DIR (default _build) is a build tree configured with CUDA, e.g. by
# `tools/quickstart test` or `../configure --with-cuda`. compute-sanitizer
# is looked for on PATH, then in $CUDA_HOME/bin (default /usr/local/cuda).
# Exits non-zero when a check fails or is skipped (under the sanitizer a
# test-cuda case may skip for a second GPU, as it does without it, but
# not for want of one), or when an upload runs under 90% of the
# bandwidth of a plain cudaMemcpyAsync from cudaHostAlloc'd memory.
#
# GPU_CHECK_PARTS (default "tests sanitizer bench") picks the parts and
# GPU_CHECK_SANITIZERS (default "memcheck racecheck synccheck") the
# sanitizer's tools, for a device run that splits them
# (tools/dev/gpu-session.sh runs the tests beside other checks and the
# benchmarks alone).
set -u
parts=${GPU_CHECK_PARTS:-tests sanitizer bench}
tools=${GPU_CHECK_SANITIZERS:-memcheck racecheck synccheck}
top=$(cd "$(dirname "$0")/../.." && pwd)
# wants PART, limit SECONDS
# shellcheck source=tools/dev/gpu-lib.sh
. "$top/tools/dev/gpu-lib.sh"
build=$(cd "${1:-$top/_build}" && pwd) || exit 2
jobs=$(nproc 2>/dev/null || echo 2)
# the GPU consumer's test programs (tests/cuda-fixtures.h is theirs)
cuda_tests="tests/test-cuda tests/test-cuda-upload tests/test-cuda-convert"
failed=0

say() { printf '\n== %s\n' "$*"; }

if ! grep -q '^NVCC = .' "$build/Makefile" 2>/dev/null; then
    echo "gpu-check: $build is not configured with CUDA" >&2
    exit 2
fi
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=name,driver_version,pcie.link.gen.current,pcie.link.width.current \
        --format=csv

# A tree carried to a GPU machine without the generated autotools files
# (configure, Makefile.in) or the jpeg/zstd headers cannot be remade
# there: set GPU_CHECK_NO_BUILD=1 to run the binaries as they are.
if [ "${GPU_CHECK_NO_BUILD:-0}" != 1 ] && [ -f "$top/configure" ]; then
    say "build"
    make -C "$build" -j"$jobs" -s all >/dev/null || exit 1
    # shellcheck disable=SC2086 # $cuda_tests: words
    make -C "$build" -j"$jobs" -s $cuda_tests examples/cuda-train \
        >/dev/null || exit 1
fi

# Not through `make check`: its paths and the libtool wrappers' library
# path are the ones of the machine that configured the tree. The
# uninstalled libraries go first; LD_LIBRARY_PATH as given (e.g. the
# folder of a carried libjpeg/libturbojpeg/libzstd) stays after them.
export LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export RINGFEED_PRODUCER="$build/tools/ringfeed-producer"
for bin in "$RINGFEED_PRODUCER" "$build/tests/.libs/test-cuda" \
    "$build/tests/.libs/test-cuda-upload" \
    "$build/tests/.libs/test-cuda-convert" \
    "$build/examples/.libs/cuda-train" "$build/tools/.libs/ringfeed-bench"; do
    missing=$(ldd "$bin" 2>&1 | grep 'not found')
    if [ -n "$missing" ]; then
        echo "gpu-check: $bin cannot load:" >&2
        echo "$missing" >&2
        echo "gpu-check: put their folder in LD_LIBRARY_PATH" >&2
        exit 2
    fi
done

wants tests && say "GPU tests"
# shellcheck disable=SC2086 # $cuda_tests: words
wants tests && for t in $cuda_tests examples/cuda-train; do
    timeout --kill-after=5 "$(limit 300)" "$build/$t" >"$build/$t.gpu-check.log" 2>&1
    status=$?
    case $status in
    0) result=PASS ;;
    77) result=SKIP ;;
    *) result="FAIL ($status)" ;;
    esac
    echo "$result: $t"
    cat "$build/$t.gpu-check.log"
    [ "$result" = PASS ] || failed=1
done

# compute-sanitizer, where the toolkit has one: the tests again under
# memcheck (leaks included), racecheck and synccheck. Only the process
# itself is watched (application-only): watching all would inject the
# sanitizer into the producers, which then map libcuda, and test-cuda's
# check that producers never load CUDA would fail for the sanitizer's sake.
sanitizer=$(command -v compute-sanitizer ||
    ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2>/dev/null)
# sanitize TOOL PROGRAM [CASE]: PROGRAM (or a test program's CASE, in the
# program's own process rather than the harness's forked child) under
# TOOL; its log beside it. On 2026-11-27 every CUDA case of test-cuda
# hung under the sanitizer ("No attachable process found") with other
# sanitizer runs beside it; the cause was not established.
sanitize() {
    tool=$1
    t=$2
    what="$tool $t${3:+ \"$3\"}"
    log=$build/$t.$tool.log
    options= # the tool's own
    [ "$tool" = memcheck ] && options="--leak-check full"
    set -- ${3:+"$3"} # the program's argument
    echo "== $what" >>"$log"
    # shellcheck disable=SC2086 # $options: words
    RF_TEST_IN_PROCESS=1 timeout --kill-after=5 "$(limit 300)" "$sanitizer" \
        --target-processes application-only --error-exitcode 9 \
        --tool "$tool" $options \
        "$build/$(dirname "$t")/.libs/$(basename "$t")" "$@" \
        >"$log.one" 2>&1
    status=$?
    cat "$log.one" >>"$log"
    case $status in
    0) echo "PASS: $what: $(grep -E '(ERROR|RACECHECK) SUMMARY' "$log.one" |
        sed 's/^=* *//')" ;;
    77)
        why=$(grep -v '^=====' "$log.one" | tail -n 1)
        echo "SKIP: $what: $why"
        # skips for a second GPU or for none are the plain run's too; a
        # GPU the sanitizer hides is a failure
        case $why in *"0 CUDA devices"* | *"no CUDA device"*) failed=1 ;; esac
        ;;
    *)
        echo "FAIL ($status): $what"
        grep -v '^convert' "$log.one" | tail -n 40
        failed=1
        ;;
    esac
    rm -f "$log.one"
}
if ! wants sanitizer; then
    :
elif [ -n "$sanitizer" ]; then
    say "compute-sanitizer ($sanitizer)"
    for tool in $tools; do
        for t in $cuda_tests; do
            cases=$("$build/$(dirname "$t")/.libs/$(basename "$t")" --list)
            : >"$build/$t.$tool.log"
            while IFS= read -r case; do
                sanitize "$tool" "$t" "$case" </dev/null
            done <<EOF
$cases
EOF
        done
        : >"$build/examples/cuda-train.$tool.log"
        sanitize "$tool" examples/cuda-train
    done
else
    say "compute-sanitizer: not found, skipped (it comes with the CUDA toolkit)"
fi

# The shapes: a full ImageNet batch, a large one, a small one, and the
# first again with no step at all (the upload-bound case).
summary=
bench() {
    name=$1
    shift
    say "ringfeed-bench --gpu $*"
    out=$(timeout --kill-after=5 "$(limit 300)" "$build/tools/ringfeed-bench" --gpu "$@" 2>&1)
    status=$?
    echo "$out"
    [ $status -eq 0 ] || failed=1
    ratio=$(echo "$out" | sed -n 's/^  ratio *\([0-9.]*\).*/\1/p')
    upload=$(echo "$out" | sed -n 's/^  upload *\([0-9.]*\) GB.*/\1/p')
    plain=$(echo "$out" | sed -n 's/^  plain copy *\([0-9.]*\) GB.*/\1/p')
    share=$(echo "$out" | sed -n "s/^  copy's share *\([0-9.]*%\).*/\1/p")
    idle=$(echo "$out" | sed -n 's/^  GPU idle .*, \([0-9.]*%\) of.*/\1/p')
    overlap=$(echo "$out" |
        sed -n 's/^  hidden *of \([0-9]*\) uploads, \([0-9]*\) ran wholly.*/\2 of \1/p')
    summary="$summary
$(printf '%-26s %8s %8s %7s %8s %8s %10s' "$name" "${upload:--}" \
        "${plain:--}" "${ratio:--}" "${share:--}" "${idle:--}" \
        "${overlap:--}")"
    # With no step the copy stream never idles: no plain copy runs alone.
    case $name:$ratio in
    *"no step":*) ;;
    *: | *:0.[0-8]*) failed=1 ;; # under 0.90, or no figure
    esac
}
run_benches() {
    bench "64x224x224x3" --batch 64 --size 224 --samples 10000 --epochs 2
    bench "256x224x224x3" --batch 256 --size 224 --samples 20000
    bench "32x128x128x3" --batch 32 --size 128 --samples 10000 --epochs 2
    bench "64x224x224x3, no step" --batch 64 --size 224 --samples 10000 \
        --step-us 0

    say "figures (GB/s of the DMA; ratio = ringfeed / plain cudaMemcpyAsync)"
    printf '%-26s %8s %8s %7s %8s %8s %10s' shape upload plain ratio \
        "copy/step" "GPU idle" "overlapped"
    echo "$summary"
}
wants bench && run_benches
[ $failed -eq 0 ] && echo "gpu-check: all passed" ||
    echo "gpu-check: FAILED (see above)"
exit $failed
