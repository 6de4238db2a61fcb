# shellcheck shell=sh disable=SC2034 # the variables are the sourcing script's
# tools-lib.sh - what the test-tools*.sh scripts share, sourced by each
# after `set -u`: their test_setup (the tools, the scratch folder and the
# test data), tests/checks.sh's checks, and the helpers more than one of
# them uses. The tools are taken from $RINGFEED_TOOLS, else from the folder
# of $RINGFEED_PRODUCER (make check sets both). Everything is written under
# one mktemp -d folder, $work, removed at the end.

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

# first_image CLASS: the path of the first JPEG of $work/ds/CLASS.
first_image() {
    find "$work/ds/$1" -name '*.jpg' | sort | head -n 1
}

# count FILE TEXT: lines of FILE that hold TEXT.
count() {
    grep -cF -- "$2" "$1"
}

# no_c_terms FILE: FILE names no C constant nor a parameter's keyword.
no_c_terms() {
    for _term in RF_PARAM_ RF_JPEG_ jpeg_warnings max_pixels; do
        ! grep -q "$_term" "$1" || fail "'$_term' in: $(cat "$1")"
    done
}

# make_mixed_folder DIR: $work/ds linked into DIR, with a JPEG cut short
# in one class and a PNG named .jpg in another, so that the bad samples
# fall to different workers.
make_mixed_folder() {
    cp -rl "$work/ds" "$1"
    dd if="$(first_image class_000)" of="$1/class_001/img_cut.jpg" bs=1000 \
        count=3 2>/dev/null
    printf '\211PNG\r\n\032\n\000\000\000\rIHDR' >"$1/class_002/img_png.jpg"
}
