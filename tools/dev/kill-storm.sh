#!/bin/sh
# tools/dev/kill-storm.sh - SIGKILLs producers of `ringfeed-bench --verify`
# runs, at least KILLS times in all, across every start mode (spawn,
# fork), delivery (ordered, unordered) and source (synthetic; a folder of
# ringfeed-synth JPEGs; a pack of those JPEGs; a --raw pack of zstd frames
# with a dictionary): 16 configurations.
#
# While a run goes on, a killer loop in this script SIGKILLs one of the
# run's producers, picked at random among the children of that run's
# ringfeed-bench process, every MS milliseconds. The loader replaces it
# (RF_PARAM_ON_PRODUCER_DEATH's default, respawn) and --verify checks that
# every sample still came exactly once, with the right label and pixels.
# Each configuration runs first with the bench's stderr closed (2>&-),
# kills included (the loader then has a message per replacement and no
# stderr), then with stdin closed too (<&- 2>&-: with a dataset, --verify
# opens it before the loader starts, and it takes the free fd 2; with fd 0
# closed as well, the dataset takes fd 0 and the library's next file fd
# 2), then with both open, at least once and until the configuration's
# share of the kills (KILLS / 16, rounded up) is reached. Runs take a few
# seconds each: 3 producers, batches of 8 or 16 samples of 16 to 32
# pixels square.
#
# Prints one line per configuration and the totals:
#   runs, kills  ringfeed-bench runs; SIGKILLs delivered
#   replaced     the loader's "replaced by pid" lines over the kills, in
#                the runs with stderr open (a kill as the run ends is
#                not replaced)
#   lost, dup, corrupt
#                samples missing, seen twice, with a wrong label or pixels
#                (--verify's counts)
#   hangs        runs not finished within the time-out (then SIGKILLed,
#                producers first)
#   leaked       producers of a run still running 5 s after it ended
#   failed       any other failure: a non-zero exit without a verdict (an
#                error, a crash), or with stderr closed, fd 2 of the bench
#                or of a producer found to be one of the library's shared
#                segments (the library would write its messages into it)
#   stderr closed  how the runs with 2>&- and <&- 2>&- went
#
# Then, as notes that count as no failure, the other files found on fd 2
# in those runs (with --verify, the bench's own dataset), and for each
# failure the configuration, the bench's command line and its output.
#
# Usage: tools/dev/kill-storm.sh [--kills N] [--interval MS] [--timeout S]
#                            [--quick] [--only GLOB] [--seed N] [--data DIR]
#                            [BUILD_DIR]
#
#   --kills N      kills to reach in all (default 1000)
#   --interval MS  milliseconds between kills (default 40)
#   --timeout S    a run still going after S seconds is a hang (default 20)
#   --quick        a short check: --kills 64 and half-length runs
#   --only GLOB    only the configurations whose name ("fork unordered
#                  raw-pack", "spawn ordered synthetic", ...) matches the
#                  shell pattern GLOB, e.g. '*raw-pack' or 'fork *'
#   --seed N       seed of the producer picks and the runs' --seed values
#                  (default: from /dev/urandom; printed at the start)
#   --data DIR     keep the data in DIR (written there if DIR does not
#                  exist, else used as it is), so that a failed run's
#                  command, printed at the end, can be run again
#   BUILD_DIR      a configured and built tree (default _build in the
#                  source tree); its tools are used as they are
#
# Without --data the data (200 JPEGs, 35 MB with the packs) goes to a
# temporary folder, removed at the end; so is every process it started.
# Kills only processes whose parent is the ringfeed-bench it started.
# Exits 1 if anything was lost, duplicated, corrupt, hung, leaked or
# failed, 2 on bad usage or a missing build. 1 to 4 minutes on 2 CPUs,
# depending on what else runs there.
set -u

usage() {
    sed -n '/^# Usage:/,/^# Kills only/s/^# \{0,1\}//p' "$0" | sed '$d'
}

die_usage() {
    printf 'kill-storm: %s (see --help)\n' "$*" >&2
    exit 2
}

