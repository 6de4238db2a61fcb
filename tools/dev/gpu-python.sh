#!/bin/sh
# tools/dev/gpu-python.sh - the Python package's GPU half, on a machine
# with a GPU and torch (issue 21): its GPU tests (a skip counts as a
# failure here), a few of them again under compute-sanitizer, the
# training example with AMP, and ResNet-50 steps fed by ringfeed
# (device="cuda") and by torch's DataLoader (pin_memory=True), images/s
# and GPU idle time side by side, then the figures in one table.
#
# It runs on a bundle from tools/dev/gpu-bundle.sh (a build of this tree,
# the shared libraries it needs, and pytest's pure-Python wheels
# unpacked), carried with the working tree to a machine that reaches no
# package registry:
#
#   sh tools/dev/gpu-python.sh [BUNDLE]        (default _gpu)
#
# PYTHON names the interpreter that has torch (default python3). The
# figures and logs go to $OUT when it is set (the device tool's folder),
# else to BUNDLE/python-out. WORKERS (default: the CPUs, at most 16) is
# both loaders' worker count; STEPS (default 150) the timed steps of each
# run; ROUNDS (default 2) the rounds of each. GPU_PYTHON_PARTS (default
# "tests sanitizer train bench"; "data" makes only the dataset) picks the
# parts, for a device run that splits them (tools/dev/gpu-session.sh).
# Exits 1 when a check failed or was skipped.
set -u
parts=${GPU_PYTHON_PARTS:-tests sanitizer train bench}
rounds=${ROUNDS:-2}
top=$(cd "$(dirname "$0")/../.." && pwd)
# wants PART, limit SECONDS
# shellcheck source=tools/dev/gpu-lib.sh
. "$top/tools/dev/gpu-lib.sh"
bundle=$(cd "${1:-$top/_gpu}" 2>/dev/null && pwd) || {
    echo "gpu-python: no bundle ${1:-$top/_gpu}; make one with tools/dev/gpu-bundle.sh" >&2
    exit 2
}
python=${PYTHON:-python3}
out=${OUT:-$bundle/python-out}
cpus=$(nproc 2>/dev/null || echo 2)
workers=${WORKERS:-$((cpus < 16 ? cpus : 16))}
steps=${STEPS:-150}
failed=0
mkdir -p "$out"

say() { printf '\n== %s\n' "$*"; }

export LD_LIBRARY_PATH="$bundle/build/.libs:$bundle/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The bundle's pytest only where the interpreter has none: its wheels
# (typing_extensions, packaging) would shadow the machine's own.
py=$top/python
"$python" -c 'import pytest' 2>/dev/null || py=$py:$bundle/py
export PYTHONPATH="$py${PYTHONPATH:+:$PYTHONPATH}"
export RINGFEED_LIBRARY="$bundle/build/.libs/libringfeed.so"
export RINGFEED_PRODUCER="$bundle/build/tools/ringfeed-producer"
export RINGFEED_TOOLS="$bundle/build/tools" PYTHON="$python"

say "the machine"
command -v nvidia-smi >/dev/null 2>&1 &&
    nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv
"$python" - <<'EOF' || exit 2
import sys
import torch
print("python", sys.version.split()[0], "torch", torch.__version__,
      "cuda", torch.version.cuda, "gpu",
      torch.cuda.get_device_name() if torch.cuda.is_available() else None)
for name in ("numpy", "torchvision", "PIL", "pytest"):
    try:
        module = __import__(name)
        print(name, getattr(module, "__version__", "?"))
    except ImportError:
        print(name, "MISSING")
if not torch.cuda.is_available():
    sys.exit("gpu-python: torch sees no CUDA GPU")
EOF

# run_to NAME LIMIT COMMAND...: COMMAND's output in $out/NAME.log and on
# stdout; fails the script unless it exits 0.
run_to() {
    name=$1
    limit=$2
    shift 2
    timeout --kill-after=5 "$(limit "$limit")" "$@" >"$out/$name.log" 2>&1
    status=$?
    cat "$out/$name.log"
    if [ $status -ne 0 ]; then
        echo "FAIL ($status): $name"
        failed=1
    fi
    return $status
}

