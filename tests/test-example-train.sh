#!/bin/sh
# test-example-train.sh - examples/train.py, ResNet-18 fed by the ringfeed
# package, run as a user runs it on a folder that ringfeed-synth wrote:
# its loss falls, and a run stopped mid-epoch and resumed from its
# checkpoint trains on the very batches, with the very losses, of a run
# that was never stopped.
#
#     tests/test-example-train.sh [--list | WORD...]   (every case: none)
#
# Every case skips without a python3 of 3.9 or later that imports numpy,
# torch and torchvision ($PYTHON, else python3, else /usr/bin/python3,
# where Debian's python3-torch goes), without the shared library, or with
# a library built with ThreadSanitizer (one built with AddressSanitizer
# runs with its runtime preloaded). The package is the tree's python/
# (PYTHONPATH) over the build tree's library (RINGFEED_LIBRARY); the build
# tree is the folder above $RINGFEED_TOOLS, else above $RINGFEED_PRODUCER's
# folder (make check sets both). By hand:
#     RINGFEED_TOOLS=$PWD/_build/tools tests/test-example-train.sh
# The synthetic images do not depend on their class (rf_synthetic_jpeg()),
# so what the model can learn is these 48 images by heart: the loss that
# falls is the training loss, on the same pixels every epoch
# (--transform eval). Each case takes 10-40 s on 2 CPUs. The cases are
# named TOPIC/NAME (the function case_TOPIC_NAME) and run by
# tests/harness.sh, each in a subshell, as in test-tools.sh.
set -u

cases="train/loss_falls train/resume_mid_epoch train/resume_other_settings
train/ranks_keep_their_own_checkpoints train/sigterm_saves_then_resumes
train/damaged_checkpoint_is_said train/checkpoint_disk_full_is_said"

# One rank of one.
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE OMPI_COMM_WORLD_RANK \
    OMPI_COMM_WORLD_SIZE

# ---- setup --------------------------------------------------------------

# A python3 with torch and torchvision, the library, the scratch folder
# and $work/ds: 48 synthetic JPEGs in 4 classes (read only).
test_setup() {
    python=
    for _candidate in ${PYTHON:-} python3 /usr/bin/python3; do
        command -v "$_candidate" >/dev/null 2>&1 || continue
        if "$_candidate" -c 'import sys, numpy, torch, torchvision
sys.exit(sys.version_info < (3, 9))' >/dev/null 2>&1; then
            python=$_candidate
            break
        fi
    done
    if [ -z "$python" ]; then
        test_skip_all="no python3 of 3.9 or later with numpy, torch and \
torchvision (apt-get install python3-torch python3-torchvision)"
        return 0
    fi
    : "${RINGFEED_TOOLS:=$(dirname "${RINGFEED_PRODUCER:?set RINGFEED_TOOLS}")}"
    : "${RINGFEED_PRODUCER:=$RINGFEED_TOOLS/ringfeed-producer}"
    build=$(cd "$RINGFEED_TOOLS/.." && pwd) || return 1
    top=$(cd "$(dirname "$0")/.." && pwd) || return 1
    RINGFEED_LIBRARY=$build/.libs/libringfeed.so
    if [ ! -f "$RINGFEED_LIBRARY" ]; then
        test_skip_all="no shared library at $RINGFEED_LIBRARY"
        return 0
    fi
    if ldd "$RINGFEED_LIBRARY" | grep -q libtsan; then
        test_skip_all="ThreadSanitizer cannot be loaded into python3"
        return 0
    fi
    preload_asan
    PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
    export RINGFEED_PRODUCER RINGFEED_LIBRARY PYTHONPATH
    example=$top/examples/train.py
    work=$(mktemp -d "${TMPDIR:-/tmp}/rf-train-XXXXXX") || return 1
    trap 'rm -rf "$work"' EXIT
    trap 'exit 1' HUP INT TERM
    "$RINGFEED_TOOLS/ringfeed-synth" "$work/ds" --images 48 --classes 4 \
        --jobs 2 --quiet >/dev/null ||
        { echo "ringfeed-synth could not write the test data"; return 1; }
}

# A library built with AddressSanitizer loads into python3 only after its
# runtime (preloaded), as in test-python.sh; torch itself is not checked.
preload_asan() {
    asan=$(ldd "$RINGFEED_LIBRARY" |
        sed -n 's/.*libasan[^ ]* => \([^ ]*\).*/\1/p')
    if [ -n "$asan" ]; then
        LD_PRELOAD=$asan
        ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
        export LD_PRELOAD ASAN_OPTIONS
    fi
}

# ---- checks -----------------------------------------------------------

# fail, run, has, lacks (and test_each, which empties $work/out and err).
# shellcheck source=tests/checks.sh
. "$(dirname "$0")/checks.sh"

# train ARGS...: the example on $work/ds, small and on one CPU thread (the
# same arithmetic every run), a loss line every step; exit 0 expected.
train() {
    run 0 "$python" "$example" "$work/ds" --cpu --threads 1 --size 32 \
        --lr 0.01 --log-every 1 "$@"
}

