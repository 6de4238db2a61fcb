#!/usr/bin/python3
"""tools/bench/ctrl-c-delay.py - how soon Ctrl-C raises KeyboardInterrupt
in a loop that waits for a batch: the figure of docs/python.md's
"Ctrl-C".

    tools/bench/ctrl-c-delay.py [RUNS]     (default 5)

What tests/python/test_shutdown.py's
test_ctrl_c_raises_keyboard_interrupt_promptly does (it only checks under
1 s), timed: a child process iterates a slow loader (Synthetic JPEGs at
224, one producer), its producer is stopped with SIGSTOP so that no
batch comes again, the loop is left 0.5 s to take what was ready and
wait, then SIGINT is sent; the child's own SIGINT handler stamps the
moment Python runs it, and the child says when KeyboardInterrupt reached
its `except` and whether the loader had closed (closing it waits for its
producer to end: a stopped one is killed after a grace period). Then the
same with the producer left running, the loop waiting for the batch it
decodes. Prints both delays per run and their medians. Needs ringfeed
importable (PYTHONPATH, RINGFEED_LIBRARY, RINGFEED_PRODUCER for a build
tree).
"""

import os
import signal
import statistics
import subprocess
import sys
import textwrap
import time

CHILD = textwrap.dedent("""
    import os, signal, sys, time
    import ringfeed
    raised = []
    def on_sigint(signum, frame):
        raised.append(time.monotonic())
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    loader = ringfeed.Loader(ringfeed.Synthetic(100000, 10), 64, size=224,
                             num_workers=1)
    pids = []
    try:
        for i, (images, labels) in enumerate(loader):
            if i == 0:
                for task in os.listdir("/proc/self/task"):
                    with open(f"/proc/self/task/{task}/children") as f:
                        pids += f.read().split()
                print("pids", " ".join(pids), flush=True)
    except KeyboardInterrupt:
        print("interrupted", raised[0], time.monotonic(), loader.closed,
              flush=True)
""")


def once(stop):
    proc = subprocess.Popen([sys.executable, "-c", CHILD],
                            stdout=subprocess.PIPE, text=True)
    try:
        pids = [int(p) for p in proc.stdout.readline().split()[1:]]
        for pid in pids if stop else ():
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.5)
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, _ = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    words = out.split()
    assert words[:1] == ["interrupted"], out
    return float(words[1]) - sent, float(words[2]) - sent, words[3]


def main():
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    for stop in (True, False):
        print("producer stopped (SIGSTOP), as in the test:" if stop else
              "producer running (the loop waits for its next batch):")
        raised, reached = [], []
        for n in range(runs):
            r, c, closed = once(stop)
            raised.append(r)
            reached.append(c)
            print(f"  run {n + 1}: handler ran {r * 1000:.1f} ms after "
                  f"SIGINT, except clause {c * 1000:.1f} ms, loader closed: "
                  f"{closed}")
        print(f"  median of {runs}: handler "
              f"{statistics.median(raised) * 1000:.1f} ms, except clause "
              f"{statistics.median(reached) * 1000:.1f} ms (highest "
              f"{max(reached) * 1000:.1f} ms)")


if __name__ == "__main__":
    main()
