#!/usr/bin/python3
"""tools/bench/dct-vs-pil.py - how far DCT scaling moves the pixels from
PIL's: the figures of docs/python.md ("a little different from PIL") and
docs/architecture.md (the decode's DCT scaling).

    tools/bench/dct-vs-pil.py FOLDER [--size S] [--transform T] [--epochs E]
    tools/bench/dct-vs-pil.py --noise N [--size S] ...

Reads every JPEG of FOLDER (an ImageNet-like folder: tools/bench/
photo-set.sh makes one of photographs) twice through ringfeed.Loader,
with the default dct_scaling=True and with dct_scaling=False, the same
seed, order and crops. With dct_scaling=False the pixels are PIL's (the
resize of the crop box of the full-size decode, byte for byte:
tests/test-jpeg-pil.c and tests/python/test_pixels.py check that), so the
difference of the two is the difference from PIL. A sample decoded at
8/8 either way is the same bytes; every sample that differs was decoded
at 1/8, 2/8 or 4/8. Prints, over those samples, the mean absolute
difference per sample (in levels of 0-255, over all its pixels and
channels): lowest, median, 90th percentile, highest, and the largest
single difference.

--noise N writes N noise-like JPEGs first (uniform noise, blurred by
0 to 2 pixels, 300 to 1,024 pixels a side, quality 75 to 95, seeded) and
measures those: the busy textures where the reduced IDCT differs most.

Run with ringfeed importable (PYTHONPATH, RINGFEED_LIBRARY and
RINGFEED_PRODUCER for a build tree) and numpy; --noise needs Pillow.
"""

import argparse
import os
import random
import statistics
import sys
import tempfile

import numpy as np

import ringfeed


def noise_folder(root, count, seed=7):
    from PIL import Image, ImageFilter
    rng = random.Random(seed)
    gen = np.random.default_rng(seed)
    folder = os.path.join(root, "noise")
    os.makedirs(folder)
    for i in range(count):
        w, h = rng.randint(300, 1024), rng.randint(300, 1024)
        pixels = gen.integers(0, 256, (h, w, 3), dtype=np.uint8)
        image = Image.fromarray(pixels)
        radius = rng.uniform(0, 2)
        if radius > 0.2:
            image = image.filter(ImageFilter.GaussianBlur(radius))
        image.save(os.path.join(folder, f"{i:05d}.jpg"),
                   quality=rng.randint(75, 95))
    return root


def batches(folder, args, dct):
    loader = ringfeed.Loader(folder, 16, transform=args.transform,
                             size=args.size, shuffle=False, seed=args.seed,
                             epochs=args.epochs, num_workers=args.workers,
                             layout="nhwc", dct_scaling=dct)
    with loader:
        for images, labels in loader:
            yield np.asarray(images).astype(np.int16)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--noise", type=int, default=0)
    ap.add_argument("--size", type=int, default=224)
    ap.add_argument("--transform", default="train")
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args()
    if bool(args.folder) == bool(args.noise):
        ap.error("give a FOLDER or --noise N")
    with tempfile.TemporaryDirectory(prefix="dct-vs-pil-") as tmp:
        folder = noise_folder(tmp, args.noise) if args.noise else args.folder
        means, worst, total = [], 0, 0
        for scaled, exact in zip(batches(folder, args, True),
                                 batches(folder, args, False)):
            diff = np.abs(scaled - exact)
            for d in diff:
                total += 1
                if d.any():
                    means.append(float(d.mean()))
                    worst = max(worst, int(d.max()))
    what = f"{args.noise} noise JPEGs" if args.noise else folder
    print(f"{what}: transform={args.transform} size={args.size} "
          f"seed={args.seed} epochs={args.epochs}")
    print(f"  {len(means)} of {total} samples DCT-scaled (differ from "
          f"dct_scaling=False, PIL's pixels)")
    if means:
        means.sort()
        p90 = means[min(len(means) - 1, int(0.9 * len(means)))]
        print(f"  mean difference per sample: lowest {means[0]:.2f}, "
              f"median {statistics.median(means):.2f}, 90th percentile "
              f"{p90:.2f}, highest {means[-1]:.2f} levels; largest single "
              f"difference {worst}")


if __name__ == "__main__":
    sys.exit(main())
