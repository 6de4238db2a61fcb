"""One Python data loader for tools/bench/bench-python.sh: builds it over a
folder of class folders, runs it for some epochs, and prints what it took.

    python tools/bench/bench_loaders.py LOADER DIR [--batch 64] [--size 224]
                                        [--workers 2] [--epochs 1] [--seed 0]

LOADER is one of:

  ringfeed  ringfeed.Loader(DIR, batch, transform="train", size=size,
            shuffle=True, seed=seed, num_workers=workers, layout="nchw",
            epochs=epochs): (N, 3, size, size) uint8 torch tensors, views
            of the ring; one for loop runs the epochs back to back and the
            producers stop after the last, as ringfeed-bench --epochs does.
  torch-io  torch's DataLoader over torchvision's ImageFolder whose loader
            reads each file and decodes it with torchvision.io.decode_jpeg
            (RGB), then v2.RandomResizedCrop(size, antialias=True) and
            v2.RandomHorizontalFlip on the uint8 CHW tensor.
  torch-pil The same DataLoader and ImageFolder with its own PIL loader,
            then the same two v2 transforms (PIL does the resize) and
            v2.PILToTensor.
  dali      NVIDIA DALI, CPU only (device_id=None, num_threads=workers):
            fn.readers.file(random_shuffle) + fn.decoders.image_random_crop
            (device="cpu", RGB) + fn.resize to size x size (antialias, the
            default linear filter) + fn.flip(horizontal=coin_flip), under
            the PyTorch plugin's DALIGenericIterator, which copies each
            batch into (N, size, size, 3) uint8 torch tensors (DALI's own
            layout; no transpose was asked of it).

Both torch loaders use batch_size=batch, shuffle=True, num_workers=workers,
persistent_workers=True (workers are started once, not per epoch) and
torch.set_num_threads(1) in each worker, one single-threaded worker per
CPU as ringfeed has one single-threaded producer per CPU.

Per batch every loop does the same and no more: it receives (images,
labels) and adds len(labels) to its count. No pixel is read, as
ringfeed-bench reads none (it takes a batch and gives it back).

The clock and the CPU:
  startup_s    from before the loader is built (listing DIR included: each
               loader lists the folder there) to the return of the first
               iter(): ringfeed's producers, torch's workers, DALI's
               threads are started in it.
  seconds      from there to the arrival of the last batch of the last
               epoch; images_per_s is images over it, as ringfeed-bench's
               samples_per_s runs from rf_loader_open()'s return.
  cpu_s        user+sys of this process (all its threads) and of the
               children it reaped (producers, workers), from before the
               loader is built to after it is closed and its processes
               joined: start-up, every epoch and shut-down; not the
               interpreter's start or the imports. cpu_own_s is this
               process's share (the loop, and DALI's threads),
               cpu_children_s the producers' or workers'.
Interpreter start and imports are not timed (import_s says how long they
took).

Prints one line of figures, then one JSON object as the last line. Exits 1
when the epochs did not yield every image, or the loader failed; 2 on bad
usage; 3 when the loader's packages cannot be imported (the JSON line then
carries "error": why).
"""

import argparse
import gc
import json
import os
import resource
import sys
import time

from bench_measure import epoch_figures  # beside this file

LOADERS = ("ringfeed", "torch-io", "torch-pil", "dali")


def parse_args(argv):
    """The command line."""
    p = argparse.ArgumentParser(
        description="Times one Python data loader over DIR.")
    p.add_argument("loader", choices=LOADERS)
    p.add_argument("dir", help="folder of class folders of JPEG files")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--workers", type=int, default=2,
                   help="producers, workers or threads (default 2)")
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    if min(args.batch, args.size, args.workers, args.epochs) < 1:
        p.error("--batch, --size, --workers and --epochs must be >= 1")
    return args


def cpu_seconds():
    """user+sys of this process (all its threads), and of every child it
    has reaped."""
    mine = resource.getrusage(resource.RUSAGE_SELF)
    theirs = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (mine.ru_utime + mine.ru_stime,
            theirs.ru_utime + theirs.ru_stime)


def count_images(root):
    """Files under the class folders of root, as ImageFolder counts them
    (every loader here lists the folder itself; this is the expected
    count, taken before the clock starts)."""
    n = 0
    for entry in os.scandir(root):
        if entry.is_dir():
            n += sum(1 for f in os.scandir(entry.path) if f.is_file())
    return n


# ---- the loaders ----------------------------------------------------------
#
# Each make_* imports what it needs (an import error is reported, not
# timed) and returns a function that builds the loader; that function
# returns (epoch, close): epoch(e) is an iterable of (images, labels) for
# epoch e, close() shuts the loader down and joins its processes.


def make_ringfeed(args):
    import ringfeed  # noqa: F401 (an import error is reported)

    def build():
        # epochs=: the producers stop after the last epoch, as
        # ringfeed-bench --epochs E does. Without it they would go on
        # into the next epoch until the ring is full (up to its slots of
        # decoding that no loop takes) while the loop ends and closes.
        loader = ringfeed.Loader(args.dir, args.batch, transform="train",
                                 size=args.size, shuffle=True,
                                 seed=args.seed, num_workers=args.workers,
                                 layout="nchw", epochs=args.epochs)

        def epoch(e):
            # One for loop runs all the epochs (epochs= above).
            return loader if e == 0 else ()

        return epoch, loader.close

    return build, {"ringfeed": getattr(ringfeed, "__version__", "?")}


def one_thread(_worker_id):
    """worker_init_fn: one intra-op thread per worker."""
    import torch
    torch.set_num_threads(1)


