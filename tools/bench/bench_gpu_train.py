"""ResNet-50 training steps fed by one loader, on a GPU: images/s and how
long the GPU sat idle (issue 21, item 7, the GPU part).

    python3 tools/bench/bench_gpu_train.py DIR --loader ringfeed|torch
        [--batch 128] [--steps 150] [--warmup 20] [--workers 16]
        [--size 224] [--seed 0]

ringfeed:  ringfeed.Loader(DIR, transform="train", device="cuda",
           dtype=float16, mean/std of ImageNet): each batch arrives on
           the GPU converted and normalised (one DMA from the ring).
torch:     DataLoader(ImageFolder, num_workers=W, pin_memory=True,
           persistent_workers=True) with torchvision.io.decode_jpeg +
           v2.RandomResizedCrop(antialias=True) + v2.RandomHorizontalFlip
           on uint8 (PIL and a hand-written random resized crop where
           torchvision is missing), then .cuda(non_blocking=True),
           conversion and normalisation on the GPU.

The step: torchvision's ResNet-50 (or an equivalent one here where
torchvision is missing), channels_last, SGD with momentum, autocast to
float16 with a GradScaler (AMP). Before each step's forward pass and after
its optimizer step a CUDA event is recorded on the current stream; the
GPU is busy between the two and idle between one step's end and the next
step's start (waiting for the host to queue work, or for a batch). Of
STEPS steps after WARMUP, it reports images/s (wall clock), the GPU's
idle share of its span (first start to last end), and the host's time
blocked in the loader's next(). A copy engine moving a batch while the
SMs wait counts as idle: what counts is the model's work.

Prints one line of figures, then one JSON object as the last line. Needs
torch with CUDA; ringfeed from PYTHONPATH (python/ of this tree) or the
installed package.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time

import torch
from torch import nn

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)


def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("data", help="folder of class folders of JPEGs")
    p.add_argument("--loader", choices=("ringfeed", "torch"), required=True)
    p.add_argument("--batch", type=int, default=128)
    p.add_argument("--steps", type=int, default=150)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--workers", type=int, default=16)
    p.add_argument("--size", type=int, default=224)
    p.add_argument("--seed", type=int, default=0)
    return p.parse_args(argv)


# ---- the model -------------------------------------------------------------

class Bottleneck(nn.Module):
    """ResNet's 1x1, 3x3, 1x1 block with a projection where the shape
    changes (stride on the 3x3, as torchvision's ResNet-50 v1.5)."""

    def __init__(self, cin, width, stride):
        super().__init__()
        cout = width * 4
        self.body = nn.Sequential(
            nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width),
            nn.ReLU(inplace=True),
            nn.Conv2d(width, width, 3, stride, 1, bias=False),
            nn.BatchNorm2d(width), nn.ReLU(inplace=True),
            nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
        self.skip = (nn.Identity() if stride == 1 and cin == cout else
                     nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                   nn.BatchNorm2d(cout)))

    def forward(self, x):
        return torch.relu(self.body(x) + self.skip(x))


def resnet50_here(classes):
    """ResNet-50 (3, 4, 6, 3 bottlenecks), for a machine without
    torchvision."""
    layers = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64),
              nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for width, blocks, stride in ((64, 3, 1), (128, 4, 2), (256, 6, 2),
                                  (512, 3, 2)):
        for b in range(blocks):
            layers.append(Bottleneck(cin, width, stride if b == 0 else 1))
            cin = width * 4
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
    return nn.Sequential(*layers)


def make_model(classes):
    try:
        import torchvision
        return torchvision.models.resnet50(num_classes=classes), "torchvision"
    except ImportError:
        return resnet50_here(classes), "bench_gpu_train.py's own"


# ---- the loaders -----------------------------------------------------------

def ringfeed_batches(args):
    """(images, labels) on the GPU: float16, normalised, NCHW."""
    import ringfeed
    loader = ringfeed.Loader(args.data, args.batch, transform="train",
                             size=args.size, seed=args.seed, drop_last=True,
                             num_workers=args.workers, device="cuda",
                             dtype=torch.float16, mean=MEAN, std=STD)

    def batches():
        while True:
            for images, labels in loader:
                yield images, labels.cuda(non_blocking=True)

    return batches(), loader, f"ringfeed {ringfeed.__version__}"


def pil_random_resized_crop(image, size, rng):
    """RandomResizedCrop's box (area 8-100%, aspect 3/4-4/3, ten tries,
    then the centre) resized with PIL's bilinear filter, and a flip."""
    from PIL import Image
    w, h = image.size
    for _ in range(10):
        area = w * h * rng.uniform(0.08, 1.0)
        aspect = math.exp(rng.uniform(math.log(3 / 4), math.log(4 / 3)))
        cw = round(math.sqrt(area * aspect))
        ch = round(math.sqrt(area / aspect))
        if 0 < cw <= w and 0 < ch <= h:
            x, y = rng.randint(0, w - cw), rng.randint(0, h - ch)
            break
    else:
        cw = ch = min(w, h)
        x, y = (w - cw) // 2, (h - ch) // 2
    out = image.resize((size, size), Image.BILINEAR, box=(x, y, x + cw,
                                                          y + ch))
    if rng.random() < 0.5:
        out = out.transpose(Image.FLIP_LEFT_RIGHT)
    return out


