#!/bin/sh
# shellcheck disable=SC2154 # $work and the tools' paths: tools-lib.sh sets them
# test-tools-samples.sh - ringfeed-pack and its --verify on bad samples:
# --skip-bad leaves out what does not decode, as is warns of what no
# decoder of this build reads, an emptied class is refused, the summary
# counts the pack's samples, names are escaped; the decode limits and
# --jpeg-warnings take effect, their advice in the tool's own flags.
#
#     tests/test-tools-samples.sh [--list | WORD...]   every case when none is named
#
# The cases are named TOPIC/NAME (the function case_TOPIC_NAME) and run by
# tests/harness.sh, each in a subshell: a failed check ends its case, the
# others still run. tests/tools-lib.sh holds the setup (the tools, from
# $RINGFEED_TOOLS, else from the folder of $RINGFEED_PRODUCER: make check
# sets both; one mktemp -d folder, removed at the end; $work/ds, 24
# synthetic JPEGs in 3 classes) and the helpers the test-tools*.sh scripts
# share. (Helpers name their variables _like_this: sh has no local
# variables, and the cases use plain names.)
set -u

cases="bad/skip_bad_decodes bad/as_is_warns_what_cannot_decode
bad/empty_class_refused bad/counts_are_the_pack_s bad/empty_source_refused
bad/names_escaped
pack/advice_in_its_flags pack/names_kept_as_they_are
pack/scan_and_memory_limits"

# shellcheck source=tests/tools-lib.sh
. "$(dirname "$0")/tools-lib.sh"

# ---- ringfeed-pack: bad samples -----------------------------------------

# make_bad_folder DIR: class a holds a good JPEG, a text file, an empty
# file and a JPEG cut short; class b one good JPEG.
make_bad_folder() {
    mkdir -p "$1/a" "$1/b"
    cp "$(first_image class_000)" "$1/a/good.jpg"
    cp "$(first_image class_001)" "$1/b/good.jpg"
    echo x >"$1/a/fake.jpg"
    : >"$1/a/empty.jpg"
    dd if="$1/b/good.jpg" of="$1/a/cut.jpg" bs=1000 count=3 2>/dev/null
}

# pil_python: a python3 with PIL, to write a progressive JPEG; PYTHON
# first when it is set.
pil_python() {
    for _python in ${PYTHON:-} python3 /usr/bin/python3; do
        if "$_python" -c 'import PIL' 2>/dev/null; then
            echo "$_python"
            return 0
        fi
    done
    return 1
}

# --skip-bad leaves out what cannot be decoded, not only what cannot be
# read (it used to pack the three bad files, which --verify then found),
# and names each file left out with the reason.
case_bad_skip_bad_decodes() {
    dir=$work/skip
    make_bad_folder "$dir/source"
    run 0 "$pack" "$dir/source" "$dir/x.pack" --skip-bad --quiet
    [ "$(count "$work/err" "skipped: sample")" -eq 3 ] ||
        fail "3 samples should be skipped"
    has "$work/err" "source/a/fake.jpg): not a JPEG"
    has "$work/err" "file (starts with 78 0a"
    has "$work/err" "source/a/empty.jpg): empty file"
    has "$work/err" "source/a/cut.jpg): premature end of data"
    has "$work/out" "packed 2 samples"
    has "$work/out" "3 bad samples left out"
    run 0 "$pack" --verify "$dir/x.pack"
    has "$work/out" "2 samples in 2 classes checked"
    has "$work/out" "all good"
    # without --skip-bad the bytes go in as they are, with a warning
    run 0 "$pack" "$dir/source" "$dir/as-is.pack" --quiet
    [ "$(count "$work/err" "is packed as is but will fail to decode")" -eq 2 ] ||
        fail "2 files should be said to fail to decode"
    has "$work/err" "a/fake.jpg) is packed as is but will fail to decode: not a JPEG"
    has "$work/err" "file (starts with 78 0a"
    run 1 "$pack" --verify "$dir/as-is.pack"
    [ "$(count "$work/out" "bad: ")" -eq 3 ] || fail "3 bad samples expected"
}

