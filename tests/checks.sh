# shellcheck shell=sh disable=SC2154 # $case and $work are the sourcing script's
# checks.sh - the checks that tests/test-tools.sh and tests/test-python.sh
# share, sourced by both after they set $work (their scratch folder) and
# while $case names the case running. Each check that fails prints why,
# with the command's stdout and stderr, and exits the case's subshell.

# A run left in the background by a failed case is stopped with it.
background=
fail() {
    printf 'FAIL: %s: %s\n' "$case" "$*"
    [ -z "$background" ] || kill -s KILL "$background" 2>/dev/null
    for _file in "$work/out" "$work/err"; do
        [ -s "$_file" ] && sed "s|^|  ${_file##*/}: |" "$_file"
    done
    exit 1
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

# run_cases CASE...: each function case_CASE in a subshell, so that a
# failed check ends its case and the others still run; says ok (with the
# seconds taken) for each that passed, and exits 1 if any failed.
run_cases() {
    _failed=0
    for case in "$@"; do
        _start=$(date +%s)
        : >"$work/out"
        : >"$work/err"
        if ("case_$case"); then
            echo "ok: $case ($(($(date +%s) - _start)) s)"
        else
            _failed=$((_failed + 1))
        fi
    done
    [ $_failed -eq 0 ] || { echo "$_failed case(s) failed"; exit 1; }
}
