#!/usr/bin/python3
"""tools/dev/world-size-cuts.py - a checkpoint resumed on another number of
ranks with load_state_dict(state, strict=False): what repeats and what is
missed at the cut. The counts behind docs/python.md's "Another number of
GPUs".

    tools/dev/world-size-cuts.py [--images 400] [--batch 16]

On --images ringfeed-synth JPEGs, batches of --batch, for each pair of
world sizes (2 to 3, 3 to 2, 2 to 4, 4 to 2) and each of the defaults,
shard_pad=False and drop_last=True: every rank of the old world size
takes the first K batches of epoch 0 (K = 1, 5 and the epoch's last but
one; the ranks given as rank= and world_size=, in this one process),
rank 0's state_dict() there resumes every rank of the new world size
with strict=False, and each of those ranks takes the rest of the epoch.
Prints, per case, the batch the new ranks start at, how many samples
were taken both before and after the cut (repeats; the doc bounds them
by batch_size x the new world size) and how many samples of the epoch
the new world size yields when never cut were taken neither before nor
after (missed). Exits 1 when a repeat count is not below that bound or
a sample is missed. Needs ringfeed importable (PYTHONPATH,
RINGFEED_LIBRARY, RINGFEED_PRODUCER for a build tree) and ringfeed-synth:
RINGFEED_TOOLS=<build>/tools (default _build/tools). About a minute on
the 2-CPU dev VM.
"""

import argparse
import collections
import os
import subprocess
import sys
import tempfile
import warnings

import numpy as np

import ringfeed

TOP = os.path.dirname(os.path.dirname(os.path.dirname(
    os.path.abspath(__file__))))
PAIRS = ((2, 3), (3, 2), (2, 4), (4, 2))
OPTIONS = (("defaults", {}), ("shard_pad=False", {"shard_pad": False}),
           ("drop_last=True", {"drop_last": True}))


def make(root, batch, rank, world, options):
    return ringfeed.Loader(root, batch, size=8, transform="eval", seed=3,
                           num_workers=1, rank=rank, world_size=world,
                           **options)


def epoch_indices(loader, count=None):
    """The indices of each batch of one pass (the first `count` batches)."""
    out = []
    for batch in loader.batches():
        out.append([int(i) for i in np.asarray(batch.indices)])
        if count is not None and len(out) == count:
            return out, loader.state_dict()
    return out, None


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--images", type=int, default=400)
    ap.add_argument("--batch", type=int, default=16)
    args = ap.parse_args()
    tools = os.environ.get("RINGFEED_TOOLS", f"{TOP}/_build/tools")
    bad = 0
    with tempfile.TemporaryDirectory(prefix="world-size-cuts-") as work:
        root = f"{work}/ds"
        subprocess.run([f"{tools}/ringfeed-synth", root, "--images",
                        str(args.images), "--classes", "4", "--jobs", "2",
                        "--quiet"], check=True, stdout=subprocess.DEVNULL)
        whole = {}  # (world, option name, rank) -> epoch 0's batches

        def uncut(world, name, options, rank):
            key = (world, name, rank)
            if key not in whole:
                with make(root, args.batch, rank, world, options) as loader:
                    whole[key] = epoch_indices(loader)[0]
            return whole[key]

        print(f"{args.images} images, batches of {args.batch}, epoch 0 cut "
              f"after K batches of the old world size")
        for old, new in PAIRS:
            for name, options in OPTIONS:
                per_epoch = len(uncut(old, name, options, 0))
                for k in sorted({1, 5, per_epoch - 1}):
                    with make(root, args.batch, 0, old, options) as loader:
                        state = epoch_indices(loader, k)[1]
                    before = collections.Counter(
                        i for r in range(old)
                        for b in uncut(old, name, options, r)[:k] for i in b)
                    after = collections.Counter()
                    start = None
                    for r in range(new):
                        with make(root, args.batch, r, new,
                                  options) as loader:
                            with warnings.catch_warnings(record=True) as w:
                                warnings.simplefilter("always")
                                loader.load_state_dict(state, strict=False)
                            rest = epoch_indices(loader)[0]
                            full = uncut(new, name, options, r)
                            start = len(full) - len(rest)
                            assert rest == full[start:], "not the new rank's"
                            after.update(i for b in rest for i in b)
                    expected = {i for r in range(new)
                                for b in uncut(new, name, options, r)
                                for i in b}
                    repeats = sum((before & after).values())
                    missed = len(expected - set(before) - set(after))
                    ok = repeats < args.batch * new and missed == 0
                    bad += not ok
                    print(f"  {old} -> {new} ranks, {name:15s} K={k:2d}: "
                          f"starts at batch {start}, {repeats:2d} repeated "
                          f"(bound {args.batch * new}), {missed} missed"
                          f"{'' if ok else '  <-- FAILED'}"
                          + (f"\n      {w[0].message}" if w and
                             (old, new, name, k) == (2, 3, "defaults", 5)
                             else ""))
    print("every case within the bounds" if not bad else f"{bad} case(s) "
          "outside the bounds")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