# Without --skip-bad, the warning that a sample will fail to decode is
# for bytes that no decoder of this build reads, told by their signature
# as the library tells them: a PNG and a WebP decode where the library
# was built with libpng and libwebp (it used to warn of every file that
# was not a JPEG), and a BMP is named, with the formats that decode.
case_bad_as_is_warns_what_cannot_decode() {
    python=$(pil_python) || skip "no python3 with PIL to write PNG and WebP files"
    dir=$work/as-is
    mkdir -p "$dir/source/a"
    "$python" -c 'import sys
from PIL import Image
image = Image.open(sys.argv[1]).convert("RGB")
for format in ("png", "webp", "bmp"):
    image.save(sys.argv[2] + "/image." + format, format.upper())' \
        "$(first_image class_000)" "$dir/source/a" ||
        fail "python3 could not write PNG, WebP and BMP files"
    cp "$(first_image class_000)" "$dir/source/a/image.jpg"
    run 1 "$pack" --verify "$dir/source"
    cp "$work/out" "$dir/verify"
    run 0 "$pack" "$dir/source" "$dir/x.pack" --quiet
    # the file by its path, as other messages name it, and the flag that
    # leaves it out
    has "$work/err" "($dir/source/a/image.bmp) is packed as is but will fail to decode: a BMP file: ringfeed decodes JPEG"
    has "$work/err" "; pass --skip-bad to leave it out"
    warned=1
    for format in png webp; do
        if grep -qF "a/image.$format): " "$dir/verify"; then
            # this build decodes no such file: named, with what to install
            has "$work/err" "a/image.$format) is packed as is but will fail to decode: a "
            has "$work/err" "file: this ringfeed was built without lib$format"
            warned=$((warned + 1))
        else
            lacks "$work/err" "a/image.$format)"
        fi
    done
    [ "$(count "$work/err" "will fail to decode")" -eq $warned ] ||
        fail "$warned samples should be said to fail to decode"
    lacks "$work/err" "a/image.jpg)"
    run 1 "$pack" --verify "$dir/x.pack"
    [ "$(count "$work/out" "bad: ")" -eq $warned ] ||
        fail "$warned bad samples expected"
}

# A class whose samples are all left out is refused, named, whether it is
# the last one (the pack's class count would shrink: it is the largest
# label + 1) or not; so is a run that would pack nothing. No pack is
# written. (Both used to exit 0.)
case_bad_empty_class_refused() {
    dir=$work/empty-class
    for emptied in a b; do # the first class, then the last
        source=$dir/source-$emptied
        mkdir -p "$source/a" "$source/b"
        for class in a b; do
            if [ $class = $emptied ]; then
                echo x >"$source/$class/fake.jpg"
            else
                cp "$(first_image class_000)" "$source/$class/good.jpg"
            fi
        done
        run 1 "$pack" "$source" "$dir/x.pack" --skip-bad --quiet
        has "$work/err" "x.pack would have no sample of class '$emptied'"
        has "$work/err" "No pack was written"
        run 1 "$pack" "$source" "$dir/x.pack" --skip-bad --quiet --raw 8x8
        has "$work/err" "no sample of class '$emptied'"
    done
    mkdir -p "$dir/nothing/a"
    echo x >"$dir/nothing/a/fake.jpg"
    run 1 "$pack" "$dir/nothing" "$dir/x.pack" --skip-bad --quiet --raw 8x8
    has "$work/err" "no sample of $dir/nothing can be packed"
    holds "$dir" source-a source-b nothing
}

# The summary counts the pack's samples and classes; --verify of a pack
# with no sample fails.
case_bad_counts_are_the_pack_s() {
    dir=$work/counts
    make_bad_folder "$dir/source"
    run 0 "$pack" "$dir/source" "$dir/x.pack" --skip-bad --quiet
    has "$work/out" "packed 2 samples in 2 classes"
    empty_pack >"$dir/empty.pack"
    run 1 "$pack" --verify "$dir/empty.pack"
    has "$work/out" "empty.pack: no samples: a loader can read nothing"
}

# A pack without samples as SOURCE is refused by name before any work,
# with --raw and a dictionary too, and nothing is left at OUT (it said
# "all 0 were left out (listed above)", listing none).
case_bad_empty_source_refused() {
    dir=$work/empty-source
    mkdir -p "$dir"
    empty_pack >"$dir/empty.pack"
    run 1 "$pack" "$dir/empty.pack" "$dir/out.pack" --quiet
    has "$work/err" "empty.pack has no samples, so there is nothing to pack"
    has "$work/err" "No pack was written"
    lacks "$work/err" "left out"
    run 1 "$pack" "$dir/empty.pack" "$dir/out.pack" --raw 8x8 \
        --dict-size 1024 --quiet
    has "$work/err" "empty.pack has no samples, so there is nothing to pack"
    holds "$dir" empty.pack
}