# lines PATTERN [FILE]: the lines of FILE ($work/out) that begin with PATTERN.
lines() {
    grep "^$1" "${2:-$work/out}"
}

# kept: the lines of $work/out that a resumed run must repeat: the
# batches, the loss lines (without their images/s) and the epochs' means.
kept() {
    sed -n -e '/^batch /p' -e '/^end of epoch /p' \
        -e 's/^\(epoch [0-9]* batch .*\) ([0-9]* images\/s)$/\1/p' "$work/out"
}

# summary: the final line's losses (first and last epoch), from $work/out.
summary() {
    sed -n 's/^done: .*; mean loss/mean loss/p' "$work/out"
}

# same EXPECTED ACTUAL WHAT: two files with the same lines.
same() {
    diff "$1" "$2" >"$work/diff" ||
        fail "$3 differ:$(printf '\n%s' "$(cat "$work/diff")")"
}

# ---- cases ------------------------------------------------------------

# 8 epochs of 3 batches on the same pixels each epoch: the mean loss of
# the last 6 steps is under 3/4 of the first 6's (in practice it falls
# from about 1.5, ln 4 = 1.39 being chance, to under 0.3).
case_train_loss_falls() {
    train --transform eval --epochs 8 --batch-size 16
    has "$work/out" "ResNet-18, 4 classes, on cpu"
    has "$work/out" "done: 24 steps"
    lines 'epoch [0-9]* batch' >"$work/steps"
    [ "$(wc -l <"$work/steps")" -eq 24 ] || fail "not 24 loss lines"
    awk '{ for (i = 1; i < NF; i++) if ($i == "loss") loss[NR] = $(i + 1) }
        END {
            for (i = 1; i <= 6; i++) {
                first += loss[i]
                last += loss[NR - 6 + i]
            }
            first /= 6; last /= 6
            printf "first 6 steps %.4f, last 6 steps %.4f\n", first, last
            exit !(last < 0.75 * first)
        }' "$work/steps" >"$work/means" ||
        fail "the loss did not fall: $(cat "$work/means")"
}

# An uninterrupted run of 2 epochs of 6 batches (random crops and flips,
# which depend on the epoch), against the same run stopped after 4 steps
# (mid epoch 0), resumed and stopped after 2 more (the end of epoch 0),
# again after 3 more (mid epoch 1), and resumed to the end: each resumed
# run starts where its checkpoint says, and the pieces' batches (indices,
# labels, input tensors), loss lines, end-of-epoch means and final
# summary are, line for line, the uninterrupted run's.
case_train_resume_mid_epoch() {
    set -- --transform train --epochs 2 --batch-size 8 --print-batches \
        --checkpoint "$work/ck.pt"
    train "$@"
    kept >"$work/whole"
    [ "$(grep -c '^batch ' "$work/whole")" -eq 12 ] || fail "not 12 batches"
    summary >>"$work/whole"

    train "$@" --stop-after 4
    has "$work/out" "stopped after 4 steps; saved $work/ck.pt (resumes at \
epoch 0 batch 5/6)"
    kept >"$work/parts"
    train "$@" --resume --stop-after 2
    has "$work/out" "resuming from $work/ck.pt at epoch 0 batch 5/6 (step 4)"
    has "$work/out" "(resumes at epoch 1 batch 1/6)"
    kept >>"$work/parts"
    train "$@" --resume --stop-after 3
    has "$work/out" "resuming from $work/ck.pt at epoch 1 batch 1/6 (step 6)"
    has "$work/out" "(resumes at epoch 1 batch 4/6)"
    kept >>"$work/parts"
    train "$@" --resume
    has "$work/out" "resuming from $work/ck.pt at epoch 1 batch 4/6 (step 9)"
    has "$work/out" "done: 3 steps"
    kept >>"$work/parts"
    summary >>"$work/parts"
    same "$work/whole" "$work/parts" "the whole run's and the pieces' lines"
}

# A checkpoint resumed with another batch size or input size: exit 1
# naming the flag and the checkpoint's value, before any step.
case_train_resume_other_settings() {
    train --transform eval --epochs 1 --batch-size 8 \
        --checkpoint "$work/ck.pt" --stop-after 1
    run 1 "$python" "$example" "$work/ds" --cpu --threads 1 --size 32 \
        --lr 0.01 --transform eval --epochs 1 --batch-size 16 \
        --checkpoint "$work/ck.pt" --resume
    has "$work/err" "was made with --batch-size 8, this run has 16: resume \
with the same --batch-size"
    lacks "$work/out" "step"
    run 1 "$python" "$example" "$work/ds" --cpu --threads 1 --size 48 \
        --lr 0.01 --transform eval --epochs 1 --batch-size 8 \
        --checkpoint "$work/ck.pt" --resume
    has "$work/err" "was made with --size 32, this run has 48"
}

