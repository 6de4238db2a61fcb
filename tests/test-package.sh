#!/bin/sh
# test-package.sh - the Python package's tests (tests/python/, pytest)
# against the build tree's library: python/ringfeed/ from the source tree
# (PYTHONPATH), the library from RINGFEED_LIBRARY, the build tree's
# shared library.
#
#     tests/test-package.sh [--list | PYTEST ARGUMENTS...]
#
# --list prints the tests' ids; other arguments go to pytest (-k WORD, -x,
# test files or ids, which then run alone). Ends with the line
# tools/quickstart adds up,
#
#     # test-package.sh: N passed, N failed, N skipped
#
# from pytest's own report (JUnit XML: a test that errors in its set-up
# counts as failed; xfail as skipped), and exits 0, 1, or 77 when every
# test skipped. The whole program skips (77, no line) without a python3
# that has pytest and numpy ($PYTHON, else python3, else Debian's
# /usr/bin/python3, where apt's python3-pytest, python3-numpy and
# python3-torch go; one that has torch too is preferred), without the
# shared library, or in a sanitizer build (an ASan or TSan library cannot
# be loaded into an uninstrumented python). The build tree is the folder
# above $RINGFEED_TOOLS, else above $RINGFEED_PRODUCER's folder (make check
# sets both); the tests find its tools through RINGFEED_TOOLS, the build
# tree as RINGFEED_BUILD and its tests/python-reference as
# RINGFEED_REFERENCE (make check builds it first). By hand:
#     make -C _build tests/python-reference &&
#     RINGFEED_TOOLS=$PWD/_build/tools tests/test-package.sh -k lifetime
set -u

name=${0##*/}
top=$(cd "$(dirname "$0")/.." && pwd) || exit 1
tests=$top/tests/python

skip_all() {
    echo "SKIP: $name: $*"
    exit 77
}

# The first candidate of 3.9 or later with the modules MODULES (a comma
# list) importable, in $python; else returns 1.
find_python() {
    for python in ${PYTHON:-} python3 /usr/bin/python3; do
        command -v "$python" >/dev/null 2>&1 || continue
        "$python" -c "import sys, $1
sys.exit(sys.version_info < (3, 9))" 2>/dev/null && return 0
    done
    return 1
}

find_python "pytest, numpy, torch" || find_python "pytest, numpy" ||
    skip_all "no python3 of 3.9 or later with pytest and numpy" \
        "(apt-get install python3-pytest python3-numpy python3-torch)"

: "${RINGFEED_TOOLS:=$(dirname "${RINGFEED_PRODUCER:?set RINGFEED_TOOLS}")}"
build=$(cd "$RINGFEED_TOOLS/.." && pwd) || exit 1
lib=$build/.libs/libringfeed.so
[ -f "$lib" ] || skip_all "no shared library at $lib"
if ldd "$lib" | grep -Eq 'lib(a|t|ub)san'; then
    skip_all "a sanitizer build: its library cannot be loaded into" \
        "python3, which is built without the sanitizers"
fi
[ -d "$tests" ] || skip_all "no tests at $tests"

PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
RINGFEED_LIBRARY=$lib
RINGFEED_BUILD=$build
RINGFEED_REFERENCE=$build/tests/python-reference
# No byte code and no pytest cache in the source tree (read-only under
# make distcheck); one rank of one unless a test sets its own.
PYTHONDONTWRITEBYTECODE=1
export PYTHONPATH RINGFEED_LIBRARY RINGFEED_BUILD RINGFEED_REFERENCE
export RINGFEED_TOOLS
export PYTHONDONTWRITEBYTECODE
unset RANK WORLD_SIZE LOCAL_RANK OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE

if [ "${1:-}" = "--list" ]; then
    exec "$python" -m pytest -p no:cacheprovider --collect-only -q \
        "$tests"
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/rf-package-XXXXXX") || exit 1
trap 'rm -rf "$work"' EXIT
trap 'exit 1' HUP INT TERM

"$python" -c 'import sys; print(sys.argv[1], sys.executable, sys.version)' \
    "$name:"
# Test files or ids among the arguments (a .py file or an id with ::,
# not the value of an option such as -k): those alone; else every test.
everything=$tests
value=false
for arg in "$@"; do
    if $value; then
        value=false
        continue
    fi
    case $arg in
    -k | -m | -o | -p | --deselect | --ignore) value=true ;;
    -*) ;;
    *.py | *.py::*) [ -e "${arg%%::*}" ] && everything= ;;
    esac
done
# A test that hangs prints every thread's stack after 5 minutes; the
# program's time limit (tests/run-test.sh) ends the run.
"$python" -m pytest -p no:cacheprovider -o faulthandler_timeout=300 \
    -rfEs --junitxml="$work/report.xml" ${everything:+"$everything"} "$@"
status=$?

# passed, failed (and errors), skipped, from the report.
if [ -f "$work/report.xml" ]; then
    # shellcheck disable=SC2046 # three numbers
    set -- $("$python" - "$work/report.xml" <<'EOF'
import sys
import xml.etree.ElementTree as ET
root = ET.parse(sys.argv[1]).getroot()
suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
n = {k: sum(int(s.get(k, 0)) for s in suites)
     for k in ("tests", "failures", "errors", "skipped")}
failed = n["failures"] + n["errors"]
print(n["tests"] - failed - n["skipped"], failed, n["skipped"])
EOF
    )
    [ $# -eq 3 ] && echo "# $name: $1 passed, $2 failed, $3 skipped"
fi
case $status in
0) [ "${1:-0}" -gt 0 ] || exit 77; exit 0 ;;
5) skip_all "pytest collected no test in tests/python" ;;
*) exit 1 ;;
esac
