#!/bin/sh
# test-tools.sh - ringfeed-pack and ringfeed-synth (and ringfeed-bench's
# option checks) run as a user runs them: exit statuses, messages, and the
# files they leave (or not); and the C test harness's mode for
# compute-sanitizer (RF_TEST_IN_PROCESS).
#
#     tests/test-tools.sh [--list | WORD...]   every case when none is named
#
# The cases are named TOPIC/NAME (the function case_TOPIC_NAME) and run by
# tests/harness.sh, each in a subshell: a failed check ends its case, the
# others still run. The tools are taken from $RINGFEED_TOOLS, else from
# the folder of $RINGFEED_PRODUCER (make check sets both). Everything is
# written under one mktemp -d folder, removed at the end. (Helpers name
# their variables _like_this: sh has no local variables, and the cases use
# plain names.)
set -u

cases="write/concurrent_runs write/killed_leaves_nothing
write/failure_leaves_nothing write/output_checked_first
bad/skip_bad_decodes bad/as_is_warns_what_cannot_decode
bad/empty_class_refused bad/counts_are_the_pack_s bad/names_escaped options/without_effect options/raw_full_scale
options/raw_shape_advice options/decode_limits pack/advice_in_its_flags
pack/names_kept_as_they_are pack/scan_and_memory_limits
bench/options_without_effect bench/advice_in_its_flags
bench/raw_pack_as_stored bench/gpu_options_need_gpu bench/json_alone
bench/messages_in_its_flags bench/detail_without_errno_name
bench/policy_options bench/stall_in_its_flags bench/verify_one_rank
bench/non_square_size bench/skipped_in_its_flags bench/rank_flags
bench/source_path_refused bench/source_kind_beside_folder bench/no_c_names
bench/helper_advice_once bench/busy_share_within_100
bench/not_a_dataset bench/verify_unopened
output/unwritable options/value_not_an_option
jobs/same_output
jobs/bad_value jobs/killed_worker synth/needs_an_image_per_class
synth/killed_writes_no_partial_jpeg synth/workers_stop_with_parent
harness/in_process_runs_one_case pack/not_to_stdout
options/raw_value_quoted_whole pack/file_size_limit
synth/stopped_says_what_is_left synth/missing_parent"

# ---- setup --------------------------------------------------------------

# The tools, the scratch folder, and $work/ds: 24 synthetic JPEGs in 3
# classes, shared by the cases (read only).
test_setup() {
    : "${RINGFEED_TOOLS:=$(dirname "${RINGFEED_PRODUCER:?set RINGFEED_TOOLS}")}"
    tools=$RINGFEED_TOOLS
    pack=$tools/ringfeed-pack
    synth=$tools/ringfeed-synth
    bench=$tools/ringfeed-bench
    # ringfeed-bench opens a loader, whose helper in a build tree lies
    # beside the tools (the README runs this script with RINGFEED_TOOLS
    # alone).
    if [ -z "${RINGFEED_PRODUCER:-}" ] && [ -x "$tools/ringfeed-producer" ]
    then
        RINGFEED_PRODUCER=$tools/ringfeed-producer
        export RINGFEED_PRODUCER
    fi
    work=$(mktemp -d "${TMPDIR:-/tmp}/rf-tools-XXXXXX") || return 1
    trap 'rm -rf "$work"' EXIT
    trap 'exit 1' HUP INT TERM
    "$synth" "$work/ds" --images 24 --classes 3 --jobs 2 --quiet \
        >/dev/null || { echo "ringfeed-synth could not write the test data"
        return 1; }
}

# ---- checks -----------------------------------------------------------

# fail, run, has, lacks (and test_each, which empties $work/out and err).
# shellcheck source=tests/checks.sh
. "$(dirname "$0")/checks.sh"

# holds DIR NAME...: DIR holds exactly these entries.
holds() {
    _dir=$1
    shift
    # shellcheck disable=SC2012 # the names are this script's, one a line
    _found=$(ls -A "$_dir" | sort | tr '\n' ' ')
    _expected=$(printf '%s\n' "$@" | sed '/^$/d' | sort | tr '\n' ' ')
    [ "$_found" = "$_expected" ] ||
        fail "${_dir#"$work"/} holds '$_found', expected '$_expected'"
}

# wait_for FILE TEXT: until FILE holds TEXT (a background run got that
# far), for at most 20 s.
wait_for() {
    _tries=0
    until grep -qF -- "$2" "$1" 2>/dev/null; do
        _tries=$((_tries + 1))
        [ $_tries -le 400 ] || fail "${1##*/} never said '$2'"
        sleep 0.05
    done
}

# ---- data -------------------------------------------------------------

# $work/big: ten hard links to each file of $work/ds (240 samples), so
# that packing them at $slow with --jobs 2 takes seconds: long enough to
# kill a run in the middle (24 samples took about a second in one
# process, and less with a worker per CPU). Made once, by the first case
# that needs it.
make_big() {
    [ -d "$work/big" ] && return 0
    for copy in 0 1 2 3 4 5 6 7 8 9; do
        for file in "$work"/ds/class_*/*.jpg; do
            class=${file%/*}
            mkdir -p "$work/big/${class##*/}"
            ln "$file" "$work/big/${class##*/}/$copy-${file##*/}"
        done
    done
}

# Options that make a run take about a second on $work/ds (decoding, and
# compressing at zstd level 19), long enough to be caught in the middle,
# showing its progress on stderr. (Not a function: run in the background
# it would be a subshell, and $! its pid, not the run's.)
slow="--raw 256x256 --level 19 --progress"

# first_image CLASS: the path of the first JPEG of $work/ds/CLASS.
first_image() {
    find "$work/ds/$1" -name '*.jpg' | sort | head -n 1
}

# ---- ringfeed-pack: where the pack is written ---------------------------