# Under a launcher's RANK and WORLD_SIZE each rank trains a model of its
# own, so each keeps its own checkpoint, PATH.rankR (the ranks renamed
# PATH.tmp onto one PATH, and crashed when the renames raced), and
# resumes from it.
case_train_ranks_keep_their_own_checkpoints() {
    for rank in 0 1; do
        RANK=$rank WORLD_SIZE=2 train --transform eval --epochs 1 \
            --batch-size 8 --checkpoint "$work/ranks.pt" --stop-after 1
        has "$work/out" "saved $work/ranks.pt.rank$rank (resumes at"
    done
    [ ! -e "$work/ranks.pt" ] || fail "a checkpoint at the shared path"
    RANK=1 WORLD_SIZE=2 train --transform eval --epochs 1 --batch-size 8 \
        --checkpoint "$work/ranks.pt" --resume
    has "$work/out" "resuming from $work/ranks.pt.rank1 at epoch 0 batch 2/3"
}

# SIGTERM (a scheduler preempting the job) mid-run: the step in progress
# ends, the checkpoint is saved, the exit status is 143, and the resumed
# run's batches, losses and summary are the uninterrupted run's, line for
# line (it saved nothing on SIGTERM or Ctrl-C, so a preempted job lost
# every step since the last epoch's end).
case_train_sigterm_saves_then_resumes() {
    # 24 steps, the signal after the third: 21 left for it to land in
    set -- --transform train --epochs 4 --batch-size 8 --print-batches \
        --checkpoint "$work/ck.pt"
    train "$@"
    kept >"$work/whole"
    summary >>"$work/whole"
    "$python" "$example" "$work/ds" --cpu --threads 1 --size 32 --lr 0.01 \
        --log-every 1 "$@" >"$work/out" 2>"$work/err" &
    pid=$!
    waited=0
    while [ "$(grep -c '^batch ' "$work/out")" -lt 3 ]; do
        [ $waited -lt 2400 ] || fail "no third batch in 120 s"
        sleep 0.05
        waited=$((waited + 1))
    done
    kill -TERM $pid
    status=0
    wait $pid || status=$?
    [ $status -eq 143 ] || fail "exit status $status, not 143: $(cat "$work/err")"
    has "$work/out" "stopped by SIGTERM after "
    has "$work/out" "; saved $work/ck.pt (resumes at epoch "
    kept >"$work/parts"
    train "$@" --resume
    kept >>"$work/parts"
    summary >>"$work/parts"
    same "$work/whole" "$work/parts" "the whole run's and the pieces' lines"
}

# A checkpoint that is not whole (an empty file, a file cut short): exit 1
# saying it is damaged and what to do (it ended in torch's traceback).
case_train_damaged_checkpoint_is_said() {
    : >"$work/empty.pt"
    run 1 "$python" "$example" "$work/ds" --cpu --threads 1 --size 32 \
        --epochs 1 --batch-size 8 --checkpoint "$work/empty.pt" --resume
    has "$work/err" "train: the checkpoint $work/empty.pt is damaged"
    has "$work/err" "restore a copy, or leave out --resume to start afresh"
    lacks "$work/err" "Traceback"
}

# A checkpoint that cannot be saved. A disk that fills up ends the run
# with exit 1, naming the path and the cause, with PATH.tmp removed and
# the checkpoint saved before left byte for byte (torch.save() writing
# into the file aborted the process, SIGABRT out of its zip writer, and
# left a partial PATH.tmp filling the disk). A folder that cannot take
# one, read-only or missing, is said before the first step (after the
# first epoch, with a traceback). On a tmpfs of 1.5 checkpoints: skipped
# where it cannot be mounted (not root).
case_train_checkpoint_disk_full_is_said() {
    train --transform eval --epochs 2 --batch-size 8 \
        --checkpoint "$work/ck.pt" --stop-after 1
    disk=$work/disk
    mount_small_fs "$disk" $(($(wc -c <"$work/ck.pt") * 3 / 2 / 1024))
    cp "$work/ck.pt" "$disk/ck.pt"
    fill_small_fs 1024
    run 1 "$python" "$example" "$work/ds" --cpu --threads 1 --size 32 \
        --lr 0.01 --transform eval --epochs 2 --batch-size 8 \
        --checkpoint "$disk/ck.pt" --resume
    has "$work/err" "train: cannot save the checkpoint $disk/ck.pt at step \
6: No space left on device; $disk/ck.pt still holds step 1"
    lacks "$work/err" "Traceback"
    # shellcheck disable=SC2012 # the names are this case's, one a line
    [ "$(ls -A "$disk" | tr '\n' ' ')" = "ck.pt filler " ] ||
        fail "the disk holds: $(ls -A "$disk")"
    cmp -s "$work/ck.pt" "$disk/ck.pt" || fail "the checkpoint changed"
    read_only_small_fs
    why="Read-only file system"
    for path in "$disk/ck.pt" "$work/missing/ck.pt"; do
        run 1 "$python" "$example" "$work/ds" --cpu --threads 1 --size 32 \
            --epochs 1 --batch-size 8 --checkpoint "$path"
        has "$work/err" "train: cannot save checkpoints in ${path%/*}: $why; \
give --checkpoint a path in a folder that exists"
        lacks "$work/out" "epoch 0 batch"
        why="No such file or directory"
    done
}

# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
