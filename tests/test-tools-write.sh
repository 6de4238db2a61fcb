#!/bin/sh
# shellcheck disable=SC2154 # $work and the tools' paths: tools-lib.sh sets them
# test-tools-write.sh - where ringfeed-pack writes its pack, and with how
# many workers: runs at once, killed or failing, leave a whole pack or
# nothing; the output is checked before the work and never standard
# output; a file size limit is named; --jobs N writes the same bytes and
# messages as one worker, and a killed worker ends the run.
#
#     tests/test-tools-write.sh [--list | WORD...]   every case when none is named
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

cases="write/concurrent_runs write/killed_leaves_nothing
write/failure_leaves_nothing write/output_checked_first jobs/same_output
jobs/bad_value jobs/killed_worker pack/not_to_stdout pack/file_size_limit
pack/disk_full pack/disk_full_many_workers pack/read_only pack/no_inodes
pack/read_only_source pack/summary_unwritable"

# shellcheck source=tests/tools-lib.sh
. "$(dirname "$0")/tools-lib.sh"

# ---- helpers ------------------------------------------------------------

# wait_for FILE TEXT: until FILE holds TEXT (a background run got that
# far), for at most 20 s.
wait_for() {
    _tries=0
    until grep -qF -- "$2" "$1" 2>/dev/null; do
        _tries=$((_tries + 1))
        [ $_tries -le 400 ] || fail "${1##*/} never said '$2'"
        sleep 0.05
    done
}

# $work/big: ten hard links to each file of $work/ds (240 samples), so
# that packing them at $slow with --jobs 2 takes seconds: long enough to
# kill a run in the middle (24 samples took about a second in one
# process, and less with a worker per CPU). Made once, by the first case
# that needs it.
make_big() {
    [ -d "$work/big" ] && return 0
    for copy in 0 1 2 3 4 5 6 7 8 9; do
        for file in "$work"/ds/class_*/*.jpg; do
            class=${file%/*}
            mkdir -p "$work/big/${class##*/}"
            ln "$file" "$work/big/${class##*/}/$copy-${file##*/}"
        done
    done
}

# Options that make a run take about a second on $work/ds (decoding, and
# compressing at zstd level 19), long enough to be caught in the middle,
# showing its progress on stderr. (Not a function: run in the background
# it would be a subshell, and $! its pid, not the run's.)
slow="--raw 256x256 --level 19 --progress"

# ---- ringfeed-pack: where the pack is written ---------------------------

# Two runs writing one output at once: each writes a file of its own and
# the last to finish wins, whole (they used to share OUT.tmp: the first to
# finish renamed the other's half-written file into place and exited 0).
case_write_concurrent_runs() {
    dir=$work/concurrent
    mkdir "$dir"
    # shellcheck disable=SC2086 # $slow is a list of options
    "$pack" "$work/ds" "$dir/same.pack" $slow >/dev/null 2>"$dir/slow.err" &
    background=$!
    wait_for "$dir/slow.err" "packing"
    run 0 "$pack" "$work/ds" "$dir/same.pack" --quiet
    wait $background || fail "the slow run failed: $(cat "$dir/slow.err")"
    run 0 "$pack" --verify "$dir/same.pack"
    has "$work/out" "24 samples in 3 classes"
    holds "$dir" same.pack slow.err
}

# A run killed at any moment leaves nothing in the output's folder.
case_write_killed_leaves_nothing() {
    dir=$work/killed
    mkdir "$dir" "$dir/out"
    make_big
    for signal in KILL TERM; do
        rm -f "$dir/err" # not the first run's "packing" (see jobs_killed_worker)
        # shellcheck disable=SC2086 # $slow is a list of options
        "$pack" "$work/big" "$dir/out/x.pack" $slow --jobs 2 2>"$dir/err" &
        background=$!
        wait_for "$dir/err" "packing"
        kill -s $signal $background
        { wait $background; } 2>/dev/null # "Killed" is expected
        background=
        holds "$dir/out"
    done
}

