#!/bin/sh
# test-wheel.sh - the Python package as pip builds and installs it: `pip
# wheel` of the source tree through the in-tree backend
# (python/build_backend/ringfeed_build.py), what the wheel holds, and the
# wheel installed in a new virtual environment running a loader with no
# compiler, no source tree and no setting pointing at the build.
#
#     tests/test-wheel.sh [--list | WORD...]   every case when none is named
#
# Every case skips without a python3 of 3.9 or later that has venv,
# ensurepip and numpy ($PYTHON, else python3, else Debian's /usr/bin/python3,
# where apt's python3-numpy and python3-venv go), and in a sanitizer build
# (the wheel is built without the sanitizers whatever the build tree was
# configured with, so that build's run would only repeat the plain one).
# The wheel is built once, by the first case that needs it (a full build
# of the C library: the slow part), offline (pip --no-index). The test data
# come from $RINGFEED_TOOLS/ringfeed-synth (make check sets it); by hand,
#     RINGFEED_TOOLS=$PWD/_build/tools tests/test-wheel.sh
# The cases are named TOPIC/NAME (the function case_TOPIC_NAME) and run by
# tests/harness.sh, each in a subshell, as in test-tools.sh.
set -u

cases="wheel/builds wheel/contents wheel/fresh_venv_runs
wheel/missing_library_named wheel/configure_failure_shown
wheel/configured_in_place_said wheel/sdist
wheel/sdist_builds_under_spaces wheel/strays_left_out wheel/reproducible
wheel/editable_refused wheel/pyproject_read"

# One rank of one: every sample.
unset RANK WORLD_SIZE OMPI_COMM_WORLD_RANK OMPI_COMM_WORLD_SIZE
# The wheel's own library and helper, nothing of the build tree's; no make
# jobserver or command-line variables from a make check above.
unset RINGFEED_PRODUCER RINGFEED_LIBRARY MAKEFLAGS MFLAGS MAKELEVEL
# pip alone, with no user configuration, index or cache; no byte code
# written into the source tree.
PIP_CONFIG_FILE=/dev/null PIP_NO_INDEX=1 PIP_NO_CACHE_DIR=1
PIP_DISABLE_PIP_VERSION_CHECK=1 PYTHONDONTWRITEBYTECODE=1
export PIP_CONFIG_FILE PIP_NO_INDEX PIP_NO_CACHE_DIR
export PIP_DISABLE_PIP_VERSION_CHECK PYTHONDONTWRITEBYTECODE
# Builds stamped with one date (2023-11-14), so that two can be compared.
SOURCE_DATE_EPOCH=1700000000
export SOURCE_DATE_EPOCH

# ---- setup --------------------------------------------------------------

# find_python: sets $python to the first candidate of 3.9 or later that
# can make a virtual environment with pip and has numpy (the wheel's one
# dependency, offline), else returns 1.
find_python() {
    for python in ${PYTHON:-} python3 /usr/bin/python3; do
        command -v "$python" >/dev/null 2>&1 || continue
        "$python" -c 'import sys, venv, ensurepip, numpy
sys.exit(sys.version_info < (3, 9))' 2>/dev/null && return 0
    done
    return 1
}

