#!/usr/bin/python3
"""tools/bench/producer-maps.py - how much of the ring the producers have
mapped after a run: the figure of docs/architecture.md ("Who maps what").

    tools/bench/producer-maps.py [BATCHES] [RUNS]   (defaults 416 and 3)

A producer maps a slot's pages the first time it is ordered to fill that
slot. This makes a Loader of 4 producers and 16 slots (batches of 16 at
64 x 64, JPEGs from ringfeed-synth, epochs=None so that one loop runs
on), takes BATCHES batches (416: 400 after the first 16), and then sums
what the producers have resident of the ring's shared mapping (Rss of
each producer's largest memfd mapping, from /proc/PID/smaps) in units of
one whole ring (the consumer's mapping of it). Prints that per run.
Needs ringfeed importable (PYTHONPATH, RINGFEED_LIBRARY,
RINGFEED_PRODUCER for a build tree) and ringfeed-synth:
RINGFEED_TOOLS=<build>/tools (default _build/tools).
"""

import os
import subprocess
import sys
import tempfile

import ringfeed
from procfs import children

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))


def ring_mapping(pid):
    """(size, rss) in kB of the largest memfd mapping of pid: the ring."""
    best, current = (0, 0), None
    with open(f"/proc/{pid}/smaps") as f:
        for line in f:
            fields = line.split()
            if "-" in fields[0] and len(fields) >= 5:
                current = "memfd:" in line
                size = None
            elif current and fields[0] == "Size:":
                size = int(fields[1])
            elif current and fields[0] == "Rss:" and size is not None:
                best = max(best, (size, int(fields[1])))
    return best


def main():
    batches = int(sys.argv[1]) if len(sys.argv) > 1 else 416
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    tools = os.environ.get("RINGFEED_TOOLS", f"{TOP}/_build/tools")
    with tempfile.TemporaryDirectory(prefix="producer-maps-") as work:
        subprocess.run([f"{tools}/ringfeed-synth", f"{work}/ds", "--images",
                        "400", "--classes", "4", "--jobs", "2", "--quiet"],
                       check=True, stdout=subprocess.DEVNULL)
        for run in range(runs):
            with ringfeed.Loader(f"{work}/ds", 16, size=64, num_workers=4,
                                 slots=16, seed=run) as loader:
                for n, _ in enumerate(loader.batches(), start=1):
                    if n == batches:
                        break
                ring = ring_mapping(os.getpid())[0]
                maps = [ring_mapping(p) for p in children()]
                resident = sum(rss for _, rss in maps)
                print(f"run {run + 1}: {len(maps)} producers have "
                      f"{resident / ring:.2f} rings resident in all "
                      f"(ring {ring / 1024:.1f} MB; each "
                      + ", ".join(f"{rss / ring:.2f}" for _, rss in maps)
                      + f") after {batches} batches")


if __name__ == "__main__":
    main()