# Two runs writing one output at once: each writes a file of its own and
# the last to finish wins, whole (they used to share OUT.tmp: the first to
# finish renamed the other's half-written file into place and exited 0).
case_write_concurrent_runs() {
    dir=$work/concurrent
    mkdir "$dir"
    # shellcheck disable=SC2086 # $slow is a list of options
    "$pack" "$work/ds" "$dir/same.pack" $slow >/dev/null 2>"$dir/slow.err" &
    background=$!
    wait_for "$dir/slow.err" "packing"
    run 0 "$pack" "$work/ds" "$dir/same.pack" --quiet
    wait $background || fail "the slow run failed: $(cat "$dir/slow.err")"
    run 0 "$pack" --verify "$dir/same.pack"
    has "$work/out" "24 samples in 3 classes"
    holds "$dir" same.pack slow.err
}

# A run killed at any moment leaves nothing in the output's folder.
case_write_killed_leaves_nothing() {
    dir=$work/killed
    mkdir "$dir" "$dir/out"
    make_big
    for signal in KILL TERM; do
        rm -f "$dir/err" # not the first run's "packing" (see jobs_killed_worker)
        # shellcheck disable=SC2086 # $slow is a list of options
        "$pack" "$work/big" "$dir/out/x.pack" $slow --jobs 2 2>"$dir/err" &
        background=$!
        wait_for "$dir/err" "packing"
        kill -s $signal $background
        { wait $background; } 2>/dev/null # "Killed" is expected
        background=
        holds "$dir/out"
    done
}

# A run that fails leaves nothing either: here a pack of raw samples
# given as a source without --raw.
case_write_failure_leaves_nothing() {
    dir=$work/failure
    mkdir "$dir" "$dir/out"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 16x16 --quiet
    run 1 "$pack" "$dir/raw.pack" "$dir/out/x.pack" --quiet
    has "$work/err" "holds raw samples of 16x16x3 nhwc"
    holds "$dir/out"
}

# An output that cannot be written is refused before the work: before a
# dictionary is trained (the progress line would say "training").
case_write_output_checked_first() {
    dir=$work/output
    mkdir "$dir" "$dir/folder"
    for output in "$dir/folder" "$dir/folder/" "$dir/new/"; do
        run 1 "$pack" "$work/ds" "$output" --raw 32x32 --dict-size 4096 \
            --progress
        has "$work/err" "is a folder; give the name of the file to write"
        lacks "$work/err" "training"
    done
    run 1 "$pack" "$work/ds" "$dir/missing/x.pack" --raw 32x32 \
        --dict-size 4096 --progress
    has "$work/err" "missing/x.pack: cannot create a file in its folder"
    lacks "$work/err" "training"
    if [ "$(id -u)" -ne 0 ]; then # root writes anywhere
        chmod 555 "$dir/folder"
        run 1 "$pack" "$work/ds" "$dir/folder/x.pack" --raw 32x32 \
            --dict-size 4096 --progress
        has "$work/err" "that you can write to"
        lacks "$work/err" "training"
        chmod 755 "$dir/folder"
    fi
    holds "$dir" folder
    holds "$dir/folder"
}

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