# number OPTION VALUE: VALUE if it is a whole number >= 1.
number() {
    case $2 in
    '' | *[!0-9]* | 0 | 0[0-9]*) die_usage "$1 wants a number >= 1, not '$2'" ;;
    esac
}

kills_target=1000
interval_ms=40
timeout_s=20
quick=0
only='*'
seed=
build_arg=
data_arg=
kills_given=0
while [ $# -gt 0 ]; do
    case $1 in
    --kills | --interval | --timeout | --seed | --only | --data)
        [ $# -ge 2 ] || die_usage "$1 wants a value"
        case $1 in
        --kills) number "$1" "$2"; kills_target=$2; kills_given=1 ;;
        --interval) number "$1" "$2"; interval_ms=$2 ;;
        --timeout) number "$1" "$2"; timeout_s=$2 ;;
        --seed) number "$1" "$2"; seed=$2 ;;
        --only) only=$2 ;;
        --data) data_arg=$2 ;;
        esac
        shift 2
        ;;
    --quick)
        quick=1
        shift
        ;;
    --help | -h)
        usage
        exit 0
        ;;
    -*) die_usage "unknown option '$1'" ;;
    *)
        [ -z "$build_arg" ] || die_usage "one BUILD_DIR only"
        build_arg=$1
        shift
        ;;
    esac
done
[ "$quick" -eq 0 ] || [ "$kills_given" -eq 1 ] || kills_target=64

# The top of the source tree: the first folder above this script that
# holds configure.ac (so that the script may move within tools/).
top=$(cd "$(dirname "$0")" && pwd)
while [ ! -f "$top/configure.ac" ] && [ "$top" != / ]; do
    top=$(dirname "$top")
done
me="kill-storm"
# shellcheck source=tools/dev/lib.sh
. "$top/tools/dev/lib.sh"
find_build "$build_arg"

# The program itself rather than libtool's wrapper, whose sed and ls are
# children of the bench's pid that must not be killed (see bench_program).
bench_program
if [ -n "$bench_libs" ]; then
    LD_LIBRARY_PATH=$bench_libs
    export LD_LIBRARY_PATH
fi
RINGFEED_PRODUCER=$build/tools/ringfeed-producer
export RINGFEED_PRODUCER
synth=$build/tools/ringfeed-synth
pack=$build/tools/ringfeed-pack
require_built "$bench" "$RINGFEED_PRODUCER" "$synth" "$pack"

# How the children of a process are listed: /proc/PID/task/TID/children
# where the kernel has it (no process started per look), else pgrep -P.
if [ -r "/proc/$$/task/$$/children" ]; then
    children_from=proc
elif command -v pgrep >/dev/null 2>&1; then
    children_from=pgrep
else
    echo "kill-storm: neither /proc/PID/task/TID/children nor pgrep" >&2
    exit 2
fi

if [ -z "$seed" ]; then
    seed=$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')
fi
rng=$seed

scratch_folder # its traps are replaced by cleanup's below
bench_pid=

# ---- processes -----------------------------------------------------------

# list_kids, is_kid, note_kids, alive_seen, check_leaks, kill_random,
# kill_run
# shellcheck source=tools/dev/kill-storm-procs.sh
. "$top/tools/dev/kill-storm-procs.sh"

