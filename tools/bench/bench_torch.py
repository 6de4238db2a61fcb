"""PyTorch's DataLoader on a folder of JPEGs, as tools/bench/bench-pipeline.sh
sets it beside ringfeed: the training transform most ImageNet recipes use,
uint8 output, one epoch, and nothing else.

    /usr/bin/python3 tools/bench/bench_torch.py DIR [--batch 64] [--size 224]
                                              [--workers N] [--seed S]

DIR is a folder of class folders, as torchvision's ImageFolder reads it.
The pipeline is ImageFolder(DIR, transform=Compose([RandomResizedCrop(size),
RandomHorizontalFlip(), PILToTensor()])) under DataLoader(batch_size,
num_workers=N, shuffle=True, persistent_workers=False); N defaults to one
worker per CPU this process may run on. Each worker runs
torch.set_num_threads(1), as ringfeed's producers are single-threaded.

Interpreter start, imports and listing the folder are not timed. Timing
starts at iter(loader), which forks the workers: that part is reported
apart as startup_s, and images_per_s runs from its return to the arrival of
the last batch, as ringfeed-bench's samples_per_s runs from
rf_loader_open()'s return to the last batch. images_per_s_with_startup
includes it; first_batch_s runs from that return to the first batch.
cpu_s is user+sys of this process and its reaped workers over the same
span plus the workers' shutdown (getrusage RUSAGE_SELF and
RUSAGE_CHILDREN; the workers are joined when the epoch ends).

Prints one line of figures, then one JSON object as the last line. Exits 1
when the epoch did not yield every image, 2 on bad usage.
"""

import argparse
import json
import os
import resource
import sys
import time

import torch
import torchvision
from torch.utils.data import DataLoader
from torchvision import datasets, transforms

from bench_measure import epoch_figures  # beside this file


def parse_args(argv):
    """The command line; --workers 0 means one per usable CPU."""
    p = argparse.ArgumentParser(
        description="Times one epoch of PyTorch's DataLoader over DIR.")
    p.add_argument("dir", help="folder of class folders of JPEG files")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=0,
                   help="DataLoader workers; 0: one per CPU (default)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if args.batch < 1 or args.size < 1 or args.workers < 0:
        p.error("--batch and --size must be >= 1, --workers >= 0")
    if args.workers == 0:
        args.workers = len(os.sched_getaffinity(0))
    return args


def one_thread(_worker_id):
    """worker_init_fn: one intra-op thread per worker, as ringfeed has one
    single-threaded producer per CPU; more would only oversubscribe."""
    torch.set_num_threads(1)


def cpu_seconds():
    """user+sys of this process and of every child it has reaped."""
    total = 0.0
    for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN):
        r = resource.getrusage(who)
        total += r.ru_utime + r.ru_stime
    return total


def make_loader(args):
    """The loader under test; building it lists DIR, which is not timed."""
    pipeline = transforms.Compose([
        transforms.RandomResizedCrop(args.size),
        transforms.RandomHorizontalFlip(),
        transforms.PILToTensor(),
    ])
    dataset = datasets.ImageFolder(args.dir, transform=pipeline)
    loader = DataLoader(dataset, batch_size=args.batch,
                        num_workers=args.workers, shuffle=True,
                        persistent_workers=False, worker_init_fn=one_thread)
    return dataset, loader


def one_epoch(loader):
    """Iterates one epoch; returns a dict of images and seconds: to start
    the workers, from then to the first and to the last batch, in all, and
    of CPU."""
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    batches = iter(loader)
    t1 = time.perf_counter()
    images = 0
    t_first = t_last = t1
    for _, labels in batches:
        t_last = time.perf_counter()
        if images == 0:
            t_first = t_last
        images += len(labels)
    # The last next() joined the workers, so their CPU time is counted.
    cpu = cpu_seconds() - cpu0
    return {"images": images, "startup": t1 - t0, "first": t_first - t1,
            "run": t_last - t1, "total": t_last - t0, "cpu": cpu}


def main(argv):
    """Runs one epoch and reports it."""
    args = parse_args(argv)
    torch.manual_seed(args.seed)
    dataset, loader = make_loader(args)
    e = one_epoch(loader)
    result = epoch_figures(e)
    images, rate = result["images"], result["images_per_s"]
    result.update({
        "expected": len(dataset),
        "workers": args.workers,
        "batch": args.batch,
        "size": args.size,
        "torch": torch.__version__,
        "torchvision": torchvision.__version__,
    })
    print(f"torch {torch.__version__}: {images} images in {e['run']:.3f} s "
          f"({rate:.1f} images/s) with {args.workers} workers, start-up "
          f"{e['startup']:.3f} s, first batch after {e['first']:.3f} s, "
          f"{e['cpu']:.2f} CPU s")
    print(json.dumps(result), flush=True)
    return 0 if images == len(dataset) else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