# count FILE TEXT: lines of FILE that hold TEXT.
count() {
    grep -cF -- "$2" "$1"
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

# empty_pack: the 128 bytes rf_pack_writer writes for a pack of 8x8x3
# samples to which no sample was added (ringfeed-pack no longer writes
# one). The zeros are printf escapes, shared through $z4.
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

# A pack of raw samples can be packed again only at its own shape; the
# advice is the --raw to pass, not the loader's RF_PARAM_HEIGHT followed
# by --skip-bad (which would leave every sample out).
case_options_raw_shape_advice() {
    dir=$work/raw-shape
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 32x32 --quiet
    # shellcheck disable=SC2086 # $options is a list of options
    for options in "--raw 48x48 --quiet" "--raw 48x48 --skip-bad --quiet" \
        "--raw 32x32 --layout nchw --quiet" \
        "--raw 48x48 --dict-size 4096 --progress" "--quiet"; do
        run 1 "$pack" "$dir/raw.pack" "$dir/x.pack" $options
        has "$work/err" "raw.pack holds raw samples of 32x32x3 nhwc"
        has "$work/err" "pass --raw 32x32 --layout nhwc (their shape)"
        lacks "$work/err" "RF_PARAM"
        lacks "$work/err" "--skip-bad"
        lacks "$work/err" "training"
    done
    run 0 "$pack" "$dir/raw.pack" "$dir/again.pack" --raw 32x32 --level 9 \
        --quiet
    run 0 "$pack" --verify "$dir/again.pack"
    has "$work/out" "24 samples in 3 classes"
    holds "$dir" raw.pack again.pack
}

# ---- ringfeed-pack: options ----------------------------------------------

# Options that would have no effect are refused (exit 2), naming the one
# to drop, and nothing is written.
case_options_without_effect() {
    dir=$work/options
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/ok.pack" --quiet
    # shellcheck disable=SC2086 # $option is an option and its value
    for option in "--level 5" "--layout nchw" "--dict-size 4096" \
        "--full-scale"; do
        run 2 "$pack" "$work/ds" "$dir/x.pack" $option --quiet
        has "$work/err" "applies to --raw samples only"
        has "$work/err" "drop ${option% *}, or add --raw HxW"
    done
    # shellcheck disable=SC2086 # $option is an option and its value
    for option in "--raw 32x32" "--skip-bad" "--level 3" "--layout nhwc" \
        "--dict-size 0" "--full-scale"; do
        run 2 "$pack" --verify "$dir/ok.pack" $option
        has "$work/err" "--verify checks a file as it is"
        has "$work/err" "drop ${option% *}"
    done
    holds "$dir" ok.pack
}

# --full-scale decodes the --raw pixels in full (PIL's): at 24x24 these
# images would be decoded at a smaller DCT scale, so the pixels differ.
# On a pack of raw samples, already decoded, it would change nothing.
case_options_raw_full_scale() {
    dir=$work/full-scale
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/scaled.pack" --raw 24x24 --quiet
    run 0 "$pack" "$work/ds" "$dir/full.pack" --raw 24x24 --full-scale --quiet
    ! cmp -s "$dir/scaled.pack" "$dir/full.pack" ||
        fail "--full-scale packed the same pixels"
    run 0 "$pack" --verify "$dir/full.pack" --quiet
    run 2 "$pack" "$dir/full.pack" "$dir/again.pack" --raw 24x24 \
        --full-scale --quiet
    has "$work/err" "--full-scale would change nothing: $dir/full.pack holds"
    holds "$dir" full.pack scaled.pack
}

# The decode limits take the library's ranges and choices (exit 2
# otherwise), and are refused where nothing is decoded: JPEG bytes packed
# as they are.
case_options_decode_limits() {
    dir=$work/decode-limits
    mkdir "$dir"
    # shellcheck disable=SC2086 # $option is an option and its value
    for option in "--max-pixels 1000000" "--max-scans 5" \
        "--max-decode-memory 2000000" "--jpeg-warnings strict"; do
        run 2 "$pack" "$work/ds" "$dir/x.pack" $option --quiet
        has "$work/err" "${option% *} applies where samples are decoded"
        has "$work/err" "drop ${option% *}, or add --skip-bad"
        run 0 "$pack" --verify "$work/ds" $option --quiet
    done
    run 2 "$pack" --verify "$work/ds" --max-pixels 0
    has "$work/err" "--max-pixels wants an integer in 1..1099511627776"
    run 2 "$pack" --verify "$work/ds" --max-decode-memory 1000
    has "$work/err" "--max-decode-memory wants an integer in 1048576.."
    run 2 "$pack" --verify "$work/ds" --jpeg-warnings loose
    has "$work/err" "--jpeg-warnings wants pil, lenient or strict, not 'loose'"
    run 0 "$pack" --help
    for flag in "--max-pixels N" "--max-scans N" "--max-decode-memory N" \
        "--jpeg-warnings W"; do
        has "$work/out" "$flag"
    done
    has "$work/out" "pil, lenient or strict; default pil"
    lacks "$work/out" "RF_PARAM_"
    holds "$dir"
}

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

# no_c_terms FILE: FILE names no C constant nor a parameter's keyword.
no_c_terms() {
    for _term in RF_PARAM_ RF_JPEG_ jpeg_warnings max_pixels; do
        ! grep -q "$_term" "$1" || fail "'$_term' in: $(cat "$1")"
    done
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

# ringfeed-bench refuses options that would change nothing for its
# source (it used to run, measuring something other than what was asked):
# a dataset's own sample count, JPEG options for pixels made up in memory,
# the skip policy's limits without the skip policy.
case_bench_options_without_effect() {
    for option in "--samples 50" "--classes 10"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source "$work/ds" $option --quiet
        has "$work/err" "${option% *} would change nothing: the dataset"
    done
    for option in "--transform eval" "--on-error skip" "--full-scale" \
        "--max-errors 3"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source synthetic $option --quiet
        has "$work/err" "${option%% *} applies to a PATH or synthetic-jpeg"
    done
    for option in "--max-pixels 5" "--max-scans 2" \
        "--max-decode-memory 2000000" "--jpeg-warnings strict"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source synthetic $option --quiet
        has "$work/err" "${option%% *} applies to a PATH or synthetic-jpeg"
    done
    run 2 "$bench" --source "$work/ds" --max-error-ppm 5000 --quiet
    has "$work/err" "--max-error-ppm limits --on-error skip"
    run 0 "$bench" --source "$work/ds" --transform eval --full-scale \
        --on-error skip --max-error-ppm 5000 --batch 8 --quiet
    run 0 "$bench" --source synthetic-jpeg --samples 16 --classes 4 \
        --transform eval --batch 8 --quiet
}

# ---- ringfeed-pack: --jobs ------------------------------------------------

# make_mixed_folder DIR: $work/ds linked into DIR, with a JPEG cut short
# in one class and a PNG named .jpg in another, so that the bad samples
# fall to different workers.
# The library's advice comes in the tool's own flags, not C constants.
case_bench_advice_in_its_flags() {
    make_mixed_folder "$work/advice"
    run 1 "$bench" --source "$work/advice" --batch 4 --quiet
    has "$work/err" "use --on-error skip to leave failing samples out"
    run 1 "$bench" --source "$work/advice" --batch 4 --on-error skip \
        --max-error-ppm 1 --quiet
    has "$work/err" "more than --max-error-ppm 1 allows"
    ! grep -q RF_PARAM_ "$work/err" || fail "a C constant in: $(cat "$work/err")"
}

# --gpu's own options are refused without it (they were taken, and
# changed nothing), each named.
case_bench_gpu_options_need_gpu() {
    for option in "--device 0" "--depth 3" "--step-us 5"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source empty --samples 16 --batch 8 $option --quiet
        has "$work/err" "${option% *} applies to --gpu only"
    done
}

# With --json, stdout is the JSON object alone, and it holds --verify's
# counts (the verifier's line of text used to come before it).
case_bench_json_alone() {
    run 0 "$bench" --source "$work/ds" --verify --json --batch 8 --quiet
    if command -v python3 >/dev/null; then
        python3 -c 'import json, sys
report = json.load(sys.stdin)
assert report["verified"] == 24 and report["missing"] == 0, report' \
            <"$work/out" || fail "stdout is not the JSON report"
    else
        [ "$(head -c 1 "$work/out")" = "{" ] || fail "stdout is not JSON"
        has "$work/out" '"verified": 24'
    fi
    lacks "$work/out" "verified:"
    run 0 "$bench" --source "$work/ds" --verify --batch 8 --quiet
    has "$work/out" "verified: 24 samples, 0 missing"
}

# The loader's messages come in the bench's flags, as its errors do (the
# library's own handler named RF_PARAM_PRODUCERS); the decode limits are
# flags of the bench too, and named in the advice.
case_bench_messages_in_its_flags() {
    if taskset -c 0 true 2>/dev/null; then
        run 0 taskset -c 0 "$bench" --source empty --samples 16 --batch 8 \
            --producers 2 --quiet
    else # more producers than this process's CPUs
        run 0 "$bench" --source empty --samples 16 --batch 8 \
            --producers $(($(nproc) + 1)) --quiet
    fi
    has "$work/err" "producers asked for (--producers), more than"
    lacks "$work/err" "ringfeed: "
    no_c_terms "$work/err"
    run 1 "$bench" --source "$work/ds" --batch 8 --max-pixels 5 --quiet
    has "$work/err" "is above the limit of 5; raise --max-pixels"
    no_c_terms "$work/err"
}

# An error with an errno's code gives the library's detail alone: it said
# "No such file or directory: cannot open dataset ..." of a folder that
# exists, for a class folder without images.
case_bench_detail_without_errno_name() {
    dir=$work/empty-class-bench
    mkdir -p "$dir/a" "$dir/b"
    cp "$(first_image class_000)" "$dir/a/"
    run 1 "$bench" --source "$dir" --quiet
    has "$work/err" "ringfeed-bench: cannot open dataset '$dir': "
    has "$work/err" "1 class folder without image files"
    lacks "$work/err" "No such file or directory"
}

# Output that cannot be written is a failure (each tool exited 0), with
# the system's reason (ringfeed-bench --help, longer than stdio's buffer,
# said "Input/output error").
case_output_unwritable() {
    [ -w /dev/full ] || skip "no /dev/full"
    for command in "$bench --source empty --samples 16 --batch 8 --json" \
        "$pack --verify $work/ds --jobs 1" "$synth --help" "$bench --help"; do
        # shellcheck disable=SC2086 # a command and its arguments
        $command --quiet >/dev/full 2>"$work/err"
        status=$?
        [ $status -eq 1 ] ||
            fail "exit status $status, expected 1: $command >/dev/full"
        tool=${command%% *}
        has "$work/err" "${tool##*/}: cannot write to standard output: No space left"
    done
    # closed: said as standard output, not "the output: Bad file descriptor"
    for command in "$synth --help" "$bench --help"; do
        # shellcheck disable=SC2086 # a command and its arguments
        $command >&- 2>"$work/err"
        status=$?
        [ $status -eq 1 ] ||
            fail "exit status $status, expected 1: $command >&-"
        has "$work/err" "cannot write to standard output: Bad file descriptor (it is closed)"
    done
}

# An option's value is never the next option: '--source --quiet' took
# '--quiet' as the dataset's path (exit 1); --source=--x still gives one.
case_options_value_not_an_option() {
    run 2 "$bench" --source --quiet
    has "$work/err" "--source wants a value, and '--quiet' is an option"
    run 2 "$bench" --quiet --source
    has "$work/err" "--source wants a value"
    run 2 "$pack" --verify --quiet
    has "$work/err" "--verify wants a value, and '--quiet' is an option"
    run 2 "$synth" "$work/synth-x" --images --classes 3
    has "$work/err" "--images wants a value"
    run 1 "$bench" --source=--quiet --quiet
    has "$work/err" "cannot open dataset '--quiet'"
    run 2 "$bench" --quiet=1
    has "$work/err" "--quiet takes no value"
}

# A pack of raw samples is delivered as stored: ringfeed-bench takes
# transform none for it (the library would otherwise say, at open, that
# its default train does nothing to them) and refuses --transform; a
# shape that is not the pack's is refused with every flag to change, each
# once (--size stands for height and width).
case_bench_raw_pack_as_stored() {
    dir=$work/bench-raw
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 32x32 --quiet
    run 0 "$bench" --source "$dir/raw.pack" --size 32 --batch 8 --quiet
    lacks "$work/err" "raw pixels"
    run 2 "$bench" --source "$dir/raw.pack" --size 32 --batch 8 \
        --transform eval --quiet
    has "$work/err" "--transform would change nothing: every sample of"
    run 1 "$bench" --source "$dir/raw.pack" --size 32 --batch 8 \
        --layout nchw --quiet
    has "$work/err" "use --size 32, --channels 3 and --layout nhwc to match"
    no_c_terms "$work/err"
}

# The loader's policies have flags of the bench's (its messages named
# RF_PARAM_BATCH_TIMEOUT_MS and others the bench could not set), each
# refused where it would change nothing, and --verify's reference decode
# follows them.
case_bench_policy_options() {
    run 2 "$bench" --source "$work/ds" --resize 300 --quiet
    has "$work/err" "--resize applies to --transform eval"
    for option in "--min-scale-ppm 500000" "--no-flip"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source "$work/ds" --transform eval $option --quiet
        has "$work/err" "${option%% *} applies to --transform train"
    done
    run 2 "$bench" --source synthetic --no-flip --quiet
    has "$work/err" "--no-flip applies to a PATH or synthetic-jpeg"
    run 2 "$bench" --source "$work/ds" --on-producer-death fail \
        --max-respawns 3 --quiet
    has "$work/err" "--max-respawns limits --on-producer-death respawn"
    run 2 "$bench" --source "$work/ds" --on-producer-death never --quiet
    has "$work/err" "--on-producer-death wants respawn or fail, not 'never'"
    run 0 "$bench" --source "$work/ds" --transform eval --resize 300 \
        --verify --batch 8 --quiet
    has "$work/out" "verified: 24 samples, 0 missing"
    run 0 "$bench" --source "$work/ds" --no-flip --min-scale-ppm 500000 \
        --on-producer-death fail --batch-timeout-ms 60000 --verify --batch 8 \
        --quiet
    has "$work/out" "verified: 24 samples, 0 missing"
    dir=$work/bench-raw-policy
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 32x32 --quiet
    run 2 "$bench" --source "$dir/raw.pack" --size 32 --no-flip --quiet
    has "$work/err" "--no-flip would change nothing: every sample of"
}

# A wait past --stall-warning-ms is reported, its advice in the bench's
# flags (the remedy read "set RF_PARAM_BATCH_TIMEOUT_MS to have ...").
case_bench_stall_in_its_flags() {
    run 0 "$bench" --source "$work/ds" --stall-warning-ms 1 --batch 16 --quiet
    has "$work/err" "the loop has waited"
    has "$work/err" "--batch-timeout-ms, when set, replaces a producer"
    has "$work/err" "(--stall-warning-ms sets when this is reported)"
    no_c_terms "$work/err"
}

# Under a launcher's RANK and WORLD_SIZE the loader hands out one rank's
# share; --verify counted the others' samples as missing and failed.
case_bench_verify_one_rank() {
    run 0 env RANK=1 WORLD_SIZE=3 "$bench" --source "$work/ds" --verify \
        --epochs 2 --batch 4 --quiet
    has "$work/out" "verified: 16 samples, 0 missing, 0 duplicated, 0 corrupt"
    run 0 env RANK=2 WORLD_SIZE=5 "$bench" --source synthetic --samples 50 \
        --verify --unordered --batch 4 --quiet
    has "$work/out" "verified: 10 samples, 0 missing, 0 duplicated, 0 corrupt"
    # 50 over 3 ranks: each is padded to 17, rank 2's last a repeat of
    # another rank's sample
    run 0 env RANK=2 WORLD_SIZE=3 "$bench" --source synthetic --samples 50 \
        --verify --batch 4 --quiet
    has "$work/out" "verified: 17 samples, 0 missing, 0 duplicated, 0 corrupt"
}

# --size HxW sets a height and width of their own (--size set both to
# one value, so a raw pack of 24x32 samples could not be read, and the
# advice said "use --size 24, --size 32"); the advice, --verify and the
# report follow the two sides.
case_bench_non_square_size() {
    dir=$work/bench-non-square
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 24x32 --quiet
    run 1 "$bench" --source "$dir/raw.pack" --size 24 --batch 8 --quiet
    has "$work/err" "use --size 24x32, --channels 3 and --layout nhwc to match"
    no_c_terms "$work/err"
    run 0 "$bench" --source "$dir/raw.pack" --size 24x32 --verify --batch 8 \
        --quiet
    has "$work/out" "verified: 24 samples, 0 missing, 0 duplicated, 0 corrupt"
    has "$work/out" "(24x32x3 nhwc, "
    run 0 "$bench" --source "$work/ds" --size 24x32 --transform eval \
        --layout nchw --verify --batch 8 --quiet
    has "$work/out" "verified: 24 samples, 0 missing, 0 duplicated, 0 corrupt"
    run 0 "$bench" --source synthetic --samples 16 --size 8x12 --verify \
        --json --batch 8 --quiet
    has "$work/out" '"height": 8, "width": 12'
    has "$work/out" '"verified": 16'
    run 0 "$bench" --source synthetic --samples 16 --size 8 --json --batch 8 \
        --quiet
    has "$work/out" '"height": 8, "width": 8'
    for size in 24x x32 24x32x3 0x8 8x-1 abc; do
        run 2 "$bench" --source synthetic --size "$size" --quiet
        has "$work/err" "--size wants N or HxW (height x width), each in 1.."
    done
    run 0 "$bench" --help
    has "$work/out" "--size N|HxW"
}

# The summary's list of samples left out gives their reasons in the
# bench's flags, as the run's errors do (it said "jpeg_warnings lenient
# accepts it").
case_bench_skipped_in_its_flags() {
    dir=$work/bench-skipped/a
    mkdir -p "$dir"
    dd if="$(first_image class_000)" of="$dir/cut.jpg" bs=1000 count=1 \
        2>/dev/null
    cp "$(first_image class_001)" "$dir/"
    run 0 "$bench" --source "${dir%/a}" --on-error skip \
        --max-error-ppm 1000000 --size 32 --quiet
    has "$work/out" "skipped       1 sample (--on-error skip"
    has "$work/out" "1 sample in 1 batch of 64 ("
    has "$work/out" "(--jpeg-warnings lenient accepts it"
    no_c_terms "$work/out"
}

# --rank and --world-size set the shard (the message about a bad RANK
# in the environment said to set RF_PARAM_RANK and RF_PARAM_WORLD_SIZE,
# which the bench had no flags for); they override the environment, and
# --verify expects that rank's share.
case_bench_rank_flags() {
    run 1 env RANK=abc WORLD_SIZE=2 "$bench" --samples 8 --size 8 --quiet
    has "$work/err" "RANK='abc' is not a number"
    has "$work/err" "fix it, or set --rank and --world-size"
    no_c_terms "$work/err"
    run 0 "$bench" --source "$work/ds" --rank 1 --world-size 3 --verify \
        --epochs 2 --batch 4 --quiet
    has "$work/out" "verified: 16 samples, 0 missing, 0 duplicated, 0 corrupt"
    run 0 env RANK=abc WORLD_SIZE=2 "$bench" --source synthetic --samples 50 \
        --rank 2 --world-size 5 --verify --unordered --batch 4 --quiet
    has "$work/out" "verified: 10 samples, 0 missing, 0 duplicated, 0 corrupt"
    # both flags: bad usage (it exited 1, as a failed run)
    run 2 "$bench" --samples 8 --size 8 --rank 3 --world-size 3 --quiet
    has "$work/err" "--rank 3 is not below --world-size 3: ranks count from 0; use --rank 0..2"
    no_c_terms "$work/err"
    # one of them from the environment: the library's check, in its flags
    run 1 env WORLD_SIZE=3 "$bench" --samples 8 --size 8 --rank 3 --quiet
    has "$work/err" "rank 3 is not below world size 3; set --rank and"
    no_c_terms "$work/err"
    run 2 "$bench" --rank -2 --quiet
    has "$work/err" "--rank wants an integer in -1.."
    run 2 "$bench" --world-size -1 --quiet
    has "$work/err" "--world-size wants an integer in 0.."
}

# A --source path the library refuses before opening anything (empty,
# or longer than it keeps) is a usage error naming --source (it named
# rf_config_set_path, a C function).
case_bench_source_path_refused() {
    for verify in "" --verify; do
        # shellcheck disable=SC2086 # $verify is an option, or none
        run 2 "$bench" --source '' $verify --quiet
        has "$work/err" "--source wants synthetic, empty, synthetic-jpeg or the PATH"
        lacks "$work/err" "rf_config"
    done
    long=$(printf '%5000s' '' | tr ' ' a)
    run 2 "$bench" --source "$long" --quiet
    has "$work/err" "ringfeed-bench: --source: the path is 5000 bytes; the limit"
    lacks "$work/err" "rf_config"
}

# A --source that names a kind of source (synthetic, empty,
# synthetic-jpeg) while a file or folder of that name is in the current
# folder is refused (it ran on made-up data, as if on the dataset);
# ./NAME reads the folder, and the kind still runs where nothing is
# called so.
case_bench_source_kind_beside_folder() {
    dir=$work/bench-kind-beside
    mkdir -p "$dir"
    cp -r "$work/ds" "$dir/synthetic"
    : >"$dir/empty"
    for kind in synthetic empty; do
        run 2 sh -c 'cd "$1" && exec "$2" --source "$3" --samples 8 --quiet' \
            sh "$dir" "$bench" "$kind"
        has "$work/err" "--source $kind names a kind of source, not a path"
        has "$work/err" "use --source ./$kind"
    done
    has "$work/err" "a file called 'empty' is here too"
    run 0 sh -c 'cd "$1" && exec "$2" --source ./synthetic --size 32 --quiet' \
        sh "$dir" "$bench"
    has "$work/out" "24 samples"
    run 0 sh -c 'cd "$1" && exec "$2" --source synthetic-jpeg --samples 8 \
        --size 32 --quiet' sh "$dir" "$bench"
}

# A producer's busy share is of the timed run, without what it did while
# the open waited for it (a short run showed "producer busy 186.2%"):
# one share per producer, above 0 and at most 100%. 128 batches: in a run
# of a few, all made while the open waited, a producer rightly shows 0%.
case_bench_busy_share_within_100() {
    run 0 "$bench" --source synthetic --samples 8192 --batch 64 --size 128 \
        --producers 2
    grep "producer busy" "$work/out" | tr ' ' '\n' | sed -n 's/%$//p' |
        awk '$1 > 100 || $1 <= 0 { bad = 1 } { n++ } END { exit bad || n != 2 }' ||
        fail "not two shares in (0, 100%]: $(grep "producer busy" "$work/out")"
}

# The bench says nothing in C's names: its --help named RF_PARAM_FLIP
# and RF_PARAM_DCT_SCALING, and the note after the tenth sample left out
# said the others were counted (rf_stats.failed_samples) and listed
# (rf_loader_sample_errors()), where the bench shows them in its summary.
case_bench_no_c_names() {
    run 0 "$bench" --help
    no_c_terms "$work/out"
    dir=$work/bench-no-c-names/a
    mkdir -p "$dir"
    for i in 01 02 03 04 05 06 07 08 09 10 11 12; do
        dd if="$(first_image class_000)" of="$dir/cut$i.jpg" bs=1000 \
            count=1 2>/dev/null
    done
    cp "$(first_image class_001)" "$dir/"
    run 0 "$bench" --source "${dir%/a}" --on-error skip --producers 1 \
        --max-error-ppm 1000000 --size 32 --epochs 1
    has "$work/err" "left out after this one are counted and listed in the summary's \"skipped\" lines, not said"
    lacks "$work/err" "rf_"
    no_c_terms "$work/err"
    has "$work/out" "skipped       12 samples"
    # past the 4 reasons a batch keeps, how to get the reason
    has "$work/err" "failed); ringfeed-pack --verify of the --source says why"
    lacks "$work/out" "rf_"
}

# A RINGFEED_PRODUCER that cannot be run is said once, with its advice
# once (the code's text said "set RINGFEED_PRODUCER to its path" before
# the detail's own advice, though it was set), and a folder as a folder.
case_bench_helper_advice_once() {
    run 1 env RINGFEED_PRODUCER=/nonexistent "$bench" --samples 8 --quiet
    has "$work/err" "ringfeed-bench: producer helper '/nonexistent' (RINGFEED_PRODUCER) cannot be executed: No such file or directory; point RINGFEED_PRODUCER at"
    lacks "$work/err" "set RINGFEED_PRODUCER"
    run 1 env RINGFEED_PRODUCER="$work" "$bench" --samples 8 --quiet
    has "$work/err" "(RINGFEED_PRODUCER) cannot be executed: it is a folder"
}

# A --source that is not a dataset (a text file, a JPEG) is said to be
# one that does not open; it was put as "a sample could not be read or
# decoded", of a run that had read no sample.
case_bench_not_a_dataset() {
    dir=$work/bench-not-a-dataset
    mkdir "$dir"
    echo hi >"$dir/notpack"
    run 1 "$bench" --source "$dir/notpack" --quiet
    has "$work/err" "ringfeed-bench: cannot open dataset '$dir/notpack': "
    has "$work/err" "not a ringfeed packed file"
    lacks "$work/err" "a sample could not be read"
    image=$(first_image class_000)
    run 1 "$bench" --source "$image" --quiet
    has "$work/err" "ringfeed-bench: cannot open dataset '$image': "
    has "$work/err" "(a JPEG file)"
    lacks "$work/err" "a sample could not be read"
}

# A --source that does not open gets the same message and status with
# --verify as without (the verifier opens the dataset first, and said
# "--verify: /nope: No such file or directory": it is --source that is
# wrong).
case_bench_verify_unopened() {
    dir=$work/bench-verify-unopened
    mkdir "$dir"
    echo hi >"$dir/notpack"
    long=$(printf '%5000s' '' | tr ' ' a)
    for source in "$dir/nope" "$dir/notpack" "$long"; do
        "$bench" --source "$source" --quiet >/dev/null 2>"$dir/plain.err"
        status=$?
        [ $status -ne 0 ] || fail "a --source that does not open ran"
        run $status "$bench" --source "$source" --verify --quiet
        cmp -s "$dir/plain.err" "$work/err" ||
            fail "--verify says otherwise: $(cat "$dir/plain.err")"
        lacks "$work/err" "--verify"
        case $source in
        "$long") has "$work/err" "--source: the path is 5000 bytes" ;;
        *) has "$work/err" "ringfeed-bench: cannot open dataset '$source': " ;;
        esac
    done
}