# empty_pack: the 128 bytes of a pack of 8x8x3 samples with none added,
# as rf_pack_writer wrote one (rf_pack_writer_finish() and ringfeed-pack
# now refuse to; loaders and --verify still meet such files). The zeros
# are printf escapes, shared through $z4.
# shellcheck disable=SC2059
empty_pack() {
    z4='\000\000\000\000'
    # magic, version 1, header size 128, flags 0, entry size 40
    printf "RFPACK01\001\000\000\000\200\000\000\000$z4\050\000\000\000"
    printf "$z4$z4$z4" # samples, classes
    # height 8, width 8, channels 3, layout, reserved
    printf "\010\000\000\000\010\000\000\000\003\000\000\000$z4$z4"
    # index and names at 128, no names
    printf "\200\000\000\000$z4\200\000\000\000$z4$z4$z4"
    # dictionary at 128, none; file size 128
    printf "\200\000\000\000$z4$z4$z4\200\000\000\000$z4"
    # meta_crc 0, header_crc, reserved
    printf "$z4\172\120\047\010$z4$z4$z4$z4"
}

# Control bytes in names are escaped in what the tools print: a file
# named "evil<newline>bad: sample 9 ..." used to make --verify print two
# "bad:" lines for one sample, and an escape byte reached the terminal.
case_bad_names_escaped() {
    dir=$work/names
    mkdir -p "$dir/source/a"
    cp "$(first_image class_000)" "$dir/source/a/good.jpg"
    echo x >"$dir/source/a/$(printf 'evil\nbad: sample 9 (zz.jpg): fake.jpg')"
    echo x >"$dir/source/a/$(printf 'tab\there\033[2J.jpg')"
    # U+009B (CSI, a C1 control), a valid U+00E9 and a byte that is no UTF-8
    echo x >"$dir/source/a/$(printf 'c1\302\233x\303\251\377.jpg')"
    run 1 "$pack" --verify "$dir/source"
    [ "$(count "$work/out" "bad: ")" -eq 3 ] ||
        fail "three bad samples should make three 'bad:' lines"
    has "$work/out" 'a/evil\nbad: sample 9 (zz.jpg): fake.jpg): not a JPEG'
    has "$work/out" 'a/tab\there\x1b[2J.jpg): not a JPEG'
    has "$work/out" "a/c1\\xc2\\x9bx$(printf '\303\251')\\xff.jpg): not a JPEG"
    run 0 "$pack" "$dir/source" "$dir/as-is.pack" --quiet
    has "$work/err" 'source/a/evil\nbad: sample 9 (zz.jpg): fake.jpg) is packed'
    [ "$(wc -l <"$work/err")" -eq 3 ] || fail "three warnings, one line each"
    run 0 "$pack" "$dir/source" "$dir/$(printf 'new\nline.pack')" --skip-bad \
        --quiet
    [ "$(count "$work/err" "skipped: ")" -eq 3 ] || fail "three skipped"
    [ "$(wc -l <"$work/err")" -eq 3 ] || fail "three skipped, one line each"
    has "$work/out" 'new\nline.pack: '
    [ "$(wc -l <"$work/out")" -eq 1 ] || fail "the summary is one line"
}

# ---- ringfeed-pack: verdicts in its flags -------------------------------

# make_verdicts_folder DIR: class a holds a good JPEG; class b a good one,
# one cut short (PIL refuses it, lenient accepts it) and one with bytes
# after its start-of-image marker (libjpeg warns, PIL decodes it; strict
# refuses it).
make_verdicts_folder() {
    mkdir -p "$1/a" "$1/b"
    cp "$(first_image class_000)" "$1/a/good.jpg"
    _image=$(first_image class_001)
    cp "$_image" "$1/b/good.jpg"
    dd if="$_image" of="$1/b/cut.jpg" bs=1000 count=3 2>/dev/null
    { head -c 2 "$_image" && printf 'xx' && tail -c +3 "$_image"; } \
        >"$1/b/extra.jpg"
}