cleanup() {
    kill_run
    # Producers of the last run that outlived it (pid and start time
    # checked, so that nothing else is hit).
    alive_seen
    for e in $alive; do
        kill -KILL "${e%:*}" 2>/dev/null
    done
    rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 130' INT TERM HUP

# Sets `now` to the time since boot in hundredths of a second (no process
# started).
clock() {
    read -r now _ </proc/uptime
    now=${now%.*}${now#*.}
    now=${now#"${now%%[!0]*}"}
    now=${now:-0}
}

# Sets `bench_state` to the bench's state letter, or "gone".
state_of_bench() {
    st=
    { read -r st <"/proc/$bench_pid/stat"; } 2>/dev/null
    if [ -z "$st" ]; then
        bench_state=gone
        return
    fi
    # shellcheck disable=SC2086
    set -- ${st##*) }
    bench_state=$1
}

# check_fd2 KIDS...: in a run with stderr closed, what the bench's and
# its producers' fd 2 became. The library must not have put one of its
# shared segments there, or its messages go into it: fd2_shared gets the
# first such fd seen ("ringfeed-bench's fd 2 is /memfd:..."), fd2_text the
# most library messages ("ringfeed: ...") found written in one; other
# files go to fd2_other, as a note. Only what a process still has on fd 2
# at the next look (one interval later) counts: the library may open a
# file on the free fd 2 and move it up at once (and ld.so opens a spawned
# producer's libraries there as it starts). One ls a call, and a grep
# only once such an fd was seen.
check_fd2() {
    links=
    for p in "$bench_pid" "$@"; do
        links="$links /proc/$p/fd/2"
    done
    # Unquoted on purpose: one argument per link (no spaces in them).
    # shellcheck disable=SC2086
    ls -l $links >"$tmp/fd2" 2>/dev/null
    fd2_seen=
    while read -r line; do
        # A process that ended while ls read it leaves no target.
        case $line in *' -> '*) ;; *) continue ;; esac
        target=${line##* -> }
        link=${line% -> *}
        link=/proc/${link##* /proc/}
        [ "$target" != /dev/null ] || continue
        fd2_seen="${fd2_seen}[$link=$target]"
        case $fd2_last in
        *"[$link=$target]"*) ;;
        *) continue ;;
        esac
        who="a producer's"
        [ "$link" != "/proc/$bench_pid/fd/2" ] || who="ringfeed-bench's"
        case $target in
        /memfd:ringfeed* | /dev/shm/*) ;;
        *)
            # Something else (with --verify, the bench's own dataset):
            # not a failure, but worth a note.
            case $fd2_other in
            *"$who fd 2 was $target"*) ;;
            *)
                fd2_others=$((fd2_others + 1))
                [ "$fd2_others" -gt 3 ] ||
                    fd2_other="${fd2_other:+$fd2_other; }$who fd 2 was $target"
                ;;
            esac
            continue
            ;;
        esac
        [ -n "$fd2_shared" ] || fd2_shared="$who fd 2 is $target"
        n=$(grep -a -o 'ringfeed: ' "$link" 2>/dev/null | wc -l)
        [ "$n" -le "$fd2_text" ] || fd2_text=$n
    done <"$tmp/fd2"
    fd2_last=$fd2_seen
}

# The interval as seconds for sleep(1).
interval_s=$((interval_ms / 1000)).$(printf '%03d' $((interval_ms % 1000)))

# run_one CLOSED ARG...: one ringfeed-bench run with the killer beside it.
# CLOSED 0: stdin from /dev/null, stderr to a file; 1: stderr closed; 2:
# stdin and stderr closed. Sets run_kills, run_rc, run_hung, run_leaked,
# fd2_shared and fd2_text.
run_one() {
    closed=$1
    shift
    : >"$tmp/run.out"
    : >"$tmp/run.err"
    if [ "$closed" -eq 1 ]; then
        "$bench" "$@" >"$tmp/run.out" 2>&- &
    elif [ "$closed" -eq 2 ]; then
        "$bench" "$@" <&- >"$tmp/run.out" 2>&- &
    else
        "$bench" "$@" >"$tmp/run.out" 2>"$tmp/run.err" &
    fi
    bench_pid=$!
    run_kills=0
    run_hung=0
    exe_ok=0
    fd2_shared=
    fd2_last=
    fd2_other=
    fd2_others=0
    fd2_text=0
    clock
    deadline=$((now + timeout_s * 100))
    while :; do
        sleep "$interval_s"
        state_of_bench
        case $bench_state in Z | X | gone) break ;; esac
        clock
        if [ "$now" -ge "$deadline" ]; then
            run_hung=1
            kill_run
            break
        fi
        # Until the shell forked for `&` has become ringfeed-bench, its
        # children (none, or a libtool wrapper's sed) are no producers.
        if [ "$exe_ok" -eq 0 ]; then
            case $(readlink "/proc/$bench_pid/exe" 2>/dev/null) in
            */ringfeed-bench | */lt-ringfeed-bench) exe_ok=1 ;;
            *) continue ;;
            esac
        fi
        list_kids
        # Unquoted on purpose: one argument per pid.
        # shellcheck disable=SC2086
        note_kids $kids
        # shellcheck disable=SC2086
        [ "$closed" -eq 0 ] || check_fd2 $kids
        # shellcheck disable=SC2086
        kill_random $kids
    done
    run_rc=
    if [ -n "$bench_pid" ]; then
        wait "$bench_pid"
        run_rc=$?
        bench_pid=
    fi
    check_leaks
}