make_mixed_folder() {
    cp -rl "$work/ds" "$1"
    dd if="$(first_image class_000)" of="$1/class_001/img_cut.jpg" bs=1000 \
        count=3 2>/dev/null
    printf '\211PNG\r\n\032\n\000\000\000\rIHDR' >"$1/class_002/img_png.jpg"
}

# same_with_jobs NAME OPTION...: packs $dir/source with OPTIONS and
# --jobs 1, then --jobs 3; the packs and the messages must be the same.
same_with_jobs() {
    _name=$1
    shift
    for _jobs in 1 3; do
        run 0 "$pack" "$dir/source" "$dir/$_name-$_jobs.pack" --jobs $_jobs \
            "$@"
        grep -v '^packed ' "$work/out" >"$dir/$_name-$_jobs.out"
        cp "$work/err" "$dir/$_name-$_jobs.err"
    done
    cmp -s "$dir/$_name-1.pack" "$dir/$_name-3.pack" ||
        fail "$_name: the pack differs between --jobs 1 and --jobs 3"
    cmp -s "$dir/$_name-1.err" "$dir/$_name-3.err" ||
        fail "$_name: stderr differs: $(diff "$dir/$_name-1.err" \
            "$dir/$_name-3.err")"
}

# The pack, the samples left out and the warnings are the same whatever
# --jobs is: JPEG bytes decoded whole first (--skip-bad), raw samples
# with a dictionary trained on them, JPEG bytes as they are; and --verify
# lists the same bad samples in the same order, with the same status.
case_jobs_same_output() {
    dir=$work/jobs
    mkdir "$dir"
    make_mixed_folder "$dir/source"
    same_with_jobs skip --skip-bad --quiet
    [ "$(count "$work/err" "skipped: sample")" -eq 2 ] ||
        fail "2 samples should be skipped"
    has "$work/err" "class_001/img_cut.jpg): premature end of data"
    # a PNG's signature and a header cut short: read as the PNG it is
    has "$work/err" "class_002/img_png.jpg): PNG: the file ends early"
    same_with_jobs raw --raw 32x32 --dict-size 4096 --skip-bad --quiet
    has "$work/out" "with a dictionary"
    same_with_jobs as-is --quiet
    # the PNG cut short is left to the decoder: its signature is a PNG's
    lacks "$work/err" "img_png.jpg"
    for jobs in 1 3; do
        run 1 "$pack" --verify "$dir/source" --jobs $jobs
        grep '^bad: ' "$work/out" >"$dir/verify-$jobs"
    done
    [ "$(wc -l <"$dir/verify-1")" -eq 2 ] || fail "2 bad samples expected"
    cmp -s "$dir/verify-1" "$dir/verify-3" ||
        fail "--verify lists differ: $(diff "$dir/verify-1" "$dir/verify-3")"
    run 0 "$pack" --verify "$dir/raw-3.pack" --jobs 3 --progress
    has "$work/out" "24 samples in 3 classes checked"
    has "$work/err" "100% 24/24"
}