# The library's reasons come in ringfeed-pack's own flags (they named
# jpeg_warnings and RF_PARAM_MAX_PIXELS, which it had no flag for), and
# those flags take effect: the verdicts change with --jpeg-warnings, and
# an image is refused one pixel below its size, packed at it.
case_pack_advice_in_its_flags() {
    dir=$work/pack-advice
    make_verdicts_folder "$dir/source"
    run 1 "$pack" --verify "$dir/source"
    has "$work/out" "b/cut.jpg): premature end of data"
    has "$work/out" "(--jpeg-warnings lenient accepts it"
    no_c_terms "$work/out"
    [ "$(count "$work/out" "bad: ")" -eq 1 ] || fail "1 bad sample expected"
    run 0 "$pack" --verify "$dir/source" --jpeg-warnings lenient
    has "$work/out" "4 samples in 2 classes checked"
    run 1 "$pack" --verify "$dir/source" --jpeg-warnings strict
    has "$work/out" "b/extra.jpg): libjpeg warning: Corrupt JPEG data"
    has "$work/out" "(--jpeg-warnings strict refuses such images"
    no_c_terms "$work/out"
    [ "$(count "$work/out" "bad: ")" -eq 2 ] || fail "2 bad samples expected"
    for verdicts in "lenient 0" "pil 1" "strict 2"; do
        run 0 "$pack" "$dir/source" "$dir/x.pack" --skip-bad --quiet \
            --jpeg-warnings "${verdicts% *}"
        [ "$(count "$work/err" "skipped: ")" -eq "${verdicts#* }" ] ||
            fail "--jpeg-warnings ${verdicts% *}: ${verdicts#* } skipped expected"
    done
    # --max-pixels: the first image's size, from the refusal
    run 1 "$pack" --verify "$dir/source" --max-pixels 1
    has "$work/out" "a/good.jpg): "
    has "$work/out" "pixels is above the limit of 1; raise --max-pixels"
    no_c_terms "$work/out"
    pixels=$(sed -n 's|.*a/good\.jpg): \([0-9]*\) x \([0-9]*\) pixels.*|\1 \2|p' \
        "$work/out" | { read -r w h && echo $((w * h)); })
    [ "${pixels:-0}" -gt 1 ] || fail "no image size in: $(cat "$work/out")"
    mkdir -p "$dir/one/a"
    cp "$dir/source/a/good.jpg" "$dir/one/a/"
    run 1 "$pack" "$dir/one" "$dir/one.pack" --raw 16x16 --quiet \
        --max-pixels $((pixels - 1))
    has "$work/err" "is above the limit of $((pixels - 1)); raise --max-pixels"
    no_c_terms "$work/err"
    run 0 "$pack" "$dir/one" "$dir/one.pack" --raw 16x16 --quiet \
        --max-pixels $pixels
    has "$work/out" "packed 1 sample in 1 class from"
}

# Only the library's words are put in the tool's terms: a file whose name
# holds a parameter's keyword keeps its name in the message.
case_pack_names_kept_as_they_are() {
    dir=$work/pack-names
    mkdir -p "$dir/source/a"
    cp "$(first_image class_000)" "$dir/source/a/good.jpg"
    echo x >"$dir/source/a/x max_pixels (jpeg_warnings) y.jpg"
    run 1 "$pack" --verify "$dir/source"
    has "$work/out" "a/x max_pixels (jpeg_warnings) y.jpg): not a JPEG"
    run 0 "$pack" "$dir/source" "$dir/x.pack" --skip-bad --quiet
    has "$work/err" "a/x max_pixels (jpeg_warnings) y.jpg): not a JPEG"
    run 1 "$pack" "$dir/source" "$dir/x.pack" --raw 8x8 --quiet
    has "$work/err" "a/x max_pixels (jpeg_warnings) y.jpg): not a JPEG"
}

# --max-scans and --max-decode-memory reach the decoder: a progressive
# JPEG of 1024 x 1024 pixels (4:4:4, 6 MiB of coefficients, 10 scans) is
# refused under them with advice in the tool's flags, and decodes above.
case_pack_scan_and_memory_limits() {
    python=$(pil_python) || skip "no python3 with PIL to write a progressive JPEG"
    dir=$work/pack-scans
    mkdir -p "$dir/source/a"
    "$python" -c 'import sys
from PIL import Image
image = Image.open(sys.argv[1]).convert("RGB").resize((1024, 1024))
image.save(sys.argv[2], "JPEG", progressive=True, subsampling=0)' \
        "$(first_image class_000)" "$dir/source/a/progressive.jpg" ||
        fail "python3 could not write a progressive JPEG"
    run 0 "$pack" --verify "$dir/source"
    run 1 "$pack" --verify "$dir/source" --max-scans 2
    has "$work/out" "JPEG with more than 2 scans"
    has "$work/out" "raise --max-scans"
    no_c_terms "$work/out"
    run 1 "$pack" --verify "$dir/source" --max-decode-memory 1048576
    has "$work/out" "above the limit of 1 MiB; raise --max-decode-memory"
    no_c_terms "$work/out"
    run 0 "$pack" --verify "$dir/source" --max-decode-memory 16777216 \
        --max-scans 100
    run 1 "$pack" "$dir/source" "$dir/x.pack" --raw 32x32 --quiet \
        --max-scans 2
    has "$work/err" "raise --max-scans"
    run 0 "$pack" "$dir/source" "$dir/x.pack" --raw 32x32 --quiet
}
# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
