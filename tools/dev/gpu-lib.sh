# shellcheck shell=sh
# tools/dev/gpu-lib.sh - what tools/dev/gpu-check.sh and gpu-python.sh
# share: picking their parts, and bounding their time limits by the
# deadline of tools/dev/gpu-session.sh. Sourced, never run, after the
# script sets $parts (the parts asked for, space-separated).
# shellcheck disable=SC2154 # parts: set by the script

# wants PART: whether PART is among $parts.
wants() { case " $parts " in *" $1 "*) return 0 ;; esac; return 1; }

# limit SECONDS: SECONDS, or what is left before GPU_DEADLINE (seconds
# since the epoch; tools/dev/gpu-session.sh sets it) where that is less.
# An outer timeout cannot end an inner one (each leads a process group of
# its own), so every inner limit must end by the deadline itself.
limit() {
    left=$1
    [ -n "${GPU_DEADLINE:-}" ] && left=$((GPU_DEADLINE - $(date +%s)))
    [ "$left" -gt "$1" ] && left=$1
    [ "$left" -lt 1 ] && left=1
    echo "$left"
}
