#!/bin/sh
# test-python.sh - examples/python-loop.py, the ctypes example, against the
# built library: its RfBatch has the offsets and size that C compiles for
# rf_batch, and a real run over synthetic JPEGs prints the batches,
# samples and checksums that tests/python-reference computes in C with
# rf_dataset_decode() (no loader, no rf_batch); a missing dataset and a
# corrupt sample raise exceptions carrying the library's detail; and no
# producer is left once the script ends, or after a loop that breaks out.
#
#     tests/test-python.sh [--list | WORD...]   every case when none is named
#
# Every case skips without python3 3.8 or later, or without the shared
# library. The build tree is the folder above $RINGFEED_TOOLS, else above
# $RINGFEED_PRODUCER's folder (make check sets both), and must hold
# tests/python-reference: by hand,
#     make -C _build tests/python-reference &&
#     RINGFEED_TOOLS=$PWD/_build/tools tests/test-python.sh
# The cases are named TOPIC/NAME (the function case_TOPIC_NAME) and run by
# tests/harness.sh, each in a subshell, as in test-tools.sh.
set -u

cases="ctypes/layout run/totals run/break_out errors/missing_dataset
errors/corrupt_sample"

# One rank of one: every sample, as the reference counts them.
unset RANK WORLD_SIZE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE

# ---- setup --------------------------------------------------------------

# What every case needs: python3 3.8 or later and the shared library (else
# they all skip), the reference program, the scratch folder, the data and
# harness.py (below).
test_setup() {
    if ! command -v python3 >/dev/null 2>&1; then
        test_skip_all="no python3"
        return 0
    fi
    if ! python3 -c 'import sys; sys.exit(sys.version_info < (3, 8))'; then
        test_skip_all="python3 is older than 3.8"
        return 0
    fi
    : "${RINGFEED_TOOLS:=$(dirname "${RINGFEED_PRODUCER:?set RINGFEED_TOOLS}")}"
    : "${RINGFEED_PRODUCER:=$RINGFEED_TOOLS/ringfeed-producer}"
    export RINGFEED_PRODUCER
    build=$(cd "$RINGFEED_TOOLS/.." && pwd) || return 1
    top=$(cd "$(dirname "$0")/.." && pwd) || return 1
    example=$top/examples/python-loop.py
    reference=$build/tests/python-reference
    lib=$build/.libs/libringfeed.so
    if [ ! -f "$lib" ]; then
        test_skip_all="no shared library at $lib"
        return 0
    fi
    [ -x "$reference" ] ||
        { echo "no $reference (make -C $build tests/python-reference)"
          return 1; }
    preload_asan
    work=$(mktemp -d "${TMPDIR:-/tmp}/rf-python-XXXXXX") || return 1
    trap 'rm -rf "$work"' EXIT
    trap 'exit 1' HUP INT TERM
    make_data
}

# A library built with AddressSanitizer loads into python3 only after its
# runtime (preloaded); PYTHONMALLOC=malloc puts Python's objects, RfBatch
# among them, in ASan's checked heap.
preload_asan() {
    asan=$(ldd "$lib" | sed -n 's/.*libasan[^ ]* => \([^ ]*\).*/\1/p')
    if [ -n "$asan" ]; then
        LD_PRELOAD=$asan
        PYTHONMALLOC=malloc
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
        export LD_PRELOAD PYTHONMALLOC ASAN_OPTIONS
    fi
}

# ---- checks -----------------------------------------------------------

# fail, run, has, lacks (and test_each, which empties $work/out and err).
# shellcheck source=tests/checks.sh
. "$(dirname "$0")/checks.sh"

