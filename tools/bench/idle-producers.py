#!/usr/bin/python3
"""tools/bench/idle-producers.py - what a loader's producers cost while its
ring is full and nobody takes a batch (a validation loader waiting for its
turn): the figure of docs/python.md ("A training and a validation
Loader").

    tools/bench/idle-producers.py [SECONDS] [WORKERS]   (defaults 10 and 2)

Makes a Loader over 200 ringfeed-synth JPEGs (batches of 16, size 64,
WORKERS producers), takes one batch, waits 2 s for the producers to fill
the ring, then measures each producer's CPU time (user + system, from
/proc/PID/stat) over SECONDS of doing nothing, and prints it as a share
of one CPU per producer. Needs ringfeed importable (PYTHONPATH,
RINGFEED_LIBRARY, RINGFEED_PRODUCER for a build tree) and ringfeed-synth:
RINGFEED_TOOLS=<build>/tools (default _build/tools).
"""

import os
import subprocess
import sys
import tempfile
import time

import ringfeed
from procfs import children

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def main():
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 10.0
    workers = int(sys.argv[2]) if len(sys.argv) > 2 else 2
    tools = os.environ.get("RINGFEED_TOOLS", f"{TOP}/_build/tools")
    with tempfile.TemporaryDirectory(prefix="idle-producers-") as work:
        subprocess.run([f"{tools}/ringfeed-synth", f"{work}/ds", "--images",
                        "200", "--classes", "4", "--jobs", "2", "--quiet"],
                       check=True, stdout=subprocess.DEVNULL)
        with ringfeed.Loader(f"{work}/ds", 16, size=64,
                             num_workers=workers) as loader:
            it = iter(loader)
            next(it)
            time.sleep(2)  # the ring fills
            pids = children()
            before = {p: cpu_seconds(p) for p in pids}
            time.sleep(seconds)
            after = {p: cpu_seconds(p) for p in pids}
            print(f"{len(pids)} producers, ring full, {seconds:.0f} s idle "
                  f"(clock tick {1000 / TICK:.0f} ms):")
            for p in pids:
                share = (after[p] - before[p]) / seconds
                print(f"  producer {p}: {share:.1%} of a CPU")
            del it


if __name__ == "__main__":
    main()
