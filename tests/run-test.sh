#!/bin/sh
# Runs one test program under a time limit (RF_TEST_TIMEOUT seconds,
# default 300). Exit codes follow automake: 0 pass, 77 skip, else fail.
limit=${RF_TEST_TIMEOUT:-300}
exec timeout --kill-after=10 "$limit" "$@"
