#!/bin/sh
# shellcheck disable=SC2154 # $work and the tools' paths: tools-lib.sh sets them
# test-tools.sh - what every command-line tool (ringfeed-pack,
# ringfeed-synth, ringfeed-bench) does alike, run as a user runs them:
# output that cannot be written is a failure with the system's reason, and
# an option's value is never the next option; and the C test harness's
# mode for compute-sanitizer (RF_TEST_IN_PROCESS). Each tool's own cases
# are in test-tools-write.sh, test-tools-samples.sh, test-tools-options.sh
# (ringfeed-pack), test-tools-bench.sh and test-tools-synth.sh.
#
#     tests/test-tools.sh [--list | WORD...]   every case when none is named
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

cases="output/unwritable options/value_not_an_option
harness/in_process_runs_one_case"

# shellcheck source=tests/tools-lib.sh
. "$(dirname "$0")/tools-lib.sh"

# ---- every tool ---------------------------------------------------------

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

# ---- the C test harness -------------------------------------------------

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
# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
