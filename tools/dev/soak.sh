#!/bin/sh
# tools/dev/soak.sh - the leak watch: many epochs over a synthetic JPEG folder,
# printing each process's PSS and fds and the ring's slots at every epoch
# boundary, then the growth and a verdict (tests/soak.c says what is
# measured). Not part of `make check`: the defaults take 1-2 minutes on
# 2 cores.
#
#   tools/dev/soak.sh [--epochs N] [--images N] [--size N] [--producers N]
#
#   --epochs N     epochs to run, the first a warm-up (default 50)
#   --images N     JPEGs in the folder (default 1000)
#   --size N       output height and width (default 224)
#   --producers N  producer processes; 0 = one per CPU (default 0)
#
# Builds in $BUILD (default _build/, configured if it is not) and keeps
# the folder in $BUILD/soak-cache/ for the next run. Exits 1 when the
# verdict is FAIL.
set -eu

top=$(cd "$(dirname "$0")/../.." && pwd)
build=${BUILD:-$top/_build}
epochs=50 images=1000 size=224 producers=0

usage() {
    sed -n '2,18s/^# \{0,1\}//p' "$0"
    exit "$1"
}

while [ $# -gt 0 ]; do
    case $1 in --help | -h) usage 0 ;; esac
    [ $# -ge 2 ] || usage 2
    case $1 in
    --epochs) epochs=$2 ;;
    --images) images=$2 ;;
    --size) size=$2 ;;
    --producers) producers=$2 ;;
    *) usage 2 ;;
    esac
    shift 2
done

if [ ! -f "$build/Makefile" ]; then
    [ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
    mkdir -p "$build"
    (cd "$build" && "$top/configure" -q)
fi
make -C "$build" -s tools/ringfeed-synth tools/ringfeed-producer tests/soak \
    >/dev/null

# The folder is written once per image count; an interrupted run leaves
# only the .tmp folder behind, which is started over.
data="$build/soak-cache/jpeg-$images"
if [ ! -d "$data" ]; then
    rm -rf "$data.tmp"
    mkdir -p "$build/soak-cache"
    "$build/tools/ringfeed-synth" "$data.tmp" --images "$images" \
        --classes 10 --quiet
    mv "$data.tmp" "$data"
fi

echo "soak: $epochs epochs over $images JPEGs ($data), ${size}x$size output"
RINGFEED_PRODUCER="$build/tools/ringfeed-producer" \
    exec "$build/tests/soak" "$data" --epochs "$epochs" --size "$size" \
    --producers "$producers"
