#!/bin/sh
# tools/gpu-bundle.sh - makes _gpu/ (git-ignored): a CUDA build of this
# tree and the libjpeg-turbo and zstd shared libraries it runs with, for a
# GPU machine that has the CUDA runtime but no package registry. Carry the
# folder there with the working tree and run, from the tree's root:
#
#   GPU_CHECK_NO_BUILD=1 LD_LIBRARY_PATH=$PWD/_gpu/lib \
#       sh tools/gpu-check.sh _gpu/build
#
# Needs what tools/quickstart needs, plus nvcc and apt-get (for
# `apt-get download`, which needs no root). Prints the bundle's size: the
# device tool carries at most 64 MiB.
set -eu
top=$(cd "$(dirname "$0")/.." && pwd)
out=$top/_gpu
jobs=$(nproc 2>/dev/null || echo 2)

command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || {
    echo "gpu-bundle: no nvcc here; the bundle needs a CUDA build" >&2
    exit 2
}
[ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
rm -rf "$out"
mkdir -p "$out/build" "$out/lib" "$out/debs/root"

# The binaries: libtool's real ones under .libs/ find libringfeed through
# LD_LIBRARY_PATH, which gpu-check sets; no relinking on the other side.
(cd "$out/build" && "$top/configure" -q --with-cuda --disable-static &&
    make -s -j"$jobs" all &&
    make -s -j"$jobs" tests/test-cuda examples/cuda-train) >/dev/null
grep -q '^NVCC = .' "$out/build/Makefile" || {
    echo "gpu-bundle: configure did not find CUDA" >&2
    exit 1
}

# Debian's runtime packages of the libraries the producer and the tests
# link, unpacked; only their shared objects are kept.
(cd "$out/debs" && apt-get download -q libjpeg62-turbo libturbojpeg0 \
    libzstd1 >/dev/null)
for deb in "$out"/debs/*.deb; do
    dpkg -x "$deb" "$out/debs/root"
done
find "$out/debs/root" -name '*.so*' \( -type f -o -type l \) \
    -exec cp -P {} "$out/lib/" \;
rm -rf "$out/debs"

# Objects and logs are not needed to run.
find "$out/build" \( -name '*.o' -o -name '*.lo' -o -name '*.log' \) \
    -delete
echo "gpu-bundle: $(du -sh "$out" | cut -f1) in $out"
ls "$out/lib"