# ---- the configurations ---------------------------------------------------

cpus=$(nproc 2>/dev/null || echo '?')
configs=0
for start in spawn fork; do
    for order in ordered unordered; do
        for src in synthetic jpeg-dir jpeg-pack raw-pack; do
            # Unquoted on purpose: GLOB is a pattern.
            # shellcheck disable=SC2254
            case "$start $order $src" in $only) configs=$((configs + 1)) ;; esac
        done
    done
done
[ "$configs" -gt 0 ] || die_usage "--only '$only' matches no configuration"
quota=$(((kills_target + configs - 1) / configs))

# ---- the data ------------------------------------------------------------

images=200
classes=4
raw_size=24
# write_data DIR: the JPEGs and the two packs, into DIR (see write_once:
# a set --data reuses is never a partial one).
write_data() {
    mkdir -p "$1" &&
        "$synth" "$1/jpeg" --images "$images" --classes "$classes" \
            --quiet >/dev/null &&
        "$pack" "$1/jpeg" "$1/jpeg.pack" --quiet >/dev/null &&
        "$pack" "$1/jpeg" "$1/raw.pack" --raw "${raw_size}x$raw_size" \
            --dict-size 4096 --quiet >/dev/null
}
data=${data_arg:-$tmp/data}
case $data in
/*) ;;
*) data=$(pwd)/$data ;;
esac
case $data in
*[[:space:]]*) die_usage "the data folder's path may hold no space: $data" ;;
esac
say "== data: $data"
write_once "$data" write_data || {
    say "kill-storm: could not write the data (ringfeed-synth, ringfeed-pack)"
    exit 1
}

# source_args SOURCE SCALE: sets `args` to the bench's options for one run
# of SOURCE, about SCALE/10 of the usual length.
source_args() {
    next_random
    case $1 in
    synthetic)
        args="--source synthetic --samples $((300000 * $2 / 10)) --batch 16 \
--size 32 --classes 100"
        ;;
    jpeg-dir)
        args="--source $data/jpeg --epochs $((1 + 3 * $2 / 10)) --batch 8 \
--size 16"
        ;;
    jpeg-pack)
        args="--source $data/jpeg.pack --epochs $((1 + 3 * $2 / 10)) \
--batch 8 --size 24"
        ;;
    raw-pack)
        args="--source $data/raw.pack --epochs $((1 + 200 * $2 / 10)) \
--batch 8 --size $raw_size"
        ;;
    esac
    args="$args --producers 3 --seed $random --verify --json"
}

# run_field NAME: the number NAME in the bench's JSON line, or nothing
# (sed, no interpreter started: the machine is busy enough).
run_field() {
    tail -n 1 "$tmp/run.out" | sed -n "s/.*\"$1\": \([0-9][0-9.e+-]*\).*/\1/p"
}

# ---- the storm -----------------------------------------------------------

max_runs=$((quota + 10))
scale=10
[ "$quick" -eq 0 ] || scale=5

src_dir=$(sed -n 's/^abs_top_srcdir = //p' "$build/Makefile" 2>/dev/null)
src_dir=$(cd "${src_dir:-$top}" 2>/dev/null && pwd) || src_dir=$top
say "== machine: $cpus CPUs, load average $(cut -d ' ' -f 1-3 /proc/loadavg)"
say "== library: $(git -C "$src_dir" describe --always --dirty 2>/dev/null ||
    echo unknown) as built in $build; uncommitted in $src_dir/lib:" \
    "$(git -C "$src_dir" status --porcelain -- lib 2>/dev/null | wc -l) files"
