#!/bin/sh
# Runs one test program under a time limit: RF_TEST_TIMEOUT seconds, else
# 1200 times RF_TEST_CASE_TIMEOUT_SCALE (1 when unset; tools/quickstart
# sets 3 for the sanitizer run). Each case of a program has a limit of its
# own (tests/harness.h, tests/harness.sh); this one is the backstop for
# the whole program. A program it kills prints no summary line, and
# tools/quickstart counts it as a failure. Exit codes follow automake:
# 0 pass, 77 skip, else fail.
limit=${RF_TEST_TIMEOUT:-}
if [ -z "$limit" ]; then
    scale=${RF_TEST_CASE_TIMEOUT_SCALE:-1}
    limit=$(awk -v s="$scale" 'BEGIN { v = 1200 * s; print (v >= 1 ? int(v) : 1200) }')
fi
exec timeout --kill-after=10 "$limit" "$@"
