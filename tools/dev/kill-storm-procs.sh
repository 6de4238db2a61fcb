#!/bin/sh
# tools/dev/kill-storm-procs.sh - kill-storm.sh's hold on the producers of
# the ringfeed-bench run it started: listing them, telling a producer from
# a process that reused its pid (pid and start time), a kill of one picked
# at random, the run's end (its producers, then the bench) and the check
# that none outlived it. Sourced by kill-storm.sh, whose variables it
# reads (bench_pid, children_from, rng) and sets (kids, seen, alive,
# run_kills, run_leaked).
# shellcheck disable=SC2154 # bench_pid, children_from, rng: kill-storm.sh's

# Sets `kids` to the pids of the running bench's children.
list_kids() {
    kids=
    if [ "$children_from" = proc ]; then
        for f in "/proc/$bench_pid/task/"*/children; do
            line=
            { read -r line <"$f" || :; } 2>/dev/null
            kids="$kids $line"
        done
    else
        kids=$(pgrep -P "$bench_pid" | tr '\n' ' ')
    fi
}

# read_stat PID: sets p_state, p_ppid and p_start (the start time, in
# clock ticks after boot) from /proc/PID/stat; returns 1 when PID is gone.
read_stat() {
    st=
    { read -r st <"/proc/$1/stat"; } 2>/dev/null || [ -n "$st" ] || return 1
    # The name in parentheses may hold spaces or ")": skip past the last.
    # Unquoted on purpose: one argument per field, all digits or a letter.
    # shellcheck disable=SC2086
    set -- ${st##*) }
    [ $# -ge 20 ] || return 1
    p_state=$1
    p_ppid=$2
    shift 19
    p_start=$1
}

# is_kid PID: whether PID is alive (not a zombie) and a child of the bench,
# read just before it is signalled, so that a pid that was reaped and
# reused since it was listed is never taken for a producer.
is_kid() {
    read_stat "$1" && [ "$p_state" != Z ] && [ "$p_ppid" = "$bench_pid" ]
}

# note_kids KIDS...: adds each to `seen` as PID:STARTTIME, the producers
# of the run (this one or an earlier one: `seen` is cleared per run by
# check_leaks) that must be gone after it.
seen=
note_kids() {
    for k in "$@"; do
        case " $seen " in *" $k:"*) continue ;; esac
        is_kid "$k" && seen="$seen $k:$p_start"
    done
}

# alive_seen: sets `alive` to those of `seen` still running (same pid and
# start time: the very process, not a reuse of its pid).
alive_seen() {
    alive=
    for e in $seen; do
        read_stat "${e%:*}" && [ "$p_start" = "${e#*:}" ] &&
            [ "$p_state" != Z ] && alive="$alive $e"
    done
}

# check_leaks: after a run, the producers it had must end within 5 s
# (they die with the bench; after a hang, when this script SIGKILLed the
# bench, a producer ends once it sees its parent gone, which on a loaded
# machine can take a second). Sets run_leaked to how many did not, and
# SIGKILLs those (their identity checked). Clears `seen`.
check_leaks() {
    run_leaked=0
    tries=0
    while alive_seen && [ -n "$alive" ] && [ "$tries" -lt 50 ]; do
        sleep 0.1
        tries=$((tries + 1))
    done
    for e in $alive; do
        run_leaked=$((run_leaked + 1))
        kill -KILL "${e%:*}" 2>/dev/null
    done
    seen=
}

# The next pseudo-random number (a 31-bit LCG, high bits first).
next_random() {
    rng=$(((rng * 1103515245 + 12345) % 2147483648))
    random=$((rng / 65536))
}

# kill_random KIDS...: SIGKILLs one of them; counts it in run_kills.
kill_random() {
    [ $# -gt 0 ] || return 0
    next_random
    shift $((random % $#))
    if is_kid "$1" && kill -KILL "$1" 2>/dev/null; then
        run_kills=$((run_kills + 1))
    fi
}

# SIGKILLs the bench's children and then the bench, and reaps it.
kill_run() {
    [ -n "$bench_pid" ] || return 0
    list_kids
    # shellcheck disable=SC2086
    note_kids $kids
    for k in $kids; do
        is_kid "$k" && kill -KILL "$k" 2>/dev/null
    done
    kill -KILL "$bench_pid" 2>/dev/null
    wait "$bench_pid" 2>/dev/null
    bench_pid=
}