# Others may change lib/ while this runs: say when the binaries are older.
stale=$(find "$src_dir/lib" -name '*.[ch]' -newer "$RINGFEED_PRODUCER" |
    wc -l)
[ "$stale" -eq 0 ] || say "== WARNING: $stale files in lib/ are newer than" \
    "$RINGFEED_PRODUCER: run make in $build"
say "== $configs configurations, at least $quota kills each" \
    "($kills_target in all), a kill every $interval_ms ms, 3 producers," \
    "time-out ${timeout_s} s, seed $seed"

row() {
    printf '%-26s %4s %5s %9s %4s %4s %7s %5s %6s %6s  %s\n' "$@"
}
row configuration runs kills replaced lost dup corrupt hangs leaked failed \
    "stderr closed"

t_runs=0 t_kills=0 t_replaced=0 t_open_kills=0 t_lost=0 t_dup=0
t_corrupt=0 t_hangs=0 t_leaked=0 t_failed=0 closed_bad=0 closed_runs=0
failures=$tmp/failures
notes=$tmp/notes
: >"$failures"
: >"$notes"

# closed_words BEFORE AFTER: the redirections of this run, if any,
# between BEFORE and AFTER.
closed_words() {
    case $closed in
    1) printf '%s2>&-%s' "${1-}" "${2-}" ;;
    2) printf '%s<&- 2>&-%s' "${1-}" "${2-}" ;;
    esac
}

# note_failure WHAT: keeps WHAT, the command and the output for the end.
note_failure() {
    {
        say "-- $name, run $runs$(closed_words " (" ")"): $1"
        again=$(quote "$0" --only "$name" --timeout "$timeout_s" \
            --interval "$interval_ms")
        [ -z "$data_arg" ] || again="$again $(quote --data "$data")"
        [ -z "$build_arg" ] || again="$again $(quote "$build")"
        say "   again: $again"
        say "   the run itself (RINGFEED_PRODUCER=$RINGFEED_PRODUCER${LD_LIBRARY_PATH:+,
   LD_LIBRARY_PATH=$LD_LIBRARY_PATH}):"
        # Unquoted on purpose: the options are words.
        # shellcheck disable=SC2086
        say "   $(quote "$bench" $args)$(closed_words " ")"
        tail -n 2 "$tmp/run.out" | sed 's/^/   stdout| /'
        [ "$closed" -ne 0 ] ||
            grep -v 'replaced by pid' "$tmp/run.err" | tail -n 8 |
            sed 's/^/   stderr| /'
    } >>"$failures"
}

# judge_run: adds the run's outcome to the configuration's counts; sets
# `bad` to what went wrong, or nothing.
judge_run() {
    bad=
    if [ "$run_hung" -eq 1 ]; then
        hangs=$((hangs + 1))
        bad="hung ($run_kills kills; killed after ${timeout_s} s)"
    else
        m=$(run_field missing)
        d=$(run_field duplicated)
        c=$(run_field corrupt)
        if [ -n "$m" ] && [ -n "$d" ] && [ -n "$c" ]; then
            lost=$((lost + m))
            dup=$((dup + d))
            corrupt=$((corrupt + c))
            if [ $((m + d + c)) -gt 0 ]; then
                bad="lost $m, duplicated $d, corrupt $c ($run_kills kills)"
            elif [ "$run_rc" -ne 0 ]; then
                failed=$((failed + 1))
                bad="exit $run_rc with a clean verdict ($run_kills kills)"
            fi
        else
            failed=$((failed + 1))
            bad="exit $run_rc, no verdict ($run_kills kills)"
        fi
    fi
    if [ "$run_leaked" -gt 0 ]; then
        leaked=$((leaked + run_leaked))
        bad="${bad:+$bad; }$run_leaked producers still running 5 s after"
        bad="$bad the run ended"
    fi
    if [ "$closed" -ne 0 ] && [ -n "$fd2_shared" ]; then
        [ -n "$bad" ] || failed=$((failed + 1))
        bad="${bad:+$bad; }$fd2_shared, $fd2_text library messages found"
        bad="$bad written in it"
    fi
    [ -z "$bad" ] || note_failure "$bad"
    [ "$fd2_others" -le 3 ] ||
        fd2_other="$fd2_other; and others"
    [ -z "$fd2_other" ] ||
        say "-- $name, run $runs ($(closed_words)): $fd2_other" >>"$notes"
}