# same EXPECTED ACTUAL: two files with the same lines.
same() {
    diff "$1" "$2" >"$work/diff" ||
        fail "$(printf 'differs from %s:\n%s' "${1##*/}" "$(cat "$work/diff")")"
}

# ---- data and harness ----------------------------------------------------

# $work/ds: 24 synthetic JPEGs in 3 classes (read only), and
# $work/harness.py: children(), this process's child processes (from
# /proc: a producer left behind, or a zombie no one reaped), and, run as
# a program, SCRIPT ARGS... run as python3 runs it, followed by a check
# that it left no child (exit 3 naming them).
make_data() {
    "$RINGFEED_TOOLS/ringfeed-synth" "$work/ds" --images 24 --classes 3 \
        --jobs 2 --quiet >/dev/null ||
        { echo "ringfeed-synth could not write the test data"; return 1; }
    cat >"$work/harness.py" <<'EOF'
import os
import runpy
import sys


def children():
    me = str(os.getpid())
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue  # gone meanwhile
        if fields[1] == me:  # state, then ppid
            found.append(f"{pid} ({fields[0]})")
    return found


if __name__ == "__main__":
    sys.argv = sys.argv[1:]
    try:
        runpy.run_path(sys.argv[0], run_name="__main__")
    finally:
        left = children()
        if left:
            print(f"harness: left behind: {', '.join(left)}", file=sys.stderr)
            os._exit(3)
EOF
}

# py CODE ARGS...: python3 runs CODE with harness.py importable and the
# example's globals in `m`.
py() {
    _code=$1
    shift
    PYTHONPATH=$work python3 -c "import runpy, sys
from harness import children
m = runpy.run_path(sys.argv[1])
$_code" "$example" "$@"
}

# ---- cases ------------------------------------------------------------

# RfBatch's fields in the header's order and names, at offsetof() and
# with sizeof of each, and sizeof(rf_batch) itself, as the compiler
# lays them out.
case_ctypes_layout() {
    run 0 "$reference" layout
    cp "$work/out" "$work/layout-c"
    run 0 py '
RfBatch = m["RfBatch"]
for name, _ in RfBatch._fields_:
    field = getattr(RfBatch, name)
    print(name, field.offset, field.size)
print("sizeof", m["ctypes"].sizeof(RfBatch))'
    same "$work/layout-c" "$work/out"
}

# The totals of a real run, in both layouts, with a short last batch (24
# samples in batches of 5), equal C's sample by sample; no child is left.
case_run_totals() {
    for layout in nhwc nchw; do
        run 0 "$reference" totals "$work/ds" 5 32 2 $layout
        cp "$work/out" "$work/totals-c"
        run 0 python3 "$work/harness.py" "$example" "$work/ds" --batch 5 \
            --size 32 --epochs 2 --layout $layout --library "$lib"
        grep '^epoch \|^checksums: ' "$work/out" >"$work/totals-python"
        same "$work/totals-c" "$work/totals-python"
        has "$work/out" "48 samples in"
    done
}

# A missing dataset: exit 1 with the library's detail (the path and the
# reason); from the API, a RingfeedError with the code and detail.
case_errors_missing_dataset() {
    missing=$work/no-such-folder
    run 1 python3 "$work/harness.py" "$example" "$missing" --library "$lib"
    has "$work/err" "python-loop: rf_loader_open: No such file or directory:"
    has "$work/err" "cannot open dataset '$missing'"
    run 0 py '
lib = m["load_library"](sys.argv[2])
try:
    m["Loader"](lib, sys.argv[3])
    sys.exit("opened a missing dataset")
except m["RingfeedError"] as e:
    assert e.code == -m["errno"].ENOENT, e.code
    assert e.name == "No such file or directory", e.name
    assert sys.argv[3] in e.detail and sys.argv[3] in str(e), str(e)
    assert not children(), children()
print("ok")' "$lib" "$missing"
    has "$work/out" "ok"
}

# A sample that does not decode ends the run at rf_loader_next() with the
# library's detail naming the file; the producers go with the loader.
case_errors_corrupt_sample() {
    cp -R "$work/ds" "$work/bad"
    echo "not a JPEG" >"$work/bad/class_001/broken.jpg"
    run 1 python3 "$work/harness.py" "$example" "$work/bad" --batch 5 \
        --size 32 --library "$lib"
    has "$work/err" "python-loop: rf_loader_next: a sample could not be read"
    has "$work/err" "class_001/broken.jpg"
}

# Leaving the loop early releases the batch held and the with block
# closes the loader: producers run during the loop and none is left after
# it. A generator kept past close() releases nothing (the loader took
# every batch back).
case_run_break_out() {
    run 0 py '
lib = m["load_library"](sys.argv[2])
with m["Loader"](lib, sys.argv[3], batch_size=4, size=16, epochs=3) as loader:
    for pixels, labels, batch in loader:
        assert pixels.shape == (4, 16, 16, 3) and len(labels) == 4
        during = children()
        break
    kept = iter(loader)
    next(kept)
assert during, "no producer seen during the loop"
assert not children(), children()
kept.close()
print("ok")' "$lib" "$work/ds"
    has "$work/out" "ok"
}

# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
