#!/bin/sh
# shellcheck disable=SC2154 # $work and the tools' paths: tools-lib.sh sets them
# test-tools-bench.sh - ringfeed-bench run as a user runs it: its option
# checks (options that would change nothing, --gpu's, --size HxW, the
# loader's policies, --rank and --world-size, --source), its messages in
# its own flags and never C's names, --json alone on stdout, --verify of
# one rank's share and of a source that does not open, and the producers'
# busy share.
#
#     tests/test-tools-bench.sh [--list | WORD...]   every case when none is named
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

cases="bench/options_without_effect bench/advice_in_its_flags
bench/raw_pack_as_stored bench/gpu_options_need_gpu bench/json_alone
bench/messages_in_its_flags bench/detail_without_errno_name
bench/policy_options bench/stall_in_its_flags bench/verify_one_rank
bench/non_square_size bench/skipped_in_its_flags bench/rank_flags
bench/source_path_refused bench/source_kind_beside_folder bench/no_c_names
bench/helper_advice_once bench/busy_share_within_100 bench/not_a_dataset
bench/verify_unopened"

# shellcheck source=tests/tools-lib.sh
. "$(dirname "$0")/tools-lib.sh"

# ---- ringfeed-bench -----------------------------------------------------

# ringfeed-bench refuses options that would change nothing for its
# source (it used to run, measuring something other than what was asked):
# a dataset's own sample count, JPEG options for pixels made up in memory,
# the skip policy's limits without the skip policy.
case_bench_options_without_effect() {
    for option in "--samples 50" "--classes 10"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source "$work/ds" $option --quiet
        has "$work/err" "${option% *} would change nothing: the dataset"
    done
    for option in "--transform eval" "--on-error skip" "--full-scale" \
        "--max-errors 3"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source synthetic $option --quiet
        has "$work/err" "${option%% *} applies to a PATH or synthetic-jpeg"
    done
    for option in "--max-pixels 5" "--max-scans 2" \
        "--max-decode-memory 2000000" "--jpeg-warnings strict"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source synthetic $option --quiet
        has "$work/err" "${option%% *} applies to a PATH or synthetic-jpeg"
    done
    run 2 "$bench" --source "$work/ds" --max-error-ppm 5000 --quiet
    has "$work/err" "--max-error-ppm limits --on-error skip"
    run 0 "$bench" --source "$work/ds" --transform eval --full-scale \
        --on-error skip --max-error-ppm 5000 --batch 8 --quiet
    run 0 "$bench" --source synthetic-jpeg --samples 16 --classes 4 \
        --transform eval --batch 8 --quiet
}

# The library's advice comes in the tool's own flags, not C constants.
case_bench_advice_in_its_flags() {
    make_mixed_folder "$work/advice"
    run 1 "$bench" --source "$work/advice" --batch 4 --quiet
    has "$work/err" "use --on-error skip to leave failing samples out"
    run 1 "$bench" --source "$work/advice" --batch 4 --on-error skip \
        --max-error-ppm 1 --quiet
    has "$work/err" "more than --max-error-ppm 1 allows"
    ! grep -q RF_PARAM_ "$work/err" || fail "a C constant in: $(cat "$work/err")"
}

# --gpu's own options are refused without it (they were taken, and
# changed nothing), each named.
case_bench_gpu_options_need_gpu() {
    for option in "--device 0" "--depth 3" "--step-us 5"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source empty --samples 16 --batch 8 $option --quiet
        has "$work/err" "${option% *} applies to --gpu only"
    done
}

# With --json, stdout is the JSON object alone, and it holds --verify's
# counts (the verifier's line of text used to come before it).
case_bench_json_alone() {
    run 0 "$bench" --source "$work/ds" --verify --json --batch 8 --quiet
    if command -v python3 >/dev/null; then
        python3 -c 'import json, sys
report = json.load(sys.stdin)
assert report["verified"] == 24 and report["missing"] == 0, report' \
            <"$work/out" || fail "stdout is not the JSON report"
    else
        [ "$(head -c 1 "$work/out")" = "{" ] || fail "stdout is not JSON"
        has "$work/out" '"verified": 24'
    fi
    lacks "$work/out" "verified:"
    run 0 "$bench" --source "$work/ds" --verify --batch 8 --quiet
    has "$work/out" "verified: 24 samples, 0 missing"
}