started=$(date +%s)
for start in spawn fork; do
    for order in ordered unordered; do
        for src in synthetic jpeg-dir jpeg-pack raw-pack; do
            name="$start $order $src"
            # shellcheck disable=SC2254
            case $name in $only) ;; *) continue ;; esac
            runs=0 kills=0 replaced=0 open_kills=0 lost=0 dup=0 corrupt=0
            hangs=0 leaked=0 failed=0
            closed_note=
            extra=
            [ "$start" = fork ] && extra="$extra --fork"
            [ "$order" = unordered ] && extra="$extra --unordered"
            closed=1
            # The runs with stderr closed, then at least one with it open.
            while [ "$closed" -ne 0 ] || [ "$runs" -lt 3 ] ||
                [ "$kills" -lt "$quota" ]; do
                if [ "$runs" -ge "$max_runs" ]; then
                    failed=$((failed + 1))
                    note_failure "$runs runs gave only $kills kills of $quota"
                    break
                fi
                source_args "$src" "$scale"
                args="$args$extra"
                runs=$((runs + 1))
                # Unquoted on purpose: the options are words (no path
                # here holds a space: mktemp's and the build's).
                # shellcheck disable=SC2086
                run_one "$closed" $args
                kills=$((kills + run_kills))
                judge_run
                if [ "$closed" -ne 0 ]; then
                    closed_runs=$((closed_runs + 1))
                    verdict=ok
                    if [ -n "$bad" ]; then
                        verdict=FAILED
                        closed_bad=$((closed_bad + 1))
                    fi
                    closed_note="${closed_note:+$closed_note, }$(
                        closed_words): $verdict"
                else
                    open_kills=$((open_kills + run_kills))
                    replaced=$((replaced + $(grep -c 'replaced by pid' \
                        "$tmp/run.err")))
                fi
                [ "$closed" -eq 0 ] || closed=$(((closed + 1) % 3))
            done
            row "$name" "$runs" "$kills" "$replaced/$open_kills" "$lost" \
                "$dup" "$corrupt" "$hangs" "$leaked" "$failed" "$closed_note"
            t_runs=$((t_runs + runs))
            t_kills=$((t_kills + kills))
            t_replaced=$((t_replaced + replaced))
            t_open_kills=$((t_open_kills + open_kills))
            t_lost=$((t_lost + lost))
            t_dup=$((t_dup + dup))
            t_corrupt=$((t_corrupt + corrupt))
            t_hangs=$((t_hangs + hangs))
            t_leaked=$((t_leaked + leaked))
            t_failed=$((t_failed + failed))
        done
    done
done
row total "$t_runs" "$t_kills" "$t_replaced/$t_open_kills" "$t_lost" "$t_dup" \
    "$t_corrupt" "$t_hangs" "$t_leaked" "$t_failed" \
    "$((closed_runs - closed_bad)) of $closed_runs ok"
say "== $(($(date +%s) - started)) s; load average at the end:" \
    "$(cut -d ' ' -f 1-3 /proc/loadavg)"
if [ -s "$notes" ]; then
    say "== notes (not counted as failures): other files of the library" \
        "(with --verify, the bench's dataset) found on fd 2 with stderr closed"
    cat "$notes"
fi
if [ -s "$failures" ]; then
    say "== what failed:"
    cat "$failures"
fi
if [ $((t_lost + t_dup + t_corrupt + t_hangs + t_leaked + t_failed)) -gt 0 ]
then
    say "kill-storm: FAILED"
    exit 1
fi
say "kill-storm: passed"
