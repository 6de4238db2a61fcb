# shellcheck shell=sh disable=SC2154 # $case and $work are the sourcing script's
# checks.sh - the checks that tests/test-tools*.sh and tests/test-python.sh
# share, sourced by each after it sets $work (their scratch folder) and
# while $case names the case running (tests/harness.sh runs the cases).
# Each check that fails prints why, with the command's stdout and stderr,
# and exits the case's subshell.

# A run left in the background by a failed case is stopped with it.
background=
fail() {
    printf '  %s: %s\n' "$case" "$*"
    [ -z "$background" ] || kill -s KILL "$background" 2>/dev/null
    for _file in "$work/out" "$work/err"; do
        [ -s "$_file" ] && sed "s|^|  ${_file##*/}: |" "$_file"
    done
    exit 1
}

# Each case starts with empty $work/out and $work/err (harness.sh's hook),
# so that a failure shows only its own case's output.
test_each() {
    : >"$work/out"
    : >"$work/err"
}

# run EXPECTED_STATUS COMMAND...: stdout in $work/out, stderr in $work/err.
run() {
    _expected=$1
    shift
    "$@" >"$work/out" 2>"$work/err"
    _status=$?
    [ $_status -eq "$_expected" ] ||
        fail "exit status $_status, expected $_expected: $*"
}

# run_alone EXPECTED_STATUS COMMAND...: as run, and fails when a process
# the command started outlives it: the command runs under a helper that
# is the subreaper of its descendants (prctl PR_SET_CHILD_SUBREAPER), so
# that one still running, or dead but not reaped, when the command exits
# comes to the helper instead of init, however fast it then dies.
# Skips without python3.
run_alone() {
    command -v python3 >/dev/null 2>&1 || skip "no python3 for run_alone"
    _expected=$1
    shift
    rm -f "$work/left"
    python3 -c '
import ctypes, os, subprocess, sys
if ctypes.CDLL(None).prctl(36, 1, 0, 0, 0) != 0:  # PR_SET_CHILD_SUBREAPER
    sys.exit(125)
status = subprocess.call(sys.argv[2:])
left = 0
try:
    while os.waitpid(-1, 0):
        left += 1
except ChildProcessError:
    pass
with open(sys.argv[1], "w") as out:
    out.write("%d\n" % left)
sys.exit(status if status >= 0 else 128 - status)
' "$work/left" "$@" >"$work/out" 2>"$work/err"
    _status=$?
    [ -s "$work/left" ] || [ $_status -ne 125 ] ||
        skip "cannot be a subreaper (prctl PR_SET_CHILD_SUBREAPER)"
    [ $_status -eq "$_expected" ] ||
        fail "exit status $_status, expected $_expected: $*"
    [ -s "$work/left" ] || fail "run_alone's helper said nothing: $*"
    [ "$(cat "$work/left")" -eq 0 ] ||
        fail "$(cat "$work/left") of its processes outlived it: $*"
}

# has FILE TEXT / lacks FILE TEXT: whether FILE holds TEXT (fixed string).
has() {
    grep -qF -- "$2" "$1" || fail "${1##*/} does not say '$2'"
}
lacks() {
    ! grep -qF -- "$2" "$1" || fail "${1##*/} says '$2'"
}

# mount_small_fs DIR KB [OPTIONS]: a tmpfs of KB kibibytes on DIR (made
# here), with mount's OPTIONS too (nr_inodes=N), for a file system that
# fills up or turns read-only. The running case skips
# where it cannot mount one (not root, no CAP_SYS_ADMIN); the mount goes
# when the case's subshell exits, whichever way it ends. One per case.
mount_small_fs() {
    [ "$(id -u)" -eq 0 ] || skip "mounting a small file system needs root"
    command -v mount >/dev/null 2>&1 || skip "no mount command"
    mkdir -p "$1" || fail "cannot make $1"
    mount -t tmpfs -o "size=${2}k,mode=0755${3:+,$3}" tmpfs "$1" \
        2>/dev/null ||
        skip "cannot mount a tmpfs on $1"
    _small_fs=$1
    trap 'unmount_small_fs' EXIT
    trap 'exit 1' HUP INT TERM
}

# unmount_small_fs: undoes mount_small_fs (lazily where a process that
# the case left still holds a file there).
unmount_small_fs() {
    [ -n "${_small_fs:-}" ] || return 0
    umount "$_small_fs" 2>/dev/null || umount -l "$_small_fs" 2>/dev/null
    _small_fs=
}

# fill_small_fs KB: a file, filler, that leaves about KB kibibytes free on
# the mount_small_fs file system.
fill_small_fs() {
    _free=$(df -Pk "$_small_fs" | awk 'NR == 2 { print $4 }')
    [ "$_free" -gt "$1" ] || return 0
    # without the caller's LD_PRELOAD: test-example-train.sh preloads
    # libasan for an ASan build's python, and dd under it aborts (its
    # aligned_alloc of 1024 bytes at 4096 is refused) leaving no filler
    env -u LD_PRELOAD dd if=/dev/zero of="$_small_fs/filler" bs=1024 \
        count=$((_free - $1)) 2>/dev/null
    [ -s "$_small_fs/filler" ] || fail "cannot fill $_small_fs"
}

# read_only_small_fs: the mount_small_fs file system made read-only.
read_only_small_fs() {
    mount -o remount,ro "$_small_fs" || fail "cannot remount $_small_fs ro"
}