# The loader's messages come in the bench's flags, as its errors do (the
# library's own handler named RF_PARAM_PRODUCERS); the decode limits are
# flags of the bench too, and named in the advice.
case_bench_messages_in_its_flags() {
    if taskset -c 0 true 2>/dev/null; then
        run 0 taskset -c 0 "$bench" --source empty --samples 16 --batch 8 \
            --producers 2 --quiet
    else # more producers than this process's CPUs
        run 0 "$bench" --source empty --samples 16 --batch 8 \
            --producers $(($(nproc) + 1)) --quiet
    fi
    has "$work/err" "producers asked for (--producers), more than"
    lacks "$work/err" "ringfeed: "
    no_c_terms "$work/err"
    run 1 "$bench" --source "$work/ds" --batch 8 --max-pixels 5 --quiet
    has "$work/err" "is above the limit of 5; raise --max-pixels"
    no_c_terms "$work/err"
}

# An error with an errno's code gives the library's detail alone: it said
# "No such file or directory: cannot open dataset ..." of a folder that
# exists, for a class folder without images.
case_bench_detail_without_errno_name() {
    dir=$work/empty-class-bench
    mkdir -p "$dir/a" "$dir/b"
    cp "$(first_image class_000)" "$dir/a/"
    run 1 "$bench" --source "$dir" --quiet
    has "$work/err" "ringfeed-bench: cannot open dataset '$dir': "
    has "$work/err" "1 class folder without image files"
    lacks "$work/err" "No such file or directory"
}

# A pack of raw samples is delivered as stored: ringfeed-bench takes
# transform none for it (the library would otherwise say, at open, that
# its default train does nothing to them) and refuses --transform; a
# shape that is not the pack's is refused with every flag to change, each
# once (--size stands for height and width).
case_bench_raw_pack_as_stored() {
    dir=$work/bench-raw
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 32x32 --quiet
    run 0 "$bench" --source "$dir/raw.pack" --size 32 --batch 8 --quiet
    lacks "$work/err" "raw pixels"
    run 2 "$bench" --source "$dir/raw.pack" --size 32 --batch 8 \
        --transform eval --quiet
    has "$work/err" "--transform would change nothing: every sample of"
    run 1 "$bench" --source "$dir/raw.pack" --size 32 --batch 8 \
        --layout nchw --quiet
    has "$work/err" "use --size 32, --channels 3 and --layout nhwc to match"
    no_c_terms "$work/err"
}

# The loader's policies have flags of the bench's (its messages named
# RF_PARAM_BATCH_TIMEOUT_MS and others the bench could not set), each
# refused where it would change nothing, and --verify's reference decode
# follows them.
case_bench_policy_options() {
    run 2 "$bench" --source "$work/ds" --resize 300 --quiet
    has "$work/err" "--resize applies to --transform eval"
    for option in "--min-scale-ppm 500000" "--no-flip"; do
        # shellcheck disable=SC2086 # $option is an option and its value
        run 2 "$bench" --source "$work/ds" --transform eval $option --quiet
        has "$work/err" "${option%% *} applies to --transform train"
    done
    run 2 "$bench" --source synthetic --no-flip --quiet
    has "$work/err" "--no-flip applies to a PATH or synthetic-jpeg"
    run 2 "$bench" --source "$work/ds" --on-producer-death fail \
        --max-respawns 3 --quiet
    has "$work/err" "--max-respawns limits --on-producer-death respawn"
    run 2 "$bench" --source "$work/ds" --on-producer-death never --quiet
    has "$work/err" "--on-producer-death wants respawn or fail, not 'never'"
    run 0 "$bench" --source "$work/ds" --transform eval --resize 300 \
        --verify --batch 8 --quiet
    has "$work/out" "verified: 24 samples, 0 missing"
    run 0 "$bench" --source "$work/ds" --no-flip --min-scale-ppm 500000 \
        --on-producer-death fail --batch-timeout-ms 60000 --verify --batch 8 \
        --quiet
    has "$work/out" "verified: 24 samples, 0 missing"
    dir=$work/bench-raw-policy
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 32x32 --quiet
    run 2 "$bench" --source "$dir/raw.pack" --size 32 --no-flip --quiet
    has "$work/err" "--no-flip would change nothing: every sample of"
}