# --jobs takes a number of workers from 1 up, as the other options check
# theirs (exit 2), when packing and with --verify.
case_jobs_bad_value() {
    dir=$work/jobs-value
    mkdir "$dir"
    for value in 0 x -1 '' 3x 1025; do
        run 2 "$pack" "$work/ds" "$dir/x.pack" --jobs "$value" --quiet
        has "$work/err" "--jobs wants an integer in 1..1024, not '$value'"
        run 2 "$pack" --verify "$work/ds" --jobs "$value"
        has "$work/err" "--jobs wants an integer in 1..1024"
    done
    holds "$dir"
}

# running PID: whether PID is a live process (not gone, nor a zombie
# waiting to be reaped).
running() {
    _state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ -n "$_state" ] && [ "$_state" != Z ]
}

# ends_soon PID...: each of them stops running within 5 s.
ends_soon() {
    for _pid in "$@"; do
        _tries=0
        while running "$_pid"; do
            _tries=$((_tries + 1))
            [ $_tries -le 100 ] || fail "worker $_pid is still running"
            sleep 0.05
        done
    done
}

# A worker killed in the middle of a pack ends the run: exit 1, naming the
# worker, the signal and the sample it was on; no pack is left, and the
# other worker ends too. The same when the tool itself is killed: its
# workers do not go on. (10 links to each of the 24 images, packed slowly:
# several seconds of work, stopped early.)
case_jobs_killed_worker() {
    dir=$work/jobs-killed
    mkdir -p "$dir/out"
    make_big
    for victim in worker tool; do
        # The first run's "packing" must not be taken for the second's:
        # its 2> truncates the file only once the background job starts.
        rm -f "$dir/err"
        # shellcheck disable=SC2086 # $slow is a list of options
        "$pack" "$work/big" "$dir/out/x.pack" $slow --jobs 2 2>"$dir/err" &
        background=$!
        wait_for "$dir/err" "packing"
        workers=$(pgrep -P $background)
        [ "$(echo "$workers" | wc -w)" -eq 2 ] ||
            fail "2 workers expected, found '$workers'"
        if [ $victim = worker ]; then
            kill -s KILL "$(echo "$workers" | head -n 1)"
        else
            kill -s KILL $background
        fi
        { wait $background; } 2>/dev/null
        status=$?
        background=
        # shellcheck disable=SC2086 # a list of pids
        ends_soon $workers
        holds "$dir/out"
        [ $victim = worker ] || continue
        [ $status -eq 1 ] || fail "exit status $status after a worker died"
        has "$dir/err" "was killed by signal 9 (Killed) while on sample"
        has "$dir/err" "no pack was written"
    done
}