# A run that fails leaves nothing either: here a pack of raw samples
# given as a source without --raw.
case_write_failure_leaves_nothing() {
    dir=$work/failure
    mkdir "$dir" "$dir/out"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 16x16 --quiet
    run 1 "$pack" "$dir/raw.pack" "$dir/out/x.pack" --quiet
    has "$work/err" "holds raw samples of 16x16x3 nhwc"
    holds "$dir/out"
}

# An output that cannot be written is refused before the work: before a
# dictionary is trained (the progress line would say "training").
case_write_output_checked_first() {
    dir=$work/output
    mkdir "$dir" "$dir/folder"
    for output in "$dir/folder" "$dir/folder/" "$dir/new/"; do
        run 1 "$pack" "$work/ds" "$output" --raw 32x32 --dict-size 4096 \
            --progress
        has "$work/err" "is a folder; give the name of the file to write"
        lacks "$work/err" "training"
    done
    run 1 "$pack" "$work/ds" "$dir/missing/x.pack" --raw 32x32 \
        --dict-size 4096 --progress
    has "$work/err" "missing/x.pack: cannot create a file in its folder"
    lacks "$work/err" "training"
    if [ "$(id -u)" -ne 0 ]; then # root writes anywhere
        chmod 555 "$dir/folder"
        run 1 "$pack" "$work/ds" "$dir/folder/x.pack" --raw 32x32 \
            --dict-size 4096 --progress
        has "$work/err" "that you can write to"
        lacks "$work/err" "training"
        chmod 755 "$dir/folder"
    fi
    holds "$dir" folder
    holds "$dir/folder"
}

# OUT.pack '-' is no standard output: a pack is written into a file and
# named when whole (it made a file named '-', and the summary went to
# stdout, where a pipe expected the pack).
case_pack_not_to_stdout() {
    dir=$work/stdout
    mkdir "$dir"
    (cd "$dir" && run 2 "$pack" "$work/ds" - --quiet) || exit 1
    has "$work/err" "a pack cannot go to standard output ('-')"
    has "$work/err" "(./- for a file named -)"
    [ ! -s "$work/out" ] || fail "something went to stdout"
    holds "$dir"
}

# Standard output on a full disk (> /dev/full) loses the summary alone:
# exit 1, saying so and that the pack was written whole and where (it
# said only "cannot write to standard output", and a user packed again).
case_pack_summary_unwritable() {
    [ -w /dev/full ] || skip "no /dev/full"
    dir=$work/summary
    mkdir "$dir"
    "$pack" "$work/ds" "$dir/x.pack" --quiet >/dev/full 2>"$work/err"
    status=$?
    [ $status -eq 1 ] || fail "exit status $status, expected 1"
    has "$work/err" "cannot write to standard output: No space left on device; only the summary was lost: the pack $dir/x.pack was written whole"
    holds "$dir" x.pack
    run 0 "$pack" --verify "$dir/x.pack"
    has "$work/out" "24 samples in 3 classes"
}

# A pack past the file size limit (ulimit -f) says so, naming the limit,
# and leaves nothing: SIGXFSZ killed ringfeed-pack without a word.
case_pack_file_size_limit() {
    dir=$work/fsize
    mkdir "$dir"
    # shellcheck disable=SC2016 # $0 and $1 are for the inner shell
    run 1 sh -c 'ulimit -f 16 && exec "$0" "$1" "$2" --jobs 1 --quiet' \
        "$pack" "$work/ds" "$dir/x.pack"
    has "$work/err" "x.pack: cannot write sample 0: File too large"
    has "$work/err" "raise the limit, or write the pack on another file"
    holds "$dir"
}