run_tests() {
    say "GPU tests (tests/python/test_gpu.py, test_dtype.py)"
    run_to pytest-gpu 400 sh "$top/tests/test-package.sh" -q \
        "$top/tests/python/test_gpu.py" "$top/tests/python/test_dtype.py"
    summary=$(grep '^# test-package.sh:' "$out/pytest-gpu.log")
    case $summary in
    *" 0 failed, 0 skipped") ;;
    *) failed=1 ;;
    esac
}
wants tests && run_tests

sanitizer=$(command -v compute-sanitizer ||
    ls "${CUDA_HOME:-/usr/local/cuda}"/bin/compute-sanitizer 2>/dev/null)
if ! wants sanitizer; then
    :
elif [ -n "$sanitizer" ]; then
    # python itself, not the producers it spawns (they never load CUDA)
    say "compute-sanitizer memcheck: three of the GPU tests"
    PYTHONDONTWRITEBYTECODE=1 run_to sanitizer 300 "$sanitizer" \
        --target-processes application-only --error-exitcode 9 \
        --tool memcheck "$python" -m pytest -p no:cacheprovider -q -x \
        -k "bytes_equal or caller_waits or float32" \
        "$top/tests/python/test_gpu.py"
else
    say "compute-sanitizer: not found, skipped (it comes with the CUDA toolkit)"
fi

# Made there, not carried (500 MB), and kept out of $OUT, which comes back.
# A folder half made by a run that was cut off is made again.
data=${TMPDIR:-/tmp}/ringfeed-gpu-python-data
if { wants data || wants train || wants bench; } && [ ! -d "$data" ]; then
    say "the dataset: 6,000 synthetic ImageNet-like JPEGs"
    rm -rf "$data.part"
    "$bundle/build/tools/ringfeed-synth" "$data.part" --images 6000 \
        --classes 10 --jobs "$cpus" --quiet && mv "$data.part" "$data" ||
        exit 1
fi

if ! wants train; then
    :
elif "$python" -c 'import torchvision' 2>/dev/null; then
    say "examples/train.py with AMP: 30 steps, then resumed for 10"
    ck=$out/train.ckpt
    run_to train 300 "$python" "$top/examples/train.py" "$data" \
        --epochs 1 --batch-size 64 --workers "$workers" \
        --checkpoint "$ck" --stop-after 30 &&
        run_to train-resume 300 "$python" "$top/examples/train.py" "$data" \
            --epochs 1 --batch-size 64 --workers "$workers" \
            --checkpoint "$ck" --resume --stop-after 10
else
    say "examples/train.py: skipped, no torchvision here (its model)"
fi

run_bench() {
    say "ResNet-50 AMP steps: ringfeed device=cuda against DataLoader pin_memory=True, $workers workers"
    round=0
    while [ $round -lt "$rounds" ]; do
        round=$((round + 1))
        for loader in ringfeed torch; do
            run_to "bench-$loader-$round" 300 "$python" \
                "$top/tools/bench/bench_gpu_train.py" "$data" --loader "$loader" \
                --workers "$workers" --steps "$steps" --batch 128 ||
                continue
            tail -n 1 "$out/bench-$loader-$round.log" \
                >"$out/bench-$loader-$round.json"
        done
    done
    "$python" - "$out" <<'EOF'
import glob, json, os, statistics, sys
rows = {}
for path in sorted(glob.glob(os.path.join(sys.argv[1], "bench-*.json"))):
    r = json.load(open(path))
    rows.setdefault(r["loader"], []).append(r)
print("%-10s %10s %10s %12s  %s" % ("loader", "images/s", "GPU idle",
                                    "host wait s", "what"))
for loader, runs in rows.items():
    print("%-10s %10.0f %9.1f%% %12.2f  %s" % (
        loader, statistics.median(r["images_per_s"] for r in runs),
        statistics.median(r["gpu_idle_pct"] for r in runs),
        statistics.median(r["host_wait_s"] for r in runs),
        runs[0]["loader_kind"]))
EOF
}
wants bench && run_bench

echo
[ $failed -eq 0 ] && echo "gpu-python: all passed" || echo "gpu-python: FAILED"
exit $failed