test_setup() {
    if ! find_python; then
        test_skip_all="no python3 >= 3.9 with venv, ensurepip, numpy"
        test_skip_all="$test_skip_all (python3-venv, python3-numpy)"
        return 0
    fi
    : "${RINGFEED_TOOLS:?set RINGFEED_TOOLS to the tools/ of a build tree}"
    top=$(cd "$(dirname "$0")/.." && pwd) || return 1
    build=$(cd "$RINGFEED_TOOLS/.." && pwd) || return 1
    if [ -f "$build/.libs/libringfeed.so" ] &&
        ldd "$build/.libs/libringfeed.so" | grep -Eq 'lib(a|t|ub)san'; then
        test_skip_all="a sanitizer build (the wheel is built without them)"
        return 0
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/rf-wheel-XXXXXX") || return 1
    trap 'rm -rf "$work"' EXIT
    trap 'exit 1' HUP INT TERM
    mkdir "$work/tmp" "$work/dist" "$work/elsewhere"
    version=$(sed -n 's/^AC_INIT(\[ringfeed\], *\[\([^]]*\)\].*/\1/p' \
        "$top/configure.ac")
    platform=$("$python" -c 'import re, sysconfig
print(re.sub(r"[-.]", "_", sysconfig.get_platform()))') || return 1
    wheel=$work/dist/ringfeed-$version-py3-none-$platform.whl
    venv=$work/venv
    "$RINGFEED_TOOLS/ringfeed-synth" "$work/ds" --images 24 --classes 3 \
        --jobs 2 --quiet >/dev/null ||
        { echo "ringfeed-synth could not write the test data"; return 1; }
}

# ---- checks -----------------------------------------------------------

# fail, run, has, lacks (and test_each, which empties $work/out and err).
# shellcheck source=tests/checks.sh
. "$(dirname "$0")/checks.sh"

# built: the wheel, built by the first case that asks (pip wheel of the
# source tree, its temporary folders under $work/tmp), with pip's verbose
# log in $work/build.log and its status in $work/build.status. The build
# runs at a low priority: make check runs tests with deadlines beside it.
built() {
    if [ ! -f "$work/build.status" ]; then
        {
            "$python" -m venv --system-site-packages "$venv" &&
                TMPDIR=$work/tmp nice -n 15 "$venv/bin/pip" wheel -v \
                    --no-deps -w "$work/dist" "$top"
        } >"$work/build.log" 2>&1
        echo $? >"$work/build.status"
    fi
    [ "$(cat "$work/build.status")" = 0 ] ||
        fail "pip wheel failed (status $(cat "$work/build.status")):
$(tail -n 30 "$work/build.log")"
    [ -f "$wheel" ] || fail "no ${wheel##*/} in dist/: $(ls "$work/dist")"
}

# installed: the wheel installed in $venv (once), with pip --no-index:
# numpy comes from the system's site packages.
installed() {
    built
    if [ ! -f "$work/install.status" ]; then
        "$venv/bin/pip" install "$wheel" >"$work/install.log" 2>&1
        echo $? >"$work/install.status"
    fi
    [ "$(cat "$work/install.status")" = 0 ] ||
        fail "pip install of the wheel failed: $(cat "$work/install.log")"
}

# ---- cases ------------------------------------------------------------

# pip wheel of the source tree builds one wheel, named with configure.ac's
# version and tagged for any Python 3 on this platform, printing the
# commands it ran (configure and make, no autoreconf: the tree has a
# configure), in a temporary folder that is gone afterwards.
case_wheel_builds() {
    built
    # shellcheck disable=SC2012 # names made here
    [ "$(ls "$work/dist" | wc -l)" -eq 1 ] ||
        fail "dist/ holds $(ls "$work/dist")"
    has "$work/build.log" "ringfeed_build: source/ is a link to $top"
    has "$work/build.log" "ringfeed_build: configure: source/configure "
    has "$work/build.log" "ringfeed_build: make: make -j"
    has "$work/build.log" "libringfeed.la tools/ringfeed-producer"
    lacks "$work/build.log" "ringfeed_build: autoreconf"
    left=$(find "$work/tmp" -name 'ringfeed-build-*')
    [ -z "$left" ] || fail "build folders left behind: $left"
}

# The wheel holds the modules and py.typed of python/ringfeed/, the
# library under its
# SONAME (a regular file) and the helper (executable), and METADATA,
# WHEEL and RECORD; RECORD's hashes and sizes match every file. Neither
# native file has a run path (libtool's build-tree paths) or debug
# sections (three quarters of their size; the symbols stay), both find
# every library they need, and the helper has the library's code inside.
case_wheel_contents() {
    built
    run 0 "$python" - "$wheel" "$top/python/ringfeed" "$version" <<'EOF'
import base64, csv, hashlib, io, os, stat, sys, zipfile
wheel, source, version = sys.argv[1:]
info = f"ringfeed-{version}.dist-info"
z = zipfile.ZipFile(wheel)
names = set(z.namelist())
expected = {f"ringfeed/{os.path.relpath(os.path.join(d, f), source)}"
            for d, _, files in os.walk(source)
            if "__pycache__" not in d and "/." not in d
            for f in files if f == "py.typed"
            or (f.endswith(".py") and f[0] != ".")}
expected |= {"ringfeed/_native/libringfeed.so.0",
             "ringfeed/_native/ringfeed-producer",
             f"{info}/METADATA", f"{info}/WHEEL", f"{info}/RECORD"}
assert names == expected, ("missing", expected - names,
                           "extra", names - expected)
for name in names:
    mode = z.getinfo(name).external_attr >> 16
    assert stat.S_ISREG(mode), f"{name} is not a regular file: {oct(mode)}"
    executable = name.startswith("ringfeed/_native/")
    assert bool(mode & 0o111) == executable, f"{name}: mode {oct(mode)}"
records = list(csv.reader(io.StringIO(z.read(f"{info}/RECORD").decode())))
assert {r[0] for r in records} == names, "RECORD does not list every file"
for path, digest, size in records:
    if path == f"{info}/RECORD":
        assert digest == size == "", "RECORD hashes itself"
        continue
    data = z.read(path)
    want = "sha256=" + base64.urlsafe_b64encode(
        hashlib.sha256(data).digest()).rstrip(b"=").decode()
    assert (digest, int(size)) == (want, len(data)), f"{path}: RECORD differs"
wheel_file = z.read(f"{info}/WHEEL").decode()
assert "Root-Is-Purelib: false\n" in wheel_file, wheel_file
assert "Tag: py3-none-" in wheel_file, wheel_file
meta = z.read(f"{info}/METADATA").decode()
for line in ("Name: ringfeed", f"Version: {version}",
             "Requires-Python: >=3.9", "Requires-Dist: numpy"):
    assert f"\n{line}\n" in meta, f"METADATA lacks {line}"
z.extractall(os.path.join(os.path.dirname(wheel), "..", "unpacked"))
print("ok")
EOF
    has "$work/out" "ok"
    native=$work/unpacked/ringfeed/_native
    for file in libringfeed.so.0 ringfeed-producer; do
        # without debug sections (three quarters of the size), with symbols
        run 0 readelf -S "$native/$file"
        lacks "$work/out" ".debug_info"
        has "$work/out" ".symtab"
        run 0 readelf -d "$native/$file"
        lacks "$work/out" "RPATH"
        lacks "$work/out" "RUNPATH"
        cp "$work/out" "$work/$file.dynamic"
        run 0 ldd "$native/$file"
        lacks "$work/out" "not found"
    done
    has "$work/libringfeed.so.0.dynamic" "Library soname: [libringfeed.so.0]"
    lacks "$work/ringfeed-producer.dynamic" "libringfeed"
}

# The wheel installed in a new virtual environment (numpy from the
# system's packages), then used from another folder with the venv's
# python alone on PATH (no compiler), no RINGFEED_ setting and no source
# tree on the path: the package is the venv's, of configure.ac's version
# (its __version__ and its metadata), a loader delivers every sample of
# one epoch in batches of the asked shape, its producers are the wheel's
# helper, and none is left once it closes.
case_wheel_fresh_venv_runs() {
    installed
    cd "$work/elsewhere" || fail "no $work/elsewhere"
    run 0 env -u PYTHONPATH -u LD_LIBRARY_PATH -u PYTHONHOME \
        PATH="$venv/bin" python - "$work/ds" "$version" <<'EOF'
import importlib.metadata, os, sys
import ringfeed
versions = ringfeed.__version__, importlib.metadata.version("ringfeed")
assert versions == (sys.argv[2],) * 2, versions

def children():
    me, found = str(os.getpid()), []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[1] == me:
                    found.append(pid)
        except OSError:
            pass  # gone meanwhile
    return found

here = os.path.dirname(os.path.realpath(ringfeed.__file__))
assert here.startswith(os.path.realpath(sys.prefix) + os.sep), here
assert not [d for d in os.environ["PATH"].split(":") for cc in ("cc", "gcc")
            if os.access(os.path.join(d, cc), os.X_OK)], "a compiler on PATH"
helper = os.path.join(here, "_native", "ringfeed-producer")
samples, classes, helpers = 0, set(), set()
with ringfeed.Loader(sys.argv[1], 4, size=32, layout="nchw",
                     shuffle=False) as loader:
    assert len(loader) == 6, len(loader)
    for images, labels in loader:
        assert tuple(images.shape) == (4, 3, 32, 32), images.shape
        samples += len(labels)
        classes.update(int(label) for label in labels)
        for pid in children():
            try:
                helpers.add(os.readlink(f"/proc/{pid}/exe"))
            except OSError:
                pass  # gone meanwhile
assert (samples, classes) == (24, {0, 1, 2}), (samples, classes)
assert helpers == {helper}, helpers
assert not children(), children()
print("ok", type(images).__module__)
EOF
    has "$work/out" "ok"
}

# A build whose configure cannot find a library it needs (pkg-config
# looking in an empty folder) fails with the Debian package to install,
# and leaves no wheel.
case_wheel_missing_library_named() {
    built # the venv, and so pip
    mkdir -p "$work/empty" "$work/failed"
    run 1 env PKG_CONFIG_LIBDIR="$work/empty" PKG_CONFIG_PATH= \
        TMPDIR="$work/tmp" "$venv/bin/pip" wheel --no-deps \
        -w "$work/failed" "$top"
    cat "$work/out" "$work/err" >"$work/both"
    has "$work/both" "ringfeed_build: error: configure failed"
    has "$work/both" "apt-get install libjpeg62-turbo-dev"
    [ -z "$(ls "$work/failed")" ] || fail "a failed build left a wheel"
}

# A configure failure that is no missing package (here configure options
# asking for CUDA where there is none) shows configure's own last lines
# and keeps its log, config.log, where the message says, not the list of
# build packages (all of them installed), and leaves no wheel.
case_wheel_configure_failure_shown() {
    built # the venv, and so pip
    mkdir -p "$work/empty" "$work/failed"
    run 1 env RINGFEED_CONFIGURE_ARGS="--with-cuda=$work/empty" \
        TMPDIR="$work/tmp" "$venv/bin/pip" wheel --no-deps \
        -w "$work/failed" "$top"
    cat "$work/out" "$work/err" >"$work/both"
    has "$work/both" "ringfeed_build: error: configure failed; its last lines:"
    has "$work/both" \
        "    configure: error: --with-cuda=$work/empty: no bin/nvcc"
    lacks "$work/both" "Debian packages"
    lacks "$work/both" "apt-get install"
    log=$(sed -n 's/.*its whole log (config.log) is kept in //p' \
        "$work/both")
    [ -n "$log" ] || fail "no config.log named"
    has "$log" "error: --with-cuda=$work/empty: no bin/nvcc there"
    [ -z "$(ls "$work/failed")" ] || fail "a failed build left a wheel"
}

# sdist_made: the source distribution in $work/sdist (once), made by the
# backend's build_sdist; its output in $work/out.
sdist_made() {
    built # the venv
    [ -f "$work/sdist/ringfeed-$version.tar.gz" ] && return 0
    run 0 env TMPDIR="$work/tmp" "$venv/bin/python" -c '
import sys
sys.path.insert(0, sys.argv[1] + "/python/build_backend")
import ringfeed_build
print(ringfeed_build.build_sdist(sys.argv[2]))' "$top" "$work/sdist"
    has "$work/out" "ringfeed-$version.tar.gz"
}

# pip wheel of a tree configured in place (./configure there, which
# leaves config.status; automake's configure then refuses to build it in
# another folder) fails saying so, with what to run, not with the list
# of build packages (none is missing), and leaves no wheel.
case_wheel_configured_in_place_said() {
    sdist_made
    mkdir -p "$work/configured" "$work/failed"
    tar -xzf "$work/sdist/ringfeed-$version.tar.gz" -C "$work/configured" ||
        fail "tar cannot unpack the sdist"
    tree=$work/configured/ringfeed-$version
    : >"$tree/config.status"
    run 1 env TMPDIR="$work/tmp" "$venv/bin/pip" wheel --no-deps \
        -w "$work/failed" "$tree"
    cat "$work/out" "$work/err" >"$work/both"
    has "$work/both" "ringfeed_build: error: $tree was configured in place"
    has "$work/both" "run make distclean in $tree"
    lacks "$work/both" "the build needs the Debian packages"
    [ -z "$(ls "$work/failed")" ] || fail "a failed build left a wheel"
}

# The source distribution: the release tarball's files (make distdir)
# with PKG-INFO, under ringfeed-VERSION/, holding what pip needs to build
# the wheel from it (configure included: no autotools needed).
case_wheel_sdist() {
    sdist_made
    tar -tzf "$work/sdist/ringfeed-$version.tar.gz" >"$work/sdist.list" ||
        fail "tar cannot read the sdist"
    for file in PKG-INFO pyproject.toml configure Makefile.in configure.ac \
        python/build_backend/ringfeed_build.py python/ringfeed/__init__.py \
        include/ringfeed.h; do
        grep -qx "ringfeed-$version/$file" "$work/sdist.list" ||
            fail "the sdist lacks $file"
    done
}

# The files an editor or a patch leaves beside the package's own, which
# spaced_built adds to its tree.
strays="loader.py~ .loader.py.swp loader.py.orig loader.py.rej"

# spaced_built: a second wheel, in $work/spaced/ (once): pip wheel of
# the unpacked sdist in a folder whose path has a space (a user's "My
# Projects"), with $strays in its python/ringfeed/, pip's verbose log in
# $work/spaced.log, its status in $work/spaced.status.
spaced_built() {
    sdist_made
    if [ ! -f "$work/spaced.status" ]; then
        unpacked="$work/a folder/ringfeed-$version"
        mkdir -p "$work/a folder" "$work/spaced"
        tar -xzf "$work/sdist/ringfeed-$version.tar.gz" -C "$work/a folder" ||
            fail "tar cannot unpack the sdist"
        for stray in $strays; do
            echo "left here" >"$unpacked/python/ringfeed/$stray"
        done
        TMPDIR=$work/tmp nice -n 15 "$venv/bin/pip" wheel -v --no-deps \
            -w "$work/spaced" "$unpacked" >"$work/spaced.log" 2>&1
        echo $? >"$work/spaced.status"
        rm -rf "$work/a folder"
    fi
    [ "$(cat "$work/spaced.status")" = 0 ] ||
        fail "pip wheel of the sdist under spaces failed:
$(tail -n 20 "$work/spaced.log")"
    [ -f "$work/spaced/${wheel##*/}" ] ||
        fail "no ${wheel##*/} in spaced/: $(ls "$work/spaced")"
}

# pip wheel of the unpacked sdist in a folder whose path has a space
# (automake's configure refuses such a source folder, "unsafe srcdir
# value") builds the wheel, with the library and the helper.
case_wheel_sdist_builds_under_spaces() {
    spaced_built
    run 0 "$venv/bin/python" -c '
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
assert "ringfeed/_native/libringfeed.so.0" in names, names
assert "ringfeed/_native/ringfeed-producer" in names, names
print("ok")' "$work/spaced/${wheel##*/}"
    has "$work/out" "ok"
}

# The files an editor or a patch leaves in python/ringfeed/ (a backup,
# loader.py~, a swap file, .orig and .rej) stay out of the wheel, and the
# build output says so: only the modules and py.typed go in.
case_wheel_strays_left_out() {
    spaced_built
    run 0 "$python" - "$work/spaced/${wheel##*/}" "$strays" <<'EOF'
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
taken = [n for n in names if n.rsplit("/", 1)[-1] in sys.argv[2].split()]
assert not taken, taken
print("ok")
EOF
    has "$work/out" "ok"
    has "$work/spaced.log" \
        "ringfeed_build: left out of the wheel (only modules and py.typed"
    for stray in $strays; do
        grep "left out of the wheel" "$work/spaced.log" | grep -qF "$stray" ||
            fail "the build output does not say $stray was left out"
    done
}

# Two builds of the same files (the source tree's, and the sdist's
# unpacked elsewhere), each in a temporary build folder of a random name,
# give byte-identical wheels with SOURCE_DATE_EPOCH set (as this script
# sets it): the time stamps are that date, and the native files' GNU
# build-id, a hash that covered the build folder's path in the debug
# information, is the same (the backend maps that path to "." in it).
case_wheel_reproducible() {
    built
    spaced_built
    other=$work/spaced/${wheel##*/}
    cmp -s "$wheel" "$other" && return 0
    run 0 "$python" - "$wheel" "$other" <<'EOF'
import sys, zipfile
a, b = (zipfile.ZipFile(path) for path in sys.argv[1:])
names = sorted(set(a.namelist()) | set(b.namelist()))
print(*(n for n in names if n not in a.namelist() or n not in b.namelist()
        or a.read(n) != b.read(n) or a.getinfo(n).date_time
        != b.getinfo(n).date_time))
EOF
    fail "two builds of one tree gave different wheels; they differ in:
$(cat "$work/out")"
}

# pip install -e (an editable install, PEP 660) is refused by the
# backend with what to do instead, not by pip in its own terms ("its
# build backend is missing the 'build_editable' hook ... Consider using a
# build backend that supports PEP 660"), and installs nothing.
case_wheel_editable_refused() {
    built # the venv
    run 1 env TMPDIR="$work/tmp" "$venv/bin/pip" install -e "$top"
    cat "$work/out" "$work/err" >"$work/both"
    has "$work/both" "ringfeed_build: error: ringfeed has no editable install"
    has "$work/both" "pip install . again"
    has "$work/both" "RINGFEED_LIBRARY=_build/.libs/libringfeed.so"
    lacks "$work/both" "PEP 660"
    lacks "$work/both" "Successfully installed"
}

# The backend's own reader of pyproject.toml gives what tomllib gives
# (Python 3.11 and later; 3.9 and 3.10 have no tomllib to compare with).
case_wheel_pyproject_read() {
    "$python" -c 'import tomllib' 2>/dev/null ||
        skip "no tomllib (Python 3.10 or older)"
    run 0 "$python" -c '
import sys, tomllib
sys.path.insert(0, sys.argv[1] + "/python/build_backend")
import ringfeed_build
text = open(sys.argv[1] + "/pyproject.toml").read()
assert ringfeed_build.read_toml(text) == tomllib.loads(text)
print("ok")' "$top"
    has "$work/out" "ok"
}

# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