# A disk that fills up, in a sample or in the index after the last one,
# with one worker or two, JPEG bytes or --raw: exit 1 naming the path and
# the cause, nothing new left on the disk (no partial pack, no temporary
# file, its space given back), and the pack that was there before left
# byte for byte, still whole (--verify). On a 2 MB tmpfs: skipped where
# it cannot be mounted (not root).
case_pack_disk_full() {
    disk=$work/full
    mount_small_fs "$disk" 2048
    make_big # 240 samples: 20 MB of JPEG, 3 MB at --raw 64x64
    # the pack there before: 6 samples, a quarter of the disk
    mkdir -p "$work/six/class_000"
    find "$work/ds/class_000" -name '*.jpg' | sort | head -n 6 |
        while read -r file; do cp "$file" "$work/six/class_000/"; done
    run 0 "$pack" "$work/six" "$disk/x.pack" --quiet
    cp "$disk/x.pack" "$work/x.pack.before"
    free=$(df -Pk "$disk" | awk 'NR == 2 { print $4 }')
    for options in "--jobs 1" "--jobs 2" "--raw 64x64 --level 1 --jobs 2"; do
        # shellcheck disable=SC2086 # a list of options
        run 1 "$pack" "$work/big" "$disk/x.pack" $options --quiet
        has "$work/err" "$disk/x.pack: cannot write sample "
        has "$work/err" ": No space left on device; free some space or \
write the pack elsewhere"
        holds "$disk" x.pack
        cmp -s "$disk/x.pack" "$work/x.pack.before" ||
            fail "$options: the pack there before changed"
        [ "$(df -Pk "$disk" | awk 'NR == 2 { print $4 }')" -eq "$free" ] ||
            fail "$options: the disk's free space was not given back"
    done
    # full in the index: room for the payloads, 8 KB short of the whole
    # pack (its index and names take about 16 KB)
    run 0 "$pack" "$work/big" "$work/raw8.pack" --raw 8x8 --quiet
    fill_small_fs $(($(wc -c <"$work/raw8.pack") / 1024 - 8))
    free=$(df -Pk "$disk" | awk 'NR == 2 { print $4 }')
    run 1 "$pack" "$work/big" "$disk/x.pack" --raw 8x8 --quiet
    has "$work/err" "$disk/x.pack: cannot write the index: No space left on \
device"
    holds "$disk" filler x.pack
    cmp -s "$disk/x.pack" "$work/x.pack.before" ||
        fail "the pack there before changed"
    [ "$(df -Pk "$disk" | awk 'NR == 2 { print $4 }')" -eq "$free" ] ||
        fail "the disk's free space was not given back"
    run 0 "$pack" --verify "$disk/x.pack"
    has "$work/out" "x.pack: 6 samples in 1 class"
}

# A failed run with workers ends them before it exits: they hold the
# pack file open (they are forked while it is), and left to die with
# their parent after it had gone, the disk's space came back only then (a
# script that freed space or retried at once found the disk still full).
# On a full 2 MB tmpfs with --jobs 8, no worker outlives the tool, and the
# space is back when it exits. Skipped where a tmpfs cannot be mounted
# (not root).
case_pack_disk_full_many_workers() {
    disk=$work/full
    mount_small_fs "$disk" 2048
    make_big
    free=$(df -Pk "$disk" | awk 'NR == 2 { print $4 }')
    run_alone 1 "$pack" "$work/big" "$disk/x.pack" --raw 64x64 --level 1 \
        --jobs 8 --quiet
    has "$work/err" ": No space left on device"
    [ "$(df -Pk "$disk" | awk 'NR == 2 { print $4 }')" -eq "$free" ] ||
        fail "the disk's space was not back when the run exited"
    holds "$disk"
}