# A wait past --stall-warning-ms is reported, its advice in the bench's
# flags (the remedy read "set RF_PARAM_BATCH_TIMEOUT_MS to have ...").
case_bench_stall_in_its_flags() {
    run 0 "$bench" --source "$work/ds" --stall-warning-ms 1 --batch 16 --quiet
    has "$work/err" "the loop has waited"
    has "$work/err" "--batch-timeout-ms, when set, replaces a producer"
    has "$work/err" "(--stall-warning-ms sets when this is reported)"
    no_c_terms "$work/err"
}

# Under a launcher's RANK and WORLD_SIZE the loader hands out one rank's
# share; --verify counted the others' samples as missing and failed.
case_bench_verify_one_rank() {
    run 0 env RANK=1 WORLD_SIZE=3 "$bench" --source "$work/ds" --verify \
        --epochs 2 --batch 4 --quiet
    has "$work/out" "verified: 16 samples, 0 missing, 0 duplicated, 0 corrupt"
    run 0 env RANK=2 WORLD_SIZE=5 "$bench" --source synthetic --samples 50 \
        --verify --unordered --batch 4 --quiet
    has "$work/out" "verified: 10 samples, 0 missing, 0 duplicated, 0 corrupt"
    # 50 over 3 ranks: each is padded to 17, rank 2's last a repeat of
    # another rank's sample
    run 0 env RANK=2 WORLD_SIZE=3 "$bench" --source synthetic --samples 50 \
        --verify --batch 4 --quiet
    has "$work/out" "verified: 17 samples, 0 missing, 0 duplicated, 0 corrupt"
}

# --size HxW sets a height and width of their own (--size set both to
# one value, so a raw pack of 24x32 samples could not be read, and the
# advice said "use --size 24, --size 32"); the advice, --verify and the
# report follow the two sides.
case_bench_non_square_size() {
    dir=$work/bench-non-square
    mkdir "$dir"
    run 0 "$pack" "$work/ds" "$dir/raw.pack" --raw 24x32 --quiet
    run 1 "$bench" --source "$dir/raw.pack" --size 24 --batch 8 --quiet
    has "$work/err" "use --size 24x32, --channels 3 and --layout nhwc to match"
    no_c_terms "$work/err"
    run 0 "$bench" --source "$dir/raw.pack" --size 24x32 --verify --batch 8 \
        --quiet
    has "$work/out" "verified: 24 samples, 0 missing, 0 duplicated, 0 corrupt"
    has "$work/out" "(24x32x3 nhwc, "
    run 0 "$bench" --source "$work/ds" --size 24x32 --transform eval \
        --layout nchw --verify --batch 8 --quiet
    has "$work/out" "verified: 24 samples, 0 missing, 0 duplicated, 0 corrupt"
    run 0 "$bench" --source synthetic --samples 16 --size 8x12 --verify \
        --json --batch 8 --quiet
    has "$work/out" '"height": 8, "width": 12'
    has "$work/out" '"verified": 16'
    run 0 "$bench" --source synthetic --samples 16 --size 8 --json --batch 8 \
        --quiet
    has "$work/out" '"height": 8, "width": 8'
    for size in 24x x32 24x32x3 0x8 8x-1 abc; do
        run 2 "$bench" --source synthetic --size "$size" --quiet
        has "$work/err" "--size wants N or HxW (height x width), each in 1.."
    done
    run 0 "$bench" --help
    has "$work/out" "--size N|HxW"
}

# The summary's list of samples left out gives their reasons in the
# bench's flags, as the run's errors do (it said "jpeg_warnings lenient
# accepts it").
case_bench_skipped_in_its_flags() {
    dir=$work/bench-skipped/a
    mkdir -p "$dir"
    dd if="$(first_image class_000)" of="$dir/cut.jpg" bs=1000 count=1 \
        2>/dev/null
    cp "$(first_image class_001)" "$dir/"
    run 0 "$bench" --source "${dir%/a}" --on-error skip \
        --max-error-ppm 1000000 --size 32 --quiet
    has "$work/out" "skipped       1 sample (--on-error skip"
    has "$work/out" "1 sample in 1 batch of 64 ("
    has "$work/out" "(--jpeg-warnings lenient accepts it"
    no_c_terms "$work/out"
}

