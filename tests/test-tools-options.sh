#!/bin/sh
# shellcheck disable=SC2154 # $work and the tools' paths: tools-lib.sh sets them
# test-tools-options.sh - ringfeed-pack's options: those that would have no
# effect are refused naming the one to drop, --raw and --full-scale on a
# pack of raw samples, the decode limits' ranges and where they apply,
# and a --raw value quoted whole.
#
#     tests/test-tools-options.sh [--list | WORD...]   every case when none is named
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

cases="options/without_effect options/raw_full_scale options/raw_shape_advice
options/decode_limits options/raw_value_quoted_whole"

# shellcheck source=tests/tools-lib.sh
. "$(dirname "$0")/tools-lib.sh"

# ---- ringfeed-pack: options ---------------------------------------------

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
# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
