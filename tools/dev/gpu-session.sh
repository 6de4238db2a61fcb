#!/bin/sh
# tools/dev/gpu-session.sh - every GPU check of the project in one device
# run of a few minutes, for a session lent a GPU machine for 15 minutes
# in all (tools/dev/gpu-check.sh and gpu-python.sh take longer, one
# part after another):
#
#   sh tools/dev/gpu-bundle.sh                 # here: _gpu/
#   sh tools/dev/gpu-session.sh [BUNDLE]       # there, carrying _gpu
#
# 1. Side by side, nothing timed: the C consumer's tests (test-cuda,
#    test-cuda-upload, test-cuda-convert, cuda-train), the Python
#    package's GPU tests, and the 6,000-image dataset the later parts
#    read.
# 2. One at a time, for figures: ringfeed-bench --gpu in four shapes,
#    examples/train.py with AMP (30 steps, then resumed for 10), ResNet-50
#    AMP steps fed by ringfeed and by torch's DataLoader.
# 3. With the time left, one at a time: compute-sanitizer's memcheck on
#    three Python GPU tests, then memcheck, racecheck and synccheck on
#    the C tests (each case of the three test-cuda programs its own
#    sanitizer run, in the program's own process: RF_TEST_IN_PROCESS in
#    tests/harness.h). On 2026-11-27, with two or three sanitizers
#    running at once, test-cuda's CUDA cases (then one program) hung
#    under each ("No attachable process found"); alone, on 2026-11-26,
#    they had passed.
#
# SESSION_S (default 390) bounds the whole run; each part gets at most
# what is left. The logs go to $OUT/gpu-session.tar.gz (one file: the
# device tool brings back at most 8) and the summary to stdout and
# $OUT/summary.txt. Exits 1 when a check failed, was skipped or was cut
# off.
set -u
top=$(cd "$(dirname "$0")/../.." && pwd)
bundle=$(cd "${1:-$top/_gpu}" 2>/dev/null && pwd) || {
    echo "gpu-session: no bundle ${1:-$top/_gpu}; make one with tools/dev/gpu-bundle.sh" >&2
    exit 2
}
out=${OUT:-$bundle/session-out}
logs=${TMPDIR:-/tmp}/ringfeed-gpu-session
limit=${SESSION_S:-390}
start=$(date +%s)
rm -rf "$logs"
mkdir -p "$logs" "$out"

left() { echo $((start + limit - $(date +%s))); }
note() { echo "[$(($(date +%s) - start)) s] $*"; }

# part NAME SECONDS COMMAND...: COMMAND's output in $logs/NAME.log, its
# exit status in $logs/NAME.rc (124: cut off at SECONDS or the run's end).
part() {
    name=$1
    seconds=$2
    shift 2
    [ "$seconds" -gt "$(left)" ] && seconds=$(left)
    if [ "$seconds" -lt 20 ]; then
        note "$name: no time left"
        echo 124 >"$logs/$name.rc"
        return
    fi
    note "$name: started (at most $seconds s)"
    # the inner scripts' own limits end 10 s before this one
    timeout --kill-after=5 "$seconds" env \
        GPU_DEADLINE=$(($(date +%s) + seconds - 10)) "$@" \
        >"$logs/$name.log" 2>&1
    echo $? >"$logs/$name.rc"
    note "$name: exit $(cat "$logs/$name.rc")"
}

# What tools/dev/gpu-check.sh and gpu-python.sh share in every part.
export GPU_CHECK_NO_BUILD=1 ROUNDS="${ROUNDS:-1}" STEPS="${STEPS:-100}"
export LD_LIBRARY_PATH="$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
check=$top/tools/dev/gpu-check.sh
python=$top/tools/dev/gpu-python.sh

note "side by side: the tests, the dataset"
part c-tests 120 env GPU_CHECK_PARTS=tests sh "$check" "$bundle/build" &
part python-tests 120 env OUT="$logs/py-tests" GPU_PYTHON_PARTS=tests \
    sh "$python" "$bundle" &
part data 120 env OUT="$logs/py-data" GPU_PYTHON_PARTS=data \
    sh "$python" "$bundle" &
wait

note "one at a time: the figures"
part c-bench 90 env GPU_CHECK_PARTS=bench sh "$check" "$bundle/build"
part python-train-bench 150 env OUT="$logs/py-train-bench" \
    GPU_PYTHON_PARTS="train bench" sh "$python" "$bundle"

note "with the time left, one at a time: compute-sanitizer"
part python-memcheck 120 env OUT="$logs/py-memcheck" \
    GPU_PYTHON_PARTS=sanitizer sh "$python" "$bundle"
for tool in memcheck racecheck synccheck; do
    part "c-$tool" 150 env GPU_CHECK_PARTS=sanitizer \
        GPU_CHECK_SANITIZERS="$tool" sh "$check" "$bundle/build"
done

# The C checks' own logs lie in the build tree.
for f in "$bundle"/build/tests/*.log "$bundle"/build/examples/*.log; do
    [ -f "$f" ] && cp "$f" "$logs/"
done

failed=0
for rc in "$logs"/*.rc; do
    [ "$(cat "$rc")" = 0 ] || failed=1
done
{
    echo "gpu-session: $(($(date +%s) - start)) s in all"
    for rc in "$logs"/*.rc; do
        name=$(basename "$rc" .rc)
        echo "== $name: exit $(cat "$rc")"
        grep -hE '^(PASS|FAIL|SKIP|python )|passed|failed|gpu-check:|gpu-python:|loss|images/s' \
            "$logs/$name.log" 2>/dev/null | grep -v '^  ' | tail -n 25
    done
    for table in "$logs/c-bench.log" "$logs/python-train-bench.log"; do
        [ -f "$table" ] || continue
        echo "== figures from $(basename "$table")"
        sed -n '/^== figures/,$p; /^loader /,/^$/p' "$table"
    done
} | tee "$out/summary.txt"
# (not the training checkpoint: a file comes back only under 16 MiB)
tar -czf "$out/gpu-session.tar.gz" --exclude="*.ckpt" -C "$logs" .
exit $failed