# --rank and --world-size set the shard (the message about a bad RANK
# in the environment said to set RF_PARAM_RANK and RF_PARAM_WORLD_SIZE,
# which the bench had no flags for); they override the environment, and
# --verify expects that rank's share.
case_bench_rank_flags() {
    run 1 env RANK=abc WORLD_SIZE=2 "$bench" --samples 8 --size 8 --quiet
    has "$work/err" "RANK='abc' is not a number"
    has "$work/err" "fix it, or set --rank and --world-size"
    no_c_terms "$work/err"
    run 0 "$bench" --source "$work/ds" --rank 1 --world-size 3 --verify \
        --epochs 2 --batch 4 --quiet
    has "$work/out" "verified: 16 samples, 0 missing, 0 duplicated, 0 corrupt"
    run 0 env RANK=abc WORLD_SIZE=2 "$bench" --source synthetic --samples 50 \
        --rank 2 --world-size 5 --verify --unordered --batch 4 --quiet
    has "$work/out" "verified: 10 samples, 0 missing, 0 duplicated, 0 corrupt"
    # both flags: bad usage (it exited 1, as a failed run)
    run 2 "$bench" --samples 8 --size 8 --rank 3 --world-size 3 --quiet
    has "$work/err" "--rank 3 is not below --world-size 3: ranks count from 0; use --rank 0..2"
    no_c_terms "$work/err"
    # one of them from the environment: the library's check, in its flags
    run 1 env WORLD_SIZE=3 "$bench" --samples 8 --size 8 --rank 3 --quiet
    has "$work/err" "rank 3 is not below world size 3; set --rank and"
    no_c_terms "$work/err"
    run 2 "$bench" --rank -2 --quiet
    has "$work/err" "--rank wants an integer in -1.."
    run 2 "$bench" --world-size -1 --quiet
    has "$work/err" "--world-size wants an integer in 0.."
}

# A --source path the library refuses before opening anything (empty,
# or longer than it keeps) is a usage error naming --source (it named
# rf_config_set_path, a C function).
case_bench_source_path_refused() {
    for verify in "" --verify; do
        # shellcheck disable=SC2086 # $verify is an option, or none
        run 2 "$bench" --source '' $verify --quiet
        has "$work/err" "--source wants synthetic, empty, synthetic-jpeg or the PATH"
        lacks "$work/err" "rf_config"
    done
    long=$(printf '%5000s' '' | tr ' ' a)
    run 2 "$bench" --source "$long" --quiet
    has "$work/err" "ringfeed-bench: --source: the path is 5000 bytes; the limit"
    lacks "$work/err" "rf_config"
}

# A --source that names a kind of source (synthetic, empty,
# synthetic-jpeg) while a file or folder of that name is in the current
# folder is refused (it ran on made-up data, as if on the dataset);
# ./NAME reads the folder, and the kind still runs where nothing is
# called so.
case_bench_source_kind_beside_folder() {
    dir=$work/bench-kind-beside
    mkdir -p "$dir"
    cp -r "$work/ds" "$dir/synthetic"
    : >"$dir/empty"
    for kind in synthetic empty; do
        run 2 sh -c 'cd "$1" && exec "$2" --source "$3" --samples 8 --quiet' \
            sh "$dir" "$bench" "$kind"
        has "$work/err" "--source $kind names a kind of source, not a path"
        has "$work/err" "use --source ./$kind"
    done
    has "$work/err" "a file called 'empty' is here too"
    run 0 sh -c 'cd "$1" && exec "$2" --source ./synthetic --size 32 --quiet' \
        sh "$dir" "$bench"
    has "$work/out" "24 samples"
    run 0 sh -c 'cd "$1" && exec "$2" --source synthetic-jpeg --samples 8 \
        --size 32 --quiet' sh "$dir" "$bench"
}

# A producer's busy share is of the timed run, without what it did while
# the open waited for it (a short run showed "producer busy 186.2%"):
# one share per producer, above 0 and at most 100%. 128 batches: in a run
# of a few, all made while the open waited, a producer rightly shows 0%.
case_bench_busy_share_within_100() {
    run 0 "$bench" --source synthetic --samples 8192 --batch 64 --size 128 \
        --producers 2
    grep "producer busy" "$work/out" | tr ' ' '\n' | sed -n 's/%$//p' |
        awk '$1 > 100 || $1 <= 0 { bad = 1 } { n++ } END { exit bad || n != 2 }' ||
        fail "not two shares in (0, 100%]: $(grep "producer busy" "$work/out")"
}

