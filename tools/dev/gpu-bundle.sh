#!/bin/sh
# tools/dev/gpu-bundle.sh - makes _gpu/ (git-ignored): a CUDA build of this
# tree and the shared libraries it runs with (libjpeg-turbo, zstd, libpng,
# libwebp, the CUDA runtime), plus pytest's pure-Python wheels unpacked in
# _gpu/py, for a GPU machine that has the CUDA runtime (and torch, for the
# Python half) but no package registry. Carry the folder there with the
# working tree and run, from the tree's root:
#
#   sh tools/dev/gpu-session.sh _gpu               # all of it, ~6.5 min
#
# or the parts one after the other (longer than a 15-minute lease):
#
#   GPU_CHECK_NO_BUILD=1 LD_LIBRARY_PATH=$PWD/_gpu/lib \
#       sh tools/dev/gpu-check.sh _gpu/build      # the C consumer
#   sh tools/dev/gpu-python.sh _gpu                # the Python package
#
# Needs what tools/quickstart needs, plus nvcc and apt-get (for
# `apt-get download`, which needs no root). Prints the bundle's size: the
# device tool carries at most 64 MiB.
#
#   sh tools/dev/gpu-bundle.sh [CUDA_HOME [OUT]]
#
# CUDA_HOME picks the toolkit (default: nvcc on PATH or /usr/local/cuda):
# a GPU machine whose driver is older than the toolkit cannot run its
# runtime, so a second bundle built with an older toolkit is the fallback
# (e.g. `sh tools/dev/gpu-bundle.sh /opt/cuda12 _gpu12`). OUT defaults to _gpu;
# a relative OUT is taken from the tree's top. OUT is emptied first, so a
# folder that exists and is not an earlier bundle is refused.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
cuda=${1:-}
out=${2:-_gpu}
case $out in /*) ;; *) out=$top/$out ;; esac
jobs=$(nproc 2>/dev/null || echo 2)

if [ -n "$cuda" ]; then
    [ -x "$cuda/bin/nvcc" ] || {
        echo "gpu-bundle: $cuda/bin/nvcc not found" >&2
        exit 2
    }
    with_cuda=--with-cuda=$cuda
else
    command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || {
        echo "gpu-bundle: no nvcc here; the bundle needs a CUDA build" >&2
        exit 2
    }
    with_cuda=--with-cuda
fi
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
if [ -e "$out" ] && ! { [ -d "$out/build" ] && [ -d "$out/lib" ]; }; then
    echo "gpu-bundle: $out exists and is not an earlier bundle; not emptying it" >&2
    exit 2
fi
rm -rf "$out"
mkdir -p "$out/build" "$out/lib" "$out/debs/root"

# The binaries: libtool's real ones under .libs/ find libringfeed through
# LD_LIBRARY_PATH, which gpu-check sets; no relinking on the other side.
(cd "$out/build" && "$top/configure" -q "$with_cuda" --disable-static &&
    make -s -j"$jobs" all &&
    make -s -j"$jobs" tests/test-cuda tests/test-cuda-upload \
        tests/test-cuda-convert examples/cuda-train) >/dev/null
grep -q '^NVCC = .' "$out/build/Makefile" || {
    echo "gpu-bundle: configure did not find CUDA" >&2
    exit 1
}

# Debian's runtime packages of the libraries the producer and the tests
# link, unpacked; only their shared objects are kept.
(cd "$out/debs" && apt-get download -q libjpeg62-turbo libturbojpeg0 \
    libzstd1 libpng16-16 libwebp7 libwebpdemux2 >/dev/null)
for deb in "$out"/debs/*.deb; do
    dpkg -x "$deb" "$out/debs/root"
done
find "$out/debs/root" -name '*.so*' \( -type f -o -type l \) \
    -exec cp -P {} "$out/lib/" \;
rm -rf "$out/debs"

# The CUDA runtime the build linked: the GPU machine's own toolkit, if it
# has one, may be another release or live elsewhere than the rpath says.
cudart=$(ldd "$out/build/.libs/libringfeed-cuda.so" |
    sed -n 's/^[[:space:]]*libcudart[^ ]* => \([^ ]*\) .*/\1/p')
[ -n "$cudart" ] || {
    echo "gpu-bundle: the build's libcudart was not found" >&2
    exit 1
}
cp -L "$cudart" "$out/lib/"

# pytest for tools/dev/gpu-python.sh: pure-Python wheels (no compiled
# ones: the GPU machine's Python may be any from 3.9 on) of pytest and
# what it imports, unpacked so that PYTHONPATH finds them.
"${PYTHON:-/usr/bin/python3}" -m pip download -q --no-deps \
    --only-binary=:all: --platform any --implementation py \
    --python-version 3.9 --abi none -d "$out/wheels" pytest pluggy \
    iniconfig packaging exceptiongroup tomli pygments typing_extensions
"${PYTHON:-/usr/bin/python3}" - "$out/wheels" "$out/py" <<'EOF'
import glob, os, sys, zipfile
for wheel in glob.glob(os.path.join(sys.argv[1], "*.whl")):
    zipfile.ZipFile(wheel).extractall(sys.argv[2])
EOF
rm -rf "$out/wheels"

# Objects and logs are not needed to run.
find "$out/build" \( -name '*.o' -o -name '*.lo' -o -name '*.log' \) \
    -delete
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out"
ls "$out/lib"
