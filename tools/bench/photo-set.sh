#!/bin/sh
# tools/bench/photo-set.sh - a folder of real photographs for the
# benchmarks (bench-python.sh --photos, bench-pipeline.sh's folder).
#
# No photo set is in the tree or on the development machines. Debian's
# archive, which they reach, carries camera photographs in two wallpaper
# packages (mate-backgrounds' nature set, CC BY-SA and GPL; Plasma's
# wallpapers, LGPL/CC BY-SA), beside drawings and renders that this
# script leaves out by name. It downloads the two packages with
# `apt-get download` (no root, nothing installed), unpacks them in a
# scratch folder and has make_photo_set.py cut IMAGES ImageNet-like JPEGs
# from the 23 photographs: random crops scaled to a short side of 256-500,
# quality 90-95, in CLASSES class folders (see make_photo_set.py for why
# that geometry). Nothing of the packages is kept but the cut images.
#
# Usage: tools/bench/photo-set.sh [--images N] [--classes C] OUT
# (defaults 5000 images, 10 classes). Exits 1 when a package cannot be
# downloaded or a photograph is missing from it, 2 on bad usage.
set -eu

images=5000
classes=10
while [ $# -gt 1 ]; do
    case $1 in
    --images) images=$2 ;;
    --classes) classes=$2 ;;
    *)
        sed -n 's/^# \(Usage:.*\)/\1/p' "$0" >&2
        exit 2
        ;;
    esac
    shift 2
done
[ $# -eq 1 ] || {
    sed -n 's/^# \(Usage:.*\)/\1/p' "$0" >&2
    exit 2
}
out=$1
here=$(cd "$(dirname "$0")" && pwd)

# The photographs, by their paths inside the packages. The rest of both
# packages is drawn or rendered.
mate=usr/share/backgrounds/mate/nature
plasma=usr/share/wallpapers
photos="$mate/Aqua.jpg $mate/Blinds.jpg $mate/Dune.jpg $mate/FreshFlower.jpg
$mate/Garden.jpg $mate/GreenMeadow.jpg $mate/LadyBird.jpg $mate/RainDrops.jpg
$mate/Storm.jpg $mate/TwoWings.jpg $mate/Wood.jpg $mate/YellowFlower.jpg"
for name in BytheWater ColdRipple ColorfulCups DarkestHour EveningGlow \
    FallenLeaf Grey Kite OneStandsOut Path summer_1am; do
    photos="$photos $plasma/$name/contents/images/2560x1600.jpg"
done

scratch=$(mktemp -d "${TMPDIR:-/tmp}/photo-set.XXXXXX")
trap 'rm -rf "$scratch"' EXIT
(cd "$scratch" && apt-get download mate-backgrounds \
    plasma-workspace-wallpapers >download.log 2>&1) || {
    printf 'photo-set: apt-get download failed:\n' >&2
    tail -3 "$scratch/download.log" >&2
    exit 1
}
for deb in "$scratch"/*.deb; do
    dpkg-deb -x "$deb" "$scratch/root"
done
paths=
count=0
for photo in $photos; do
    count=$((count + 1))
    [ -f "$scratch/root/$photo" ] || {
        printf 'photo-set: %s is not in the packages any more\n' "$photo" >&2
        exit 1
    }
    paths="$paths $scratch/root/$photo"
done
# shellcheck disable=SC2086 # one argument per photograph
"${PYTHON:-/usr/bin/python3}" "$here/make_photo_set.py" "$out" "$images" \
    "$classes" $paths
printf 'photo-set: %s images from %s photographs in %s\n' "$images" \
    "$count" "$out"