def decode_file(path):
    """ImageFolder's loader for torch-io: the file's bytes, decoded by
    torchvision.io.decode_jpeg to a uint8 RGB CHW tensor."""
    from torchvision.io import ImageReadMode, decode_jpeg, read_file
    return decode_jpeg(read_file(path), mode=ImageReadMode.RGB)


def make_torch(args, pil):
    import torch
    import torchvision
    from torch.utils.data import DataLoader
    from torchvision import datasets
    from torchvision.transforms import v2

    steps = [v2.RandomResizedCrop(args.size, antialias=True),
             v2.RandomHorizontalFlip()]
    if pil:
        steps.append(v2.PILToTensor())

    def build():
        torch.manual_seed(args.seed)
        kwargs = {} if pil else {"loader": decode_file}
        dataset = datasets.ImageFolder(args.dir, transform=v2.Compose(steps),
                                       **kwargs)
        loader = DataLoader(dataset, batch_size=args.batch, shuffle=True,
                            num_workers=args.workers, persistent_workers=True,
                            worker_init_fn=one_thread)
        state = {"it": None}

        def epoch(_e):
            state["it"] = iter(loader)
            return state["it"]

        def close():
            # Joins the persistent workers now, so that their CPU is
            # counted (RUSAGE_CHILDREN counts reaped children only).
            it = state.pop("it", None)
            if it is not None:
                it._shutdown_workers()
            gc.collect()

        return epoch, close

    return build, {"torch": torch.__version__,
                   "torchvision": torchvision.__version__}


def make_dali(args):
    import torch
    import nvidia.dali
    import nvidia.dali.fn as fn
    import nvidia.dali.types as types
    from nvidia.dali import pipeline_def
    from nvidia.dali.plugin.pytorch import (DALIGenericIterator,
                                            LastBatchPolicy)

    @pipeline_def(batch_size=args.batch, num_threads=args.workers,
                  device_id=None, seed=args.seed)
    def pipeline():
        jpegs, labels = fn.readers.file(file_root=args.dir,
                                        random_shuffle=True, name="Reader")
        images = fn.decoders.image_random_crop(jpegs, device="cpu",
                                               output_type=types.RGB)
        images = fn.resize(images, resize_x=args.size, resize_y=args.size)
        images = fn.flip(images, horizontal=fn.random.coin_flip())
        return images, labels

    def build():
        pipe = pipeline()
        pipe.build()
        it = DALIGenericIterator(pipe, ["images", "labels"],
                                 reader_name="Reader",
                                 last_batch_policy=LastBatchPolicy.PARTIAL,
                                 auto_reset=False, prepare_first_batch=False)

        def epoch(e):
            if e > 0:
                it.reset()
            return ((out[0]["images"], out[0]["labels"]) for out in it)

        def close():
            nonlocal pipe
            pipe = None
            it._pipes.clear()
            gc.collect()

        return epoch, close

    return build, {"dali": nvidia.dali.__version__, "torch": torch.__version__}


def make(args):
    """(build, versions) for args.loader."""
    if args.loader == "ringfeed":
        return make_ringfeed(args)
    if args.loader == "dali":
        return make_dali(args)
    return make_torch(args, pil=args.loader == "torch-pil")


# ---- the run ----------------------------------------------------------------


def run(build, epochs):
    """Builds the loader and runs it; a dict of images and seconds."""
    cpu0 = cpu_seconds()
    t0 = time.perf_counter()
    epoch, close = build()
    images = 0
    t1 = t_first = t_last = None
    try:
        for e in range(epochs):
            batches = iter(epoch(e))
            if t1 is None:
                t1 = t_first = t_last = time.perf_counter()
            for _, labels in batches:
                t_last = time.perf_counter()
                if images == 0:
                    t_first = t_last
                images += len(labels)
    finally:
        close()
    cpu1 = cpu_seconds()
    own, children = cpu1[0] - cpu0[0], cpu1[1] - cpu0[1]
    return {"images": images, "startup": t1 - t0, "first": t_first - t1,
            "run": t_last - t1, "total": t_last - t0, "cpu": own + children,
            "cpu_own": own, "cpu_children": children}


def main(argv):
    args = parse_args(argv)
    args.dir = os.path.abspath(args.dir)
    expected = count_images(args.dir) * args.epochs
    t = time.perf_counter()
    try:
        build, versions = make(args)
    except Exception as e:  # an import failing: say why, as data
        why = f"{type(e).__name__}: {e}"
        print(f"{args.loader}: cannot be imported here: {why}")
        print(json.dumps({"loader": args.loader, "error": why}), flush=True)
        return 3
    import_s = time.perf_counter() - t
    e = run(build, args.epochs)
    result = epoch_figures(e)
    images, rate = result["images"], result["images_per_s"]
    result.update({
        "loader": args.loader,
        "expected": expected,
        "epochs": args.epochs,
        "cpu_own_s": e["cpu_own"],
        "cpu_children_s": e["cpu_children"],
        "import_s": import_s,
        "workers": args.workers,
        "batch": args.batch,
        "size": args.size,
    })
    result.update(versions)
    named = ", ".join(f"{k} {v}" for k, v in versions.items())
    print(f"{args.loader} ({named}"
          f"): {images} images in {e['run']:.3f} s ({rate:.1f} images/s), "
          f"start-up {e['startup']:.3f} s, first batch after "
          f"{e['first']:.3f} s, {e['cpu']:.2f} CPU s")
    print(json.dumps(result), flush=True)
    return 0 if images == expected else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