# ---- ringfeed-synth ------------------------------------------------------

# Fewer images than classes would leave empty class folders, which no
# loader opens: refused (it used to exit 0).
case_synth_needs_an_image_per_class() {
    dir=$work/synth-few
    mkdir "$dir"
    run 2 "$synth" "$dir/x" --images 3 --classes 5 --quiet
    has "$work/err" "--images 3 is fewer than --classes 5"
    holds "$dir"
    run 0 "$synth" "$dir/x" --images 5 --classes 5 --quiet
    run 0 "$pack" --verify "$dir/x"
    has "$work/out" "5 samples in 5 classes"
}

# A worker killed while writing leaves no partial .jpg under its name: a
# file size limit far below an image's size (40 KB at least) kills the
# first worker with SIGXFSZ in the middle of its first file. (ulimit -f
# counts 512- or 1024-byte blocks, depending on the shell.)
case_synth_killed_writes_no_partial_jpeg() {
    dir=$work/synth-killed
    mkdir "$dir"
    # shellcheck disable=SC2016 # $0 and $1 are for the inner shell
    run 1 sh -c 'ulimit -f 16 && exec "$0" "$1" --images 2 --classes 1 \
        --jobs 1 --quiet' "$synth" "$dir/x"
    has "$work/err" "was killed by signal"
    partial=$(find "$dir/x" -name '*.jpg')
    [ -z "$partial" ] || fail "a partial file has an image's name: $partial"
}

