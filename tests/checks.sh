# shellcheck shell=sh disable=SC2154 # $case and $work are the sourcing script's
# checks.sh - the checks that tests/test-tools*.sh and tests/test-python.sh
# share, sourced by each after it sets $work (their scratch folder) and
# while $case names the case running (tests/harness.sh runs the cases).
# Each check that fails prints why, with the command's stdout and stderr,
# and exits the case's subshell.

# A run left in the background by a failed case is stopped with it.
background=
fail() {
    printf '  %s: %s\n' "$case" "$*"
    [ -z "$background" ] || kill -s KILL "$background" 2>/dev/null
    for _file in "$work/out" "$work/err"; do
        [ -s "$_file" ] && sed "s|^|  ${_file##*/}: |" "$_file"
    done
    exit 1
}

# Each case starts with empty $work/out and $work/err (harness.sh's hook),
# so that a failure shows only its own case's output.
test_each() {
    : >"$work/out"
    : >"$work/err"
}

# run EXPECTED_STATUS COMMAND...: stdout in $work/out, stderr in $work/err.
run() {
    _expected=$1
    shift
    "$@" >"$work/out" 2>"$work/err"
    _status=$?
    [ $_status -eq "$_expected" ] ||
        fail "exit status $_status, expected $_expected: $*"
}

# has FILE TEXT / lacks FILE TEXT: whether FILE holds TEXT (fixed string).
has() {
    grep -qF -- "$2" "$1" || fail "${1##*/} does not say '$2'"
}
lacks() {
    ! grep -qF -- "$2" "$1" || fail "${1##*/} says '$2'"
}
