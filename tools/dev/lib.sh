# shellcheck shell=sh
# tools/dev/lib.sh - shell functions shared by the scripts that drive a
# built tree (tools/bench/*.sh, tools/dev/kill-storm.sh): finding the build
# and its programs, a scratch folder, a dataset written once, quoting a
# command line, and reading a number from a tool's JSON line. Sourced,
# never run:
#
#   me=bench-pipeline             # names the script in its messages
#   top=...                       # the top of the source tree
#   . "$top/tools/dev/lib.sh"
#
# Functions that fail for want of a build exit the script with status 2,
# as those scripts do on a missing build. The variables they set are the
# script's (hence shellcheck's SC2034 below).
# shellcheck disable=SC2154 # me and top: set by the script

say() { printf '%s\n' "$*"; }

# count_option OPTION VALUE: exits 2, naming OPTION, unless VALUE is a
# whole number of at least 1.
count_option() {
    case $2 in
    '' | *[!0-9]* | 0 | 00*)
        printf '%s: %s wants a number >= 1\n' "$me" "$1" >&2
        exit 2
        ;;
    esac
}

# other_argument ARG: an argument none of the script's options took.
# --help prints the script's `usage` and exits 0; any other option is
# refused with the usage (exit 2); else ARG names the build folder.
# shellcheck disable=SC2034 # build_arg: the script's
other_argument() {
    case $1 in
    --help)
        usage
        exit 0
        ;;
    -*)
        usage >&2
        exit 2
        ;;
    *) build_arg=$1 ;;
    esac
}

# find_build BUILD_ARG: sets `build` to the absolute path of BUILD_ARG, or
# of _build in the source tree when it is empty; exits 2 when it is no
# folder.
find_build() {
    build=$(cd "${1:-$top/_build}" 2>/dev/null && pwd) || {
        printf '%s: no build directory %s\n' "$me" "${1:-$top/_build}" >&2
        exit 2
    }
}

# require_built PROGRAM...: exits 2, naming the first of them that is not
# an executable file, when one is not.
require_built() {
    for f in "$@"; do
        [ -x "$f" ] && continue
        printf '%s: %s is missing; run make in %s\n' "$me" "$f" "$build" >&2
        exit 2
    done
}

# bench_program: sets `bench` to the build's ringfeed-bench, and
# `bench_libs` to what LD_LIBRARY_PATH must be to run it (empty: as it
# is). In a build tree tools/ringfeed-bench is libtool's wrapper, a bash
# script that runs sed and ls before it execs the program: about 0.03
# CPU-seconds a run that an installed ringfeed-bench does not have, and
# children of the bench's pid that are no producers. So the program
# itself, with the library it was built with, when the build has them.
# shellcheck disable=SC2034
bench_program() {
    bench=$build/tools/ringfeed-bench
    bench_libs=
    if [ -x "$build/tools/.libs/ringfeed-bench" ] &&
        [ -e "$build/.libs/libringfeed.so" ]; then
        bench=$build/tools/.libs/ringfeed-bench
        bench_libs=$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
    fi
}

# scratch_folder: sets `tmp` to a new folder named after the script,
# removed when it exits (an interrupt exits 130); exits 2 when none can
# be made.
scratch_folder() {
    tmp=$(mktemp -d "${TMPDIR:-/tmp}/$me.XXXXXX") || exit 2
    trap 'rm -rf "$tmp"' EXIT
    trap 'exit 130' INT TERM
}

# write_once DIR WRITER: unless DIR exists, runs `WRITER DIR.partial` and
# renames what it wrote to DIR once it succeeded. Written beside its final
# name and renamed when complete, so that an interrupted run never leaves
# a partial set to be reused. Returns the writer's failure.
write_once() {
    [ -d "$1" ] && return 0
    rm -rf "$1.partial"
    mkdir -p "$(dirname "$1")" && "$2" "$1.partial" && mv "$1.partial" "$1"
}

# quote WORD...: the words as a shell command line, each single-quoted
# unless it is plainly safe.
quote() {
    line=
    for w in "$@"; do
        case $w in
        *[!A-Za-z0-9_./=:,+-]* | '')
            w="'$(printf '%s' "$w" | sed "s/'/'\\\\''/g")'"
            ;;
        esac
        line="${line:+$line }$w"
    done
    printf '%s\n' "$line"
}

# json_field FILE FIELD: the number FIELD of the JSON object on the last
# line of FILE, or nothing. Python parses it properly ($python when the
# script names an interpreter, else python3); without it a sed match is
# enough for the flat objects our tools print.
json_field() {
    if command -v "${python:-python3}" >/dev/null 2>&1; then
        tail -n 1 "$1" | "${python:-python3}" -c '
import json, sys
try:
    v = json.loads(sys.stdin.read()).get(sys.argv[1])
except ValueError:
    v = None
if isinstance(v, (int, float)) and not isinstance(v, bool):
    print(v)' "$2"
    else
        tail -n 1 "$1" |
            sed -n "s/.*\"$2\" *: *\([-+0-9.eE]*\).*/\1/p"
    fi
}