# SIGTERM to the parent alone stops its workers too: no file is written
# after it has gone (they went on to the end).
case_synth_workers_stop_with_parent() {
    dir=$work/synth-term
    mkdir "$dir"
    "$synth" "$dir/x" --images 1000 --classes 2 --jobs 2 --quiet &
    background=$!
    until [ "$(find "$dir/x" -name '*.jpg' 2>/dev/null | wc -l)" -ge 4 ]; do
        kill -0 $background 2>/dev/null || fail "ringfeed-synth ended early"
        sleep 0.05
    done
    kill -s TERM $background
    { wait $background; } 2>/dev/null # "Terminated" is expected
    background=
    sleep 0.2 # a worker that outlived it would write a file or two here
    before=$(find "$dir/x" -type f | wc -l)
    sleep 0.5
    after=$(find "$dir/x" -type f | wc -l)
    [ "$before" -eq "$after" ] ||
        fail "$((after - before)) files were written after the parent died"
    [ "$after" -lt 1000 ] || fail "the run was not stopped"
}

# RF_TEST_IN_PROCESS=1 (tests/harness.h, for compute-sanitizer) runs the
# one case named whole, in the program's own process: its line and no
# summary; a part of a name, or two names, is refused, not taken as a
# selection of cases.
case_harness_in_process_runs_one_case() {
    program=$tools/../tests/test-ring
    [ -x "$program" ] || fail "no $program (make check builds it)"
    name=$("$program" --list | head -n 1)
    RF_TEST_IN_PROCESS=1 run 0 "$program" "$name"
    [ "$(wc -l <"$work/out")" -eq 1 ] || fail "not one line of output"
    has "$work/out" "PASS: $name ("
    lacks "$work/out" "# test-ring:"
    RF_TEST_IN_PROCESS=1 run 2 "$program" ring/
    has "$work/out" 'runs one case: give its whole "topic/name"'
    RF_TEST_IN_PROCESS=1 run 2 "$program" "$name" "$name"
    run 0 "$program" "$name" # without it, the usual run
    has "$work/out" "# test-ring: 1 passed, 0 failed, 0 skipped"
}

