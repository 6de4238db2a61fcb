#!/usr/bin/python3
"""tools/bench/float-convert.py - what a float dtype= costs the training
process on the CPU: the figure of docs/python.md ("uint8 or float").

    tools/bench/float-convert.py [BATCH] [RUNS]     (defaults 64 and 11)

Times the package's own conversion (ringfeed._cuda.make_converter, what a
Loader with a float dtype= and no device= runs on each batch) of a
BATCH x 3 x 224 x 224 uint8 tensor, with one torch thread, RUNS times
after one warm-up call, and prints the median and the range in ms for
float32, float32 with mean= and std=, float16 and bfloat16 with them.
Run with ringfeed importable (PYTHONPATH=python) and torch.
"""

import statistics
import sys
import time

import torch

from ringfeed._cuda import make_converter

MEAN, STD = (0.485, 0.456, 0.406), (0.229, 0.224, 0.225)


def main():
    batch = int(sys.argv[1]) if len(sys.argv) > 1 else 64
    runs = int(sys.argv[2]) if len(sys.argv) > 2 else 11
    torch.set_num_threads(1)
    x = torch.randint(0, 256, (batch, 3, 224, 224), dtype=torch.uint8)
    print(f"{batch} x 3 x 224 x 224 uint8, 1 torch thread, median of {runs}")
    for name, dtype, mean, std in (
            ("float32", torch.float32, None, None),
            ("float32, mean/std", torch.float32, MEAN, STD),
            ("float16, mean/std", torch.float16, MEAN, STD),
            ("bfloat16, mean/std", torch.bfloat16, MEAN, STD)):
        convert = make_converter(dtype, mean, std, 1, 3)
        convert(x)
        times = []
        for _ in range(runs):
            start = time.perf_counter()
            convert(x)
            times.append((time.perf_counter() - start) * 1000)
        print(f"  {name:20s} {statistics.median(times):6.0f} ms "
              f"({min(times):.0f}-{max(times):.0f})")


if __name__ == "__main__":
    main()
