# shellcheck shell=sh
# harness.sh - shell test scripts as lists of named cases, the way
# tests/harness.h runs a C test program's. A script defines a function
# case_TOPIC_NAME for each case, then sources this file and hands over its
# table and its arguments:
#
#     cases="write/concurrent_runs write/killed_leaves_nothing jobs/bad_value"
#     . "$(dirname "$0")/harness.sh"
#     test_main "$cases" "$@"
#
# An entry TOPIC/NAME runs the function case_TOPIC_NAME. `script --list` prints
# the entries; `script` runs them all; `script WORD...` runs those whose
# entry contains any WORD. Each case runs in a subshell: a failed check
# (exit 1 from the subshell) ends that case, and every other case still
# runs. A case skips with `skip REASON` (exit 77), only itself. One line
# per case, then
#
#     # SCRIPT: N passed, N failed, N skipped
#
# which tools/quickstart adds up. The script exits 1 when a case failed,
# 77 when every case skipped, else 0 (automake's meanings).
#
# Optional, defined by the script before test_main:
#   test_setup     runs once in the script's own shell before the first
#                  selected case (not for --list), so the cases see what
#                  it makes (a scratch folder, test data);
#   test_each      runs in each case's subshell before the case (to
#                  empty what a previous case left for its messages);
#   test_skip_all  set to a reason: every selected case skips with it
#                  (a dependency that every case needs is missing);
#                  set before test_main, test_setup does not run either;
#                  test_setup may set it too, instead of failing.
# $case holds the running case's entry. Cases have no time limit of their
# own: tests/run-test.sh's limit bounds the whole script.

# skip REASON: skips the running case.
skip() {
    echo "  skipped: $*"
    exit 77
}

# harness_selected ENTRY WORD...: whether ENTRY contains any WORD (all
# entries when no WORD is given).
harness_selected() {
    _entry=$1
    shift
    [ $# -eq 0 ] && return 0
    for _word in "$@"; do
        case $_entry in *"$_word"*) return 0 ;; esac
    done
    return 1
}

# harness_run ENTRY: runs one case; counts it as passed, failed or skipped.
harness_run() {
    case=$1
    if [ -n "${test_skip_all:-}" ]; then
        echo "  skipped: $test_skip_all"
        _status=77
    else
        _start=$(date +%s)
        (
            if command -v test_each >/dev/null 2>&1; then test_each; fi
            "case_${case%%/*}_${case#*/}"
        )
        _status=$?
    fi
    _took="($(($(date +%s) - ${_start:-$(date +%s)})) s)"
    case $_status in
    0) harness_passed=$((harness_passed + 1)); echo "PASS: $case $_took" ;;
    77) harness_skipped=$((harness_skipped + 1)); echo "SKIP: $case" ;;
    *) harness_failed=$((harness_failed + 1)); echo "FAIL: $case $_took" ;;
    esac
}

# test_main CASES [--list | WORD...]: the script's main, its last command
# (its status is the script's).
test_main() {
    _cases=$1
    shift
    if [ "${1:-}" = "--list" ]; then
        # shellcheck disable=SC2086 # a list of entries
        printf '%s\n' $_cases
        return 0
    fi
    harness_passed=0 harness_failed=0 harness_skipped=0
    _set_up=
    for _entry in $_cases; do
        harness_selected "$_entry" "$@" || continue
        if [ -z "$_set_up" ] && [ -z "${test_skip_all:-}" ] &&
            command -v test_setup >/dev/null 2>&1; then
            test_setup || { echo "FAIL: test_setup"; return 1; }
        fi
        _set_up=1
        harness_run "$_entry"
    done
    echo "# ${0##*/}: $harness_passed passed, $harness_failed failed," \
        "$harness_skipped skipped"
    [ -n "$_set_up" ] || { echo "no case matches"; return 1; }
    [ "$harness_failed" -eq 0 ] || return 1
    [ "$harness_passed" -gt 0 ] || return 77
    return 0
}