# ---- found under attack: packing and synthesizing -----------------------

# OUT.pack '-' is no standard output: a pack is written into a file and
# named when whole (it made a file named '-', and the summary went to
# stdout, where a pipe expected the pack).
case_pack_not_to_stdout() {
    dir=$work/stdout
    mkdir "$dir"
    (cd "$dir" && run 2 "$pack" "$work/ds" - --quiet) || exit 1
    has "$work/err" "a pack cannot go to standard output ('-')"
    has "$work/err" "(./- for a file named -)"
    [ ! -s "$work/out" ] || fail "something went to stdout"
    holds "$dir"
}

# A --raw value that is not HEIGHTxWIDTH is quoted whole ('2x3' and ''
# were quoted of 2x2x3 and x, as if the flag wanted one integer).
case_options_raw_value_quoted_whole() {
    dir=$work/raw-value
    mkdir "$dir"
    for value in 2x2x3 x " 2x2" 65537x1 1x0 2X2 1x; do
        run 2 "$pack" "$work/ds" "$dir/x.pack" --raw "$value"
        has "$work/err" "--raw wants HEIGHTxWIDTH, each side 1..65536, e.g."
        has "$work/err" "224x224, not '$value'"
    done
    holds "$dir"
}

# A pack past the file size limit (ulimit -f) says so, naming the limit,
# and leaves nothing: SIGXFSZ killed ringfeed-pack without a word.
case_pack_file_size_limit() {
    dir=$work/fsize
    mkdir "$dir"
    # shellcheck disable=SC2016 # $0 and $1 are for the inner shell
    run 1 sh -c 'ulimit -f 16 && exec "$0" "$1" "$2" --jobs 1 --quiet' \
        "$pack" "$work/ds" "$dir/x.pack"
    has "$work/err" "x.pack: cannot write sample 0: File too large"
    has "$work/err" "raise the limit, or write the pack on another file"
    holds "$dir"
}

# A run that fails says what it left: how many of the images, and that
# the folder must be removed before a run again (a non-empty folder is
# refused). SIGXFSZ is named and its limit too.
case_synth_stopped_says_what_is_left() {
    x=$work/synth-stopped
    # shellcheck disable=SC2016 # "$@" is for the inner shell
    run 1 sh -c 'ulimit -f 16 && exec "$@"' sh "$synth" "$x" --images 4 \
        --classes 2 --jobs 2 --quiet
    has "$work/err" "(File size limit exceeded): an image would pass the"
    has "$work/err" "file size limit; raise it (ulimit -f)"
    has "$work/err" "stopped: $x holds 0 of the 4 images, not a whole"
    has "$work/err" "dataset; remove it"
    run 1 "$synth" "$x" --images 4 --classes 2 --quiet
    has "$work/err" "exists and is not empty"
}

# A DIR whose parent folder is missing is said so, with what to do (it
# said "cannot create /x/y/z: No such file or directory").
case_synth_missing_parent() {
    run 1 "$synth" "$work/nope/deeper/ds" --images 4 --classes 2 --quiet
    has "$work/err" "ringfeed-synth: cannot create $work/nope/deeper/ds: the folder it goes in, $work/nope/deeper, does not exist; create it first (mkdir -p $work/nope/deeper)"
    [ ! -e "$work/nope" ] || fail "it created $work/nope"
}

# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"

