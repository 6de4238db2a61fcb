#!/bin/sh
# shellcheck disable=SC2154 # $work and the tools' paths: tools-lib.sh sets them
# test-tools-synth.sh - ringfeed-synth run as a user runs it: fewer images
# than classes refused, no partial JPEG from a killed worker, workers that
# stop with their parent, a failed run that says what it left, a missing
# parent folder, messages of processes sharing one stderr kept whole.
#
#     tests/test-tools-synth.sh [--list | WORD...]   every case when none is named
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

cases="synth/needs_an_image_per_class synth/killed_writes_no_partial_jpeg
synth/workers_stop_with_parent synth/stopped_says_what_is_left
synth/missing_parent synth/disk_full synth/one_said_singular
synth/messages_not_interleaved"

# shellcheck source=tests/tools-lib.sh
. "$(dirname "$0")/tools-lib.sh"

# ---- ringfeed-synth -----------------------------------------------------

# Fewer images than classes would leave empty class folders, which no
# loader opens: refused (it used to exit 0).
case_synth_needs_an_image_per_class() {
    dir=$work/synth-few
    mkdir "$dir"
    run 2 "$synth" "$dir/x" --images 3 --classes 5 --quiet
    has "$work/err" "--images 3 is fewer than --classes 5"
    holds "$dir"
    run 0 "$synth" "$dir/x" --images 5 --classes 5 --quiet
    run 0 "$pack" --verify "$dir/x"
    has "$work/out" "5 samples in 5 classes"
}

# A worker killed while writing leaves no partial .jpg under its name: a
# file size limit far below an image's size (40 KB at least) kills the
# first worker with SIGXFSZ in the middle of its first file. (ulimit -f
# counts 512- or 1024-byte blocks, depending on the shell.)
case_synth_killed_writes_no_partial_jpeg() {
    dir=$work/synth-killed
    mkdir "$dir"
    # shellcheck disable=SC2016 # $0 and $1 are for the inner shell
    run 1 sh -c 'ulimit -f 16 && exec "$0" "$1" --images 2 --classes 1 \
        --jobs 1 --quiet' "$synth" "$dir/x"
    has "$work/err" "was killed by signal"
    partial=$(find "$dir/x" -name '*.jpg')
    [ -z "$partial" ] || fail "a partial file has an image's name: $partial"
}

# SIGTERM to the parent alone stops its workers too: no file is written
# after it has gone (they went on to the end).
case_synth_workers_stop_with_parent() {
    dir=$work/synth-term
    mkdir "$dir"
    "$synth" "$dir/x" --images 1000 --classes 2 --jobs 2 --quiet &
    background=$!
    until [ "$(find "$dir/x" -name '*.jpg' 2>/dev/null | wc -l)" -ge 4 ]; do
        kill -0 $background 2>/dev/null || fail "ringfeed-synth ended early"
        sleep 0.05
    done
    kill -s TERM $background
    { wait $background; } 2>/dev/null # "Terminated" is expected
    background=
    sleep 0.2 # a worker that outlived it would write a file or two here
    before=$(find "$dir/x" -type f | wc -l)
    sleep 0.5
    after=$(find "$dir/x" -type f | wc -l)
    [ "$before" -eq "$after" ] ||
        fail "$((after - before)) files were written after the parent died"
    [ "$after" -lt 1000 ] || fail "the run was not stopped"
}

# A run that fails says what it left: how many of the images, and that
# the folder must be removed before a run again (a non-empty folder is
# refused). SIGXFSZ is named and its limit too.
case_synth_stopped_says_what_is_left() {
    x=$work/synth-stopped
    # shellcheck disable=SC2016 # "$@" is for the inner shell
    run 1 sh -c 'ulimit -f 16 && exec "$@"' sh "$synth" "$x" --images 4 \
        --classes 2 --jobs 2 --quiet
    has "$work/err" "(File size limit exceeded): an image would pass the"
    has "$work/err" "file size limit; raise it (ulimit -f)"
    has "$work/err" "stopped: $x holds 0 of the 4 images, not a whole"
    has "$work/err" "dataset; remove it"
    run 1 "$synth" "$x" --images 4 --classes 2 --quiet
    has "$work/err" "exists and is not empty"
}