# A read-only file system: refused before the work, naming the path and
# the cause; the pack there is left as it was and reads (--verify).
case_pack_read_only() {
    disk=$work/read-only
    mount_small_fs "$disk" 2048
    mkdir -p "$work/two/class_000"
    find "$work/ds/class_000" -name '*.jpg' | sort | head -n 2 |
        while read -r file; do cp "$file" "$work/two/class_000/"; done
    run 0 "$pack" "$work/two" "$disk/x.pack" --quiet
    cp "$disk/x.pack" "$work/x.pack.before"
    read_only_small_fs
    for options in "--jobs 1" "--jobs 2" "--raw 32x32 --dict-size 4096"; do
        # shellcheck disable=SC2086 # a list of options
        run 1 "$pack" "$work/ds" "$disk/x.pack" $options --progress
        has "$work/err" "$disk/x.pack: cannot create a file in its folder: \
Read-only file system; the file system is mounted read-only: write it on"
        lacks "$work/err" "training"
        lacks "$work/err" "packing"
    done
    holds "$disk" x.pack
    cmp -s "$disk/x.pack" "$work/x.pack.before" ||
        fail "the pack there before changed"
    run 0 "$pack" --verify "$disk/x.pack"
    has "$work/out" "x.pack: 2 samples in 1 class"
}

# A file system out of inodes, with bytes to spare: refused before the
# work, and the advice is to free some (it was to choose a folder that
# exists and can be written to, which this one is).
case_pack_no_inodes() {
    disk=$work/no-inodes
    mount_small_fs "$disk" 2048 nr_inodes=2 # its root and one file
    : >"$disk/taken"
    run 1 "$pack" "$work/ds" "$disk/x.pack" --raw 32x32 --dict-size 4096 \
        --progress
    has "$work/err" "$disk/x.pack: cannot create a file in its folder: No \
space left on device; the file system has no room or no inodes left (df, \
df -i)"
    lacks "$work/err" "training"
    holds "$disk" taken
}

# A dataset on a read-only file system, as shared datasets are mounted:
# a folder and a pack there are packed, verified and benched, and nothing
# tries to write beside them.
case_pack_read_only_source() {
    disk=$work/shared
    mount_small_fs "$disk" 6144 # the folder and its pack, 2 MB each
    cp -r "$work/ds" "$disk/ds"
    run 0 "$pack" "$work/ds" "$disk/ds.pack" --quiet
    read_only_small_fs
    run 0 "$pack" "$disk/ds" "$work/from-ro.pack" --jobs 2 --quiet
    for source in "$disk/ds" "$disk/ds.pack"; do
        run 0 "$pack" --verify "$source" --jobs 2
        has "$work/out" "24 samples in 3 classes checked"
        run 0 "$bench" --source "$source" --producers 1 --size 32 --batch 8 \
            --verify --quiet
        lacks "$work/err" "Read-only"
    done
    holds "$disk" ds ds.pack
}

# ---- ringfeed-pack: --jobs ----------------------------------------------

# same_with_jobs NAME OPTION...: packs $dir/source with OPTIONS and
# --jobs 1, then --jobs 3; the packs and the messages must be the same.
same_with_jobs() {
    _name=$1
    shift
    for _jobs in 1 3; do
        run 0 "$pack" "$dir/source" "$dir/$_name-$_jobs.pack" --jobs $_jobs \
            "$@"
        grep -v '^packed ' "$work/out" >"$dir/$_name-$_jobs.out"
        cp "$work/err" "$dir/$_name-$_jobs.err"
    done
    cmp -s "$dir/$_name-1.pack" "$dir/$_name-3.pack" ||
        fail "$_name: the pack differs between --jobs 1 and --jobs 3"
    cmp -s "$dir/$_name-1.err" "$dir/$_name-3.err" ||
        fail "$_name: stderr differs: $(diff "$dir/$_name-1.err" \
            "$dir/$_name-3.err")"
}

