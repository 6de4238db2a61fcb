#!/bin/sh
# tools/dev/fuzz.sh - builds the fuzz targets of tests/fuzz/ with clang,
# libFuzzer, AddressSanitizer and UndefinedBehaviorSanitizer in
# _build-fuzz/, and runs them.
#
#   tools/dev/fuzz.sh TARGET|all SECONDS  runs each target for SECONDS on a copy
#                                     of its corpus, one after another
#   tools/dev/fuzz.sh seeds FOLDER        writes fresh seed corpora into FOLDER
#
# Targets: pack jpeg zstd segment. For each it prints executions, exec/s,
# the corpus size before and after, and the crashes (inputs that crash,
# leak, time out over FUZZ_TIMEOUT seconds, default 2, or run out of
# memory), which are kept in _build-fuzz/findings/TARGET/. The grown
# corpus stays in _build-fuzz/run/TARGET/ (`FUZZER -merge=1 DST SRC` keeps
# only what adds coverage). Extra libFuzzer flags: FUZZ_FLAGS.
set -eu
top=$(cd "$(dirname "$0")/../.." && pwd)
build=$top/_build-fuzz
targets="pack jpeg zstd segment"
timeout=${FUZZ_TIMEOUT:-2}

usage() {
    echo "usage: $0 pack|jpeg|zstd|segment|all SECONDS" >&2
    echo "       $0 seeds FOLDER" >&2
    exit 2
}

# Configures once: the library instrumented for coverage and sanitized; the
# targets linked with libFuzzer's main through FUZZ_LDFLAGS.
configure() {
    [ -f "$build/Makefile" ] && return 0
    [ -x "$top/configure" ] || (cd "$top" && autoreconf -fi)
    mkdir -p "$build"
    (cd "$build" && "$top/configure" -q --disable-shared CC=clang \
        CFLAGS="-g -O1 -fno-omit-frame-pointer -fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=undefined")
}

build_programs() {
    configure
    make -C "$build" -s -j2 FUZZ_LDFLAGS=-fsanitize=fuzzer "$@" >&2
}

# The value of libFuzzer's final statistic $1 in log $2.
stat() {
    sed -n "s/^stat::$1: *//p" "$2" | tail -n 1
}

# "N inputs, K KB" of a folder.
corpus_size() {
    n=$(find "$1" -type f | wc -l)
    bytes=$(find "$1" -type f -exec cat {} + | wc -c)
    echo "$n inputs, $(((bytes + 1023) / 1024)) KB"
}

run_target() {
    t=$1 seconds=$2
    work=$build/run/$t findings=$build/findings/$t
    rm -rf "$work"
    mkdir -p "$work" "$findings"
    cp "$top/tests/fuzz/corpus/$t/"* "$work/"
    before=$(corpus_size "$work")
    log=$build/run/$t.log
    echo "== $t: ${seconds}s on a copy of tests/fuzz/corpus/$t ($before)" >&2
    status=0
    # shellcheck disable=SC2086 # FUZZ_FLAGS is a list of flags
    "$build/tests/fuzz/fuzz-$t" -max_total_time="$seconds" \
        -timeout="$timeout" -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$findings/" ${FUZZ_FLAGS:-} "$work" \
        >"$log" 2>&1 || status=$?
    crashes=$(find "$findings" -type f | wc -l)
    echo "$t: $(stat number_of_executed_units "$log") runs," \
        "$(stat average_exec_per_sec "$log") exec/s," \
        "corpus $before -> $(corpus_size "$work")," \
        "$crashes crashes (exit $status)"
    if [ "$status" -ne 0 ]; then
        grep -m 1 -A 12 "ERROR\|==.*deadly\|timeout after" "$log" >&2 || true
        echo "   log: $log; inputs: $findings/" >&2
    fi
}

[ $# -eq 2 ] || usage
case $1 in
seeds)
    build_programs tests/fuzz/make-seeds
    "$build/tests/fuzz/make-seeds" "$2"
    exit 0
    ;;
all) list=$targets ;;
pack | jpeg | zstd | segment) list=$1 ;;
*) usage ;;
esac
case $2 in
'' | *[!0-9]*) usage ;;
esac
for t in $list; do
    build_programs "tests/fuzz/fuzz-$t"
done
for t in $list; do
    run_target "$t" "$2"
done