# A DIR whose parent folder is missing is said so, with what to do (it
# said "cannot create /x/y/z: No such file or directory").
case_synth_missing_parent() {
    run 1 "$synth" "$work/nope/deeper/ds" --images 4 --classes 2 --quiet
    has "$work/err" "ringfeed-synth: cannot create $work/nope/deeper/ds: the folder it goes in, $work/nope/deeper, does not exist; create it first (mkdir -p $work/nope/deeper)"
    [ ! -e "$work/nope" ] || fail "it created $work/nope"
}
# A dataset that does not fit (a 1 MB tmpfs, about 12 images), with one
# worker or two: exit 1, the image and the cause named, what is left
# said, no process of it outliving it (run_alone), and no partial image
# (every one left verifies); with one worker no temporary file either
# (with two, the other worker, stopped by SIGTERM, may leave the PATH.tmp
# it was writing: a loader does not list it). A read-only file system is
# named as the cause. Skipped where a tmpfs cannot be mounted (not root).
case_synth_disk_full() {
    disk=$work/synth-full
    mount_small_fs "$disk" 1024
    for jobs in 1 2; do
        run_alone 1 "$synth" "$disk/x$jobs" --images 40 --classes 2 \
            --jobs $jobs --quiet
        has "$work/err" ": cannot write it: No space left on device; free \
some space, or write to a folder on another disk"
        has "$work/err" "stopped: $disk/x$jobs holds "
        has "$work/err" " of the 40 images, not a whole dataset; remove it"
        [ $jobs -eq 2 ] ||
            [ -z "$(find "$disk/x$jobs" -type f ! -name 'img_*.jpg')" ] ||
            fail "left: $(find "$disk/x$jobs" -type f ! -name 'img_*.jpg')"
        run 0 "$pack" --verify "$disk/x$jobs"
        has "$work/out" "0 bad"
        rm -rf "${disk:?}/x$jobs"
    done
    read_only_small_fs
    run 1 "$synth" "$disk/x" --images 4 --classes 2 --quiet
    has "$work/err" "cannot create $disk/x: Read-only file system"
}

# A count of one is said in the singular, by ringfeed-synth's summary and
# ringfeed-pack --verify's last line (they said "1 images in 1 classes
# ... with 1 jobs" and "1 samples in 1 classes").
case_synth_one_said_singular() {
    dir=$work/synth-one
    mkdir "$dir"
    run 0 "$synth" "$dir/x" --images 1 --classes 1 --jobs 1
    has "$work/out" "wrote 1 image in 1 class into"
    has "$work/out" "with 1 job)"
    run 0 "$pack" --verify "$dir/x" --jobs 1
    has "$work/out" "1 sample in 1 class checked"
}

# Processes sharing one stderr (ringfeed-synth's workers, a job's tools
# in parallel) each put a message out whole: 32 at once, each refusing a
# path, leave 32 whole lines. (A message went out a character at a time,
# and the workers' disk-full messages came out interleaved.)
case_synth_messages_not_interleaved() {
    message="ringfeed-synth: cannot create $work/none/x/ds: the folder it goes \
in, $work/none/x, does not exist; create it first (mkdir -p $work/none/x), \
or choose another path"
    : >"$work/err"
    n=0
    while [ $n -lt 32 ]; do
        "$synth" "$work/none/x/ds" --images 2 --classes 1 --quiet \
            2>>"$work/err" &
        n=$((n + 1))
    done
    wait
    whole=$(grep -cxF "$message" "$work/err")
    [ "$whole" -eq 32 ] ||
        fail "$whole of 32 messages whole; the rest: $(grep -vxF "$message" \
            "$work/err" | head -3)"
}

# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