# The bench says nothing in C's names: its --help named RF_PARAM_FLIP
# and RF_PARAM_DCT_SCALING, and the note after the tenth sample left out
# said the others were counted (rf_stats.failed_samples) and listed
# (rf_loader_sample_errors()), where the bench shows them in its summary.
case_bench_no_c_names() {
    run 0 "$bench" --help
    no_c_terms "$work/out"
    dir=$work/bench-no-c-names/a
    mkdir -p "$dir"
    for i in 01 02 03 04 05 06 07 08 09 10 11 12; do
        dd if="$(first_image class_000)" of="$dir/cut$i.jpg" bs=1000 \
            count=1 2>/dev/null
    done
    cp "$(first_image class_001)" "$dir/"
    run 0 "$bench" --source "${dir%/a}" --on-error skip --producers 1 \
        --max-error-ppm 1000000 --size 32 --epochs 1
    has "$work/err" "left out after this one are counted and listed in the summary's \"skipped\" lines, not said"
    lacks "$work/err" "rf_"
    no_c_terms "$work/err"
    has "$work/out" "skipped       12 samples"
    # past the 4 reasons a batch keeps, how to get the reason
    has "$work/err" "failed); ringfeed-pack --verify of the --source says why"
    lacks "$work/out" "rf_"
}

# A RINGFEED_PRODUCER that cannot be run is said once, with its advice
# once (the code's text said "set RINGFEED_PRODUCER to its path" before
# the detail's own advice, though it was set), and a folder as a folder.
case_bench_helper_advice_once() {
    run 1 env RINGFEED_PRODUCER=/nonexistent "$bench" --samples 8 --quiet
    has "$work/err" "ringfeed-bench: producer helper '/nonexistent' (RINGFEED_PRODUCER) cannot be executed: No such file or directory; point RINGFEED_PRODUCER at"
    lacks "$work/err" "set RINGFEED_PRODUCER"
    run 1 env RINGFEED_PRODUCER="$work" "$bench" --samples 8 --quiet
    has "$work/err" "(RINGFEED_PRODUCER) cannot be executed: it is a folder"
}

# A --source that is not a dataset (a text file, a JPEG) is said to be
# one that does not open; it was put as "a sample could not be read or
# decoded", of a run that had read no sample.
case_bench_not_a_dataset() {
    dir=$work/bench-not-a-dataset
    mkdir "$dir"
    echo hi >"$dir/notpack"
    run 1 "$bench" --source "$dir/notpack" --quiet
    has "$work/err" "ringfeed-bench: cannot open dataset '$dir/notpack': "
    has "$work/err" "not a ringfeed packed file"
    lacks "$work/err" "a sample could not be read"
    image=$(first_image class_000)
    run 1 "$bench" --source "$image" --quiet
    has "$work/err" "ringfeed-bench: cannot open dataset '$image': "
    has "$work/err" "(a JPEG file)"
    lacks "$work/err" "a sample could not be read"
}

# A --source that does not open gets the same message and status with
# --verify as without (the verifier opens the dataset first, and said
# "--verify: /nope: No such file or directory": it is --source that is
# wrong).
case_bench_verify_unopened() {
    dir=$work/bench-verify-unopened
    mkdir "$dir"
    echo hi >"$dir/notpack"
    long=$(printf '%5000s' '' | tr ' ' a)
    for source in "$dir/nope" "$dir/notpack" "$long"; do
        "$bench" --source "$source" --quiet >/dev/null 2>"$dir/plain.err"
        status=$?
        [ $status -ne 0 ] || fail "a --source that does not open ran"
        run $status "$bench" --source "$source" --verify --quiet
        cmp -s "$dir/plain.err" "$work/err" ||
            fail "--verify says otherwise: $(cat "$dir/plain.err")"
        lacks "$work/err" "--verify"
        case $source in
        "$long") has "$work/err" "--source: the path is 5000 bytes" ;;
        *) has "$work/err" "ringfeed-bench: cannot open dataset '$source': " ;;
        esac
    done
}
# ---- the run ----------------------------------------------------------

# shellcheck source=tests/harness.sh
. "$(dirname "$0")/harness.sh"
test_main "$cases" "$@"