# The pack, the samples left out and the warnings are the same whatever
# --jobs is: JPEG bytes decoded whole first (--skip-bad), raw samples
# with a dictionary trained on them, JPEG bytes as they are; and --verify
# lists the same bad samples in the same order, with the same status.
case_jobs_same_output() {
    dir=$work/jobs
    mkdir "$dir"
    make_mixed_folder "$dir/source"
    same_with_jobs skip --skip-bad --quiet
    [ "$(count "$work/err" "skipped: sample")" -eq 2 ] ||
        fail "2 samples should be skipped"
    has "$work/err" "class_001/img_cut.jpg): premature end of data"
    # a PNG's signature and a header cut short: read as the PNG it is
    has "$work/err" "class_002/img_png.jpg): PNG: the file ends early"
    same_with_jobs raw --raw 32x32 --dict-size 4096 --skip-bad --quiet
    has "$work/out" "with a dictionary"
    same_with_jobs as-is --quiet
    # the PNG cut short is left to the decoder: its signature is a PNG's
    lacks "$work/err" "img_png.jpg"
    for jobs in 1 3; do
        run 1 "$pack" --verify "$dir/source" --jobs $jobs
        grep '^bad: ' "$work/out" >"$dir/verify-$jobs"
    done
    [ "$(wc -l <"$dir/verify-1")" -eq 2 ] || fail "2 bad samples expected"
    cmp -s "$dir/verify-1" "$dir/verify-3" ||
        fail "--verify lists differ: $(diff "$dir/verify-1" "$dir/verify-3")"
    run 0 "$pack" --verify "$dir/raw-3.pack" --jobs 3 --progress
    has "$work/out" "24 samples in 3 classes checked"
    has "$work/err" "100% 24/24"
}

# --jobs takes a number of workers from 1 up, as the other options check
# theirs (exit 2), when packing and with --verify.
case_jobs_bad_value() {
    dir=$work/jobs-value
    mkdir "$dir"
    for value in 0 x -1 '' 3x 1025; do
        run 2 "$pack" "$work/ds" "$dir/x.pack" --jobs "$value" --quiet
        has "$work/err" "--jobs wants an integer in 1..1024, not '$value'"
        run 2 "$pack" --verify "$work/ds" --jobs "$value"
        has "$work/err" "--jobs wants an integer in 1..1024"
    done
    holds "$dir"
}

# running PID: whether PID is a live process (not gone, nor a zombie
# waiting to be reaped).
running() {
    _state=$(sed 's/.*) //' "/proc/$1/stat" 2>/dev/null | cut -c1)
    [ -n "$_state" ] && [ "$_state" != Z ]
}

# ends_soon PID...: each of them stops running within 5 s.
ends_soon() {
    for _pid in "$@"; do
        _tries=0
        while running "$_pid"; do
            _tries=$((_tries + 1))
            [ $_tries -le 100 ] || fail "worker $_pid is still running"
            sleep 0.05
        done
    done
}

# A worker killed in the middle of a pack ends the run: exit 1, naming the
# worker, the signal and the sample it was on; no pack is left, and the
# other worker ends too. The same when the tool itself is killed: its
# workers do not go on. (10 links to each of the 24 images, packed slowly:
# several seconds of work, stopped early.)
case_jobs_killed_worker() {
    dir=$work/jobs-killed
    mkdir -p "$dir/out"
    make_big
    for victim in worker tool; do
        # The first run's "packing" must not be taken for the second's:
        # its 2> truncates the file only once the background job starts.
        rm -f "$dir/err"
        # shellcheck disable=SC2086 # $slow is a list of options
        "$pack" "$work/big" "$dir/out/x.pack" $slow --jobs 2 2>"$dir/err" &
        background=$!
        wait_for "$dir/err" "packing"
        workers=$(pgrep -P $background)
        [ "$(echo "$workers" | wc -w)" -eq 2 ] ||
            fail "2 workers expected, found '$workers'"
        if [ $victim = worker ]; then
            kill -s KILL "$(echo "$workers" | head -n 1)"
        else
            kill -s KILL $background
        fi
        { wait $background; } 2>/dev/null
        status=$?
        background=
        # shellcheck disable=SC2086 # a list of pids
        ends_soon $workers
        holds "$dir/out"
        [ $victim = worker ] || continue
        [ $status -eq 1 ] || fail "exit status $status after a worker died"
        has "$dir/err" "was killed by signal 9 (Killed) while on sample"
        has "$dir/err" "no pack was written"
    done
}
# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