class PilToTensor:
    """Picklable transform for the torchvision-less path: uint8 CHW."""

    def __init__(self, size):
        self.size = size
        self.rng, self.pid = None, None

    def __call__(self, image):
        import numpy as np
        if self.pid != os.getpid():  # a worker of its own: its own crops
            self.rng, self.pid = random.Random(), os.getpid()
        out = pil_random_resized_crop(image.convert("RGB"), self.size,
                                      self.rng)
        return torch.from_numpy(np.asarray(out).copy()).permute(2, 0, 1)


def torch_dataset(args):
    """ImageFolder with decode_jpeg and transforms.v2 on uint8, or PIL."""
    try:
        import torchvision
        from torchvision import datasets
        from torchvision.io import ImageReadMode, decode_jpeg, read_file
        from torchvision.transforms import v2
    except ImportError:
        return _PilFolder(args.data, PilToTensor(args.size)), "PIL"

    def load(path):
        return decode_jpeg(read_file(path), mode=ImageReadMode.RGB)

    transform = v2.Compose([v2.RandomResizedCrop(args.size, antialias=True),
                            v2.RandomHorizontalFlip()])
    return (datasets.ImageFolder(args.data, transform=transform, loader=load),
            f"torchvision {torchvision.__version__} decode_jpeg + v2")


class _PilFolder(torch.utils.data.Dataset):
    def __init__(self, root, transform):
        from PIL import Image
        self.open = Image.open
        classes = sorted(d for d in os.listdir(root)
                         if os.path.isdir(os.path.join(root, d)))
        self.samples = [(os.path.join(root, c, f), i)
                        for i, c in enumerate(classes)
                        for f in sorted(os.listdir(os.path.join(root, c)))]
        self.transform = transform

    def __len__(self):
        return len(self.samples)

    def __getitem__(self, i):
        path, label = self.samples[i]
        with self.open(path) as image:
            return self.transform(image), label


def torch_batches(args):
    """(images, labels) on the GPU: uint8 batches from pinned memory,
    converted and normalised on the current stream."""
    dataset, kind = torch_dataset(args)
    loader = torch.utils.data.DataLoader(
        dataset, batch_size=args.batch, shuffle=True, drop_last=True,
        num_workers=args.workers, pin_memory=True, persistent_workers=True,
        prefetch_factor=4)
    mean = torch.tensor(MEAN, device="cuda").view(1, 3, 1, 1) * 255
    std = torch.tensor(STD, device="cuda").view(1, 3, 1, 1) * 255

    def batches():
        while True:
            for images, labels in loader:
                images = images.cuda(non_blocking=True).float()
                images = ((images - mean) / std).half()
                yield images, labels.cuda(non_blocking=True)

    return batches(), None, f"torch {torch.__version__} DataLoader, {kind}"


# ---- the steps -------------------------------------------------------------

def grad_scaler():
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda")
    return torch.cuda.amp.GradScaler()


def run(args):
    torch.manual_seed(args.seed)
    classes = len([d for d in os.listdir(args.data)
                   if os.path.isdir(os.path.join(args.data, d))])
    model, model_kind = make_model(classes)
    model = model.cuda().to(memory_format=torch.channels_last)
    optimiser = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    scaler = grad_scaler()
    criterion = nn.CrossEntropyLoss()
    make = ringfeed_batches if args.loader == "ringfeed" else torch_batches
    t0 = time.perf_counter()
    batches, closer, loader_kind = make(args)
    marks, waits = [], 0.0
    t_first = None
    for step in range(args.warmup + args.steps):
        t = time.perf_counter()
        images, labels = next(batches)
        if step >= args.warmup:
            waits += time.perf_counter() - t
        if step == args.warmup:
            torch.cuda.synchronize()
            t_first = time.perf_counter()
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        images = images.contiguous(memory_format=torch.channels_last)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(images), labels)
        optimiser.zero_grad(set_to_none=True)
        scaler.scale(loss).backward()
        scaler.step(optimiser)
        scaler.update()
        end.record()
        if step >= args.warmup:
            marks.append((start, end))
    torch.cuda.synchronize()
    wall = time.perf_counter() - t_first
    if closer is not None:
        closer.close()
    busy = sum(s.elapsed_time(e) for s, e in marks) / 1000
    span = marks[0][0].elapsed_time(marks[-1][1]) / 1000
    images = args.steps * args.batch
    return {
        "loader": args.loader, "loader_kind": loader_kind,
        "model": model_kind, "gpu": torch.cuda.get_device_name(),
        "images": images, "batch": args.batch, "workers": args.workers,
        "size": args.size, "steps": args.steps, "warmup": args.warmup,
        "seconds": wall, "images_per_s": images / wall,
        "gpu_busy_s": busy, "gpu_span_s": span,
        "gpu_idle_pct": 100 * max(0.0, 1 - busy / span) if span > 0 else 0,
        "host_wait_s": waits, "startup_s": t_first - t0,
        "last_loss": float(loss),
    }


def main(argv):
    args = parse_args(argv)
    if not torch.cuda.is_available():
        print("bench_gpu_train: torch sees no CUDA GPU", file=sys.stderr)
        return 2
    r = run(args)
    print(f"{r['loader']} ({r['loader_kind']}, {r['model']} ResNet-50, "
          f"{r['gpu']}): {r['images_per_s']:.0f} images/s, GPU idle "
          f"{r['gpu_idle_pct']:.1f}% of {r['gpu_span_s']:.2f} s, host "
          f"waited {r['host_wait_s']:.2f} s for batches")
    print(json.dumps(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
