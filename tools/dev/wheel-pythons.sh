#!/bin/sh
# tools/dev/wheel-pythons.sh - one wheel, several CPythons: builds the
# wheel once (pip wheel of the source tree, offline, as tests/test-wheel.sh
# does) and installs that same file in a new virtual environment of each
# PYTHON given, then runs one epoch of a small loader there from another
# folder (no source tree, no RINGFEED_ setting): the check behind
# docs/python.md's "one wheel serves CPython 3.9 to 3.13".
#
# Usage: tools/dev/wheel-pythons.sh PYTHON...
#   e.g. tools/dev/wheel-pythons.sh ~/.pyenv/versions/3.9.*/bin/python3 \
#            /usr/bin/python3 ~/.pyenv/versions/3.13.*/bin/python3
#
# numpy, the wheel's one dependency, comes from the PYTHON's own site
# packages when it has it, else pip installs it in the venv (pip's usual
# index, or PIP_FIND_LINKS / PIP_NO_INDEX as you set them). The build
# needs a configure script in the tree (autoreconf -fi) and ringfeed-synth
# for the test data: RINGFEED_TOOLS=<build>/tools (default _build/tools).
# Prints one line per PYTHON; exits 1 when any failed.
set -u

[ $# -ge 1 ] || {
    sed -n 's/^# \(Usage:.*\)/\1/p' "$0" >&2
    exit 2
}
top=$(cd "$(dirname "$0")/../.." && pwd)
tools=${RINGFEED_TOOLS:-$top/_build/tools}
work=$(mktemp -d "${TMPDIR:-/tmp}/wheel-pythons.XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' HUP INT TERM
unset RINGFEED_PRODUCER RINGFEED_LIBRARY MAKEFLAGS MFLAGS MAKELEVEL
unset RANK WORLD_SIZE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
export PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1

"$tools/ringfeed-synth" "$work/ds" --images 24 --classes 3 --jobs 2 \
    --quiet >/dev/null || { echo "ringfeed-synth failed ($tools)"; exit 1; }
printf 'building the wheel once with %s ...\n' "$1"
PIP_NO_INDEX=1 "$1" -m pip wheel --no-deps -w "$work/dist" "$top" \
    >"$work/build.log" 2>&1 || {
    tail -20 "$work/build.log"
    exit 1
}
wheel=$(ls "$work"/dist/ringfeed-*.whl) || exit 1
printf 'wheel: %s (sha256 %s)\n' "$(basename "$wheel")" \
    "$(sha256sum "$wheel" | cut -c1-16)"

status=0
n=0
for python in "$@"; do
    n=$((n + 1))
    venv=$work/venv$n
    version=$("$python" -c 'import sys; print(sys.version.split()[0])') || {
        echo "$python: does not run"
        status=1
        continue
    }
    if "$python" -c 'import numpy' 2>/dev/null; then
        made() { "$python" -m venv --system-site-packages "$venv"; }
    else
        made() { "$python" -m venv "$venv" &&
            "$venv/bin/pip" install -q numpy; }
    fi
    if ! { made && "$venv/bin/pip" install --no-index --no-deps "$wheel"; } \
        >"$work/venv$n.log" 2>&1; then
        echo "CPython $version ($python): venv or install failed:"
        tail -5 "$work/venv$n.log"
        status=1
        continue
    fi
    if out=$(cd "$work" && env -u PYTHONPATH "$venv/bin/python" - \
        "$work/ds" <<'EOF' 2>&1
import os, sys
import ringfeed
here = os.path.realpath(ringfeed.__file__)
assert here.startswith(os.path.realpath(sys.prefix) + os.sep), here
samples = 0
with ringfeed.Loader(sys.argv[1], 4, size=32, shuffle=False) as loader:
    for images, labels in loader:
        assert images.shape[0] == 4 and 32 in images.shape, images.shape
        samples += len(labels)
assert samples == 24, samples
print(f"one epoch, {samples} samples, {type(images).__module__} arrays")
EOF
    ); then
        echo "CPython $version: ok: $out"
    else
        echo "CPython $version ($python): FAILED:"
        echo "$out" | tail -5
        status=1
    fi
done
exit $status
