#!/usr/bin/env python3
"""rrc_reference.py - an independent model of torchvision's RandomResizedCrop.

Draws crops with RandomResizedCrop.get_params' algorithm (torchvision
transforms.py), written from that algorithm with Python's own `random`
module so that no torch is needed, and prints histograms that
tests/test-transform.c compares with ringfeed's C implementation:

    draws N
    fallback K          crops that came from the fallback (central) path
    fallback_box K      crops equal to the fallback box, however they came
    area c0 .. c9       w*h / (W*H) in ten bins of [0, 1]
    log_aspect c0 .. c9 w/h in ten bins between exp(-0.3 + 0.06 k), i.e.
                        log(w/h) in ten steps of [-0.3, 0.3], ends open
    centre_x c0 .. c9   (j + w/2) / W in ten bins of [0, 1]
    centre_y c0 .. c9   (i + h/2) / H in ten bins of [0, 1]

Each bin is computed with the same floating-point operations, in the same
order, as the C test, so a crop falls into the same bin in both. (The C
side links no libm, hence w/h against fixed edges rather than log.)

Usage: rrc_reference.py WIDTH HEIGHT DRAWS [SEED [MIN_SCALE]]
"""
import math
import random
import sys

BINS = 10
# exp(-0.3 + 0.06 k) for k = 1..9, to 4 digits; the same literals as C
ASPECT_EDGES = (0.7866, 0.8353, 0.8869, 0.9418, 1.0, 1.0618, 1.1275, 1.1972,
                1.2712)
RATIO = (3.0 / 4.0, 4.0 / 3.0)
ATTEMPTS = 10


def fallback_box(width, height, ratio):
    """The central crop get_params returns after ten failed attempts."""
    in_ratio = float(width) / float(height)
    if in_ratio < min(ratio):
        w = width
        h = int(round(w / min(ratio)))
    elif in_ratio > max(ratio):
        h = height
        w = int(round(h * max(ratio)))
    else:
        w = width
        h = height
    return (height - h) // 2, (width - w) // 2, h, w


def get_params(rng, width, height, scale, ratio):
    """Returns (i, j, h, w, fell_back), i and j the top and left."""
    area = height * width
    log_ratio = (math.log(ratio[0]), math.log(ratio[1]))
    for _ in range(ATTEMPTS):
        target_area = area * rng.uniform(scale[0], scale[1])
        aspect_ratio = math.exp(rng.uniform(log_ratio[0], log_ratio[1]))
        # Python's round() rounds halves to even; int() then truncates.
        w = int(round(math.sqrt(target_area * aspect_ratio)))
        h = int(round(math.sqrt(target_area / aspect_ratio)))
        if 0 < w <= width and 0 < h <= height:
            # torch.randint(0, n + 1) and random.randint(0, n) both
            # include n: the crop may touch the right and bottom edges.
            i = rng.randint(0, height - h)
            j = rng.randint(0, width - w)
            return i, j, h, w, False
    i, j, h, w = fallback_box(width, height, ratio)
    return i, j, h, w, True


def unit_bin(value):
    """The bin of a value in [0, 1]; 1 itself goes into the last bin."""
    return min(int(value * BINS), BINS - 1)


def log_aspect_bin(w, h):
    ratio = w / h
    return sum(1 for edge in ASPECT_EDGES if ratio >= edge)


def histograms(width, height, draws, seed, min_scale):
    rng = random.Random(seed)
    names = ("area", "log_aspect", "centre_x", "centre_y")
    counts = {name: [0] * BINS for name in names}
    fell_back = 0
    at_fallback_box = 0
    expected_fallback = fallback_box(width, height, RATIO)
    for _ in range(draws):
        i, j, h, w, fell = get_params(rng, width, height, (min_scale, 1.0),
                                      RATIO)
        fell_back += fell
        at_fallback_box += (i, j, h, w) == expected_fallback
        counts["area"][unit_bin(w * h / (width * height))] += 1
        counts["log_aspect"][log_aspect_bin(w, h)] += 1
        counts["centre_x"][unit_bin((j + w / 2) / width)] += 1
        counts["centre_y"][unit_bin((i + h / 2) / height)] += 1
    return counts, fell_back, at_fallback_box


def main(argv):
    if len(argv) not in (4, 5, 6):
        sys.stderr.write(__doc__)
        return 2
    width, height, draws = int(argv[1]), int(argv[2]), int(argv[3])
    seed = int(argv[4]) if len(argv) > 4 else 1
    min_scale = float(argv[5]) if len(argv) > 5 else 0.08
    if width < 1 or height < 1 or draws < 1:
        sys.stderr.write("width, height and draws must be positive\n")
        return 2
    counts, fell_back, at_fallback_box = histograms(width, height, draws,
                                                    seed, min_scale)
    print("draws", draws)
    print("fallback", fell_back)
    print("fallback_box", at_fallback_box)
    for name, bins in counts.items():
        print(name, " ".join(str(c) for c in bins))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
