#!/usr/bin/env python3
"""train.py - trains torchvision's ResNet-18 on an ImageFolder fed by the
ringfeed package: on the GPU with mixed precision (torch.autocast and a
GradScaler) when torch sees one, else on the CPU. It checkpoints the
model, the optimizer, the scaler, the loader's position in the epoch and
the loss so far, and resumes from such a checkpoint at exactly the next
batch.

    python3 examples/train.py DATA [--epochs E] [--batch-size N] [--size S]
        [--lr LR] [--workers W] [--checkpoint PATH [--resume]]
        [--save-every N] [--stop-after N] [--seed S]
        [--transform train|eval] [--classes C] [--threads T]
        [--log-every N] [--print-batches] [--cpu]

DATA is a folder of class folders (torchvision's ImageFolder: the sorted
folder names are labels 0, 1, ...) or a packed file made by ringfeed-pack;
the classes are the loader's (loader.classes) unless --classes says.
--stop-after N takes N steps, saves the checkpoint and exits, as a job
killed there would have left it; --resume then goes
on from that checkpoint, at the batch after the last one trained on, and
says which. A checkpoint is also saved at the end of each epoch, with
--save-every N every N steps, and when the job is told to stop: SIGTERM
(a scheduler's preemption, `kill`) or Ctrl-C ends the step in progress,
saves, and exits with 128 + the signal's number (a second Ctrl-C stops
at once, without saving). Checkpoints are written whole or not at all:
to PATH.tmp, flushed to the disk, then renamed over PATH. PATH's folder
is checked before the first step (a missing or read-only folder is said
then, not after an epoch of training); a checkpoint that cannot be saved
later (a full disk) ends the run with exit status 1 and says why, with
PATH.tmp removed and the checkpoint saved before it kept. In a build
tree, where the package is not installed:

    PYTHONPATH=python RINGFEED_LIBRARY=_build/.libs/libringfeed.so \\
        python3 examples/train.py /tmp/synth-4 --epochs 20 --size 64 ...

The loader hands over batches already scaled and normalised like
torchvision's ToTensor + Normalize (dtype=torch.float32, mean=, std=): on
the GPU the uint8 batch is copied there in one DMA and converted there;
on the CPU the conversion makes a float copy, so nothing here views the
shared ring past its step. The learning rate follows a cosine from --lr
(default 0.1 x batch size / 256) to 0 over all the run's steps, a function
of the step number alone, so a resumed run sets the same rates as one
that was never stopped. On the CPU, torch's threads and the producers
share the CPUs: --threads and --workers divide them.

One process trains one model: under torchrun each rank's loader reads its
own shard, but the gradients are not shared (no DistributedDataParallel
here), and each rank keeps its own checkpoint, PATH.rankR.

With --print-batches each step also prints the CRC-32 of the batch's
dataset indices, labels and input tensor (tests/test-example-train.sh
compares a resumed run's batches with an uninterrupted run's).

Exit status: 0 done (or stopped by --stop-after), 1 failure (a ringfeed
error prints its detail), 2 bad usage, 130 Ctrl-C and 143 SIGTERM (the
checkpoint saved).
"""

import argparse
import io
import math
import os
import pickle
import signal
import sys
import tempfile
import time
import zlib

import torch
import torchvision

import ringfeed

MEAN = (0.485, 0.456, 0.406)  # torchvision's ImageNet normalisation
STD = (0.229, 0.224, 0.225)
CHECKPOINT_VERSION = 1
# Settings a checkpoint must be resumed with, as (argument, flag): the
# loader checks its own too (dataset, seed, batch size, ranks), but in its
# keywords' terms; these are checked first, in this program's flags.
RESUME_SAME = (("batch_size", "--batch-size"), ("size", "--size"),
               ("transform", "--transform"), ("seed", "--seed"),
               ("classes", "--classes"), ("epochs", "--epochs"),
               ("lr", "--lr"))


# ---- arguments --------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="Train ResNet-18 on an ImageFolder fed by ringfeed, "
                    "with mid-epoch checkpoints and exact resume.")
    p.add_argument("data", help="folder of class folders, or a packed file "
                                "made by ringfeed-pack")
    p.add_argument("--epochs", type=int, metavar="N", default=90,
                   help="default 90")
    p.add_argument("--batch-size", type=int, metavar="N", default=64,
                   help="images per step; default 64")
    p.add_argument("--size", type=int, metavar="PIXELS", default=224,
                   help="input side in pixels; default 224")
    p.add_argument("--lr", type=float, metavar="LR",
                   help="peak learning rate; default 0.1 x batch size / 256")
    p.add_argument("--workers", type=int, metavar="N",
                   help="producer processes; default: the CPU budget "
                        "ringfeed finds (affinity, container quota)")
    p.add_argument("--transform", choices=("train", "eval"), default="train",
                   help="train: random resized crop and flip (default); "
                        "eval: resize and centre crop, the same pixels "
                        "every epoch")
    p.add_argument("--classes", type=int, metavar="N",
                   help="number of classes; default: the loader's "
                        "(loader.classes)")
    p.add_argument("--checkpoint", metavar="PATH",
                   help="where to save checkpoints (and --resume from)")
    p.add_argument("--resume", action="store_true",
                   help="go on from --checkpoint PATH")
    p.add_argument("--save-every", type=int, metavar="N",
                   help="also save the checkpoint every N steps")
    p.add_argument("--stop-after", type=int, metavar="N",
                   help="take N steps, save the checkpoint and exit")
    p.add_argument("--seed", type=int, metavar="S", default=0,
                   help="model initialisation, order, crops; default 0")
    p.add_argument("--threads", type=int, metavar="N",
                   help="torch's CPU threads; default: torch's own choice")
    p.add_argument("--log-every", type=int, default=10, metavar="N",
                   help="print the loss every N steps; default 10")
    p.add_argument("--print-batches", action="store_true",
                   help="print each batch's indices, labels and input CRCs")
    p.add_argument("--cpu", action="store_true",
                   help="train on the CPU even when a GPU is there")
    args = p.parse_args(argv)
    for name in ("epochs", "batch_size", "size", "workers", "classes",
                 "save_every", "stop_after", "threads", "log_every"):
        value = getattr(args, name)
        if value is not None and value < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.lr is not None and not args.lr > 0:
        p.error("--lr must be above 0")
    if args.resume and not args.checkpoint:
        p.error("--resume needs --checkpoint PATH (the file to resume from)")
    for flag, value in (("--stop-after", args.stop_after),
                        ("--save-every", args.save_every)):
        if value and not args.checkpoint:
            p.error(f"{flag} needs --checkpoint PATH (where to save)")
    if args.lr is None:
        args.lr = 0.1 * args.batch_size / 256
    return args


# ---- checkpoints ----------------------------------------------------------


def save_checkpoint(path, parts, step, args):
    """Everything a resumed run needs: each part's state_dict() (the
    model, optimizer, scaler, loader and loss log), the step, torch's RNG
    and the settings that must not change. Written to PATH.tmp and renamed
    over PATH, so that a job killed while saving keeps the previous one."""
    state = {name: part.state_dict() for name, part in parts.items()}
    state.update(version=CHECKPOINT_VERSION, step=step,
                 torch_rng=torch.get_rng_state(),
                 args={name: getattr(args, name) for name, _ in RESUME_SAME})
    # Serialised in memory, then written: torch.save() writing into the
    # file itself aborts the whole process (SIGABRT, a C++ exception out
    # of its zip writer's destructor) when a write fails, as on a full
    # disk. Raises OSError, with PATH.tmp removed and PATH untouched.
    data = io.BytesIO()
    torch.save(state, data)
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(data.getbuffer())
            f.flush()
            os.fsync(f.fileno())  # on the disk before it takes PATH's place
        os.replace(tmp, path)
    except OSError:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    folder = os.open(os.path.dirname(os.path.abspath(path)), os.O_RDONLY)
    try:
        os.fsync(folder)  # and the rename too, against a node's crash
    finally:
        os.close(folder)


def check_checkpoint_folder(path):
    """Exits saying why when no checkpoint can be saved at PATH (its
    folder missing, read-only, not ours): now, not after an epoch of
    training. Tries an unnamed file, which leaves nothing behind."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        with tempfile.TemporaryFile(dir=folder):
            pass
    except OSError as e:
        sys.exit(f"train: cannot save checkpoints in {folder}: "
                 f"{e.strerror}; give --checkpoint a path in a folder that "
                 "exists and that you can write to")


def load_checkpoint(path, parts, args):
    """Restores what save_checkpoint() saved into the parts (the
    optimizer's state goes to its parameters' device; the loader raises
    ConfigError naming what differs); returns the step number."""
    try:
        state = torch.load(path, map_location="cpu")
    except OSError as e:
        sys.exit(f"train: cannot read the checkpoint {path}: {e.strerror}; "
                 "leave out --resume to start afresh")
    except (EOFError, RuntimeError, pickle.UnpicklingError) as e:
        sys.exit(f"train: the checkpoint {path} is damaged ({e}); it was "
                 "not written by this example, or not whole: restore a "
                 "copy, or leave out --resume to start afresh")
    if not isinstance(state, dict) or \
            state.get("version") != CHECKPOINT_VERSION:
        sys.exit(f"train: {path} is not a checkpoint of this example")
    for name, flag in RESUME_SAME:
        if state["args"][name] != getattr(args, name):
            sys.exit(f"train: {path} was made with {flag} "
                     f"{state['args'][name]}, this run has "
                     f"{getattr(args, name)}: resume with the same {flag}")
    for name, part in parts.items():
        part.load_state_dict(state[name])
    torch.set_rng_state(state["torch_rng"])
    return state["step"]


# ---- training -----------------------------------------------------------


class StopSignals:
    """SIGTERM and Ctrl-C (SIGINT) noted instead of acted on at once, so
    that the step in progress ends and the checkpoint is saved before the
    run exits, as a preempted job needs; a second Ctrl-C raises
    KeyboardInterrupt as usual (stop now, nothing saved)."""

    STOPPING = (signal.SIGTERM, signal.SIGINT)

    def __init__(self):
        self.signum = None
        self._before = {}

    def __enter__(self):
        for signum in self.STOPPING:
            self._before[signum] = signal.signal(signum, self._note)
        return self

    def __exit__(self, *exc):
        for signum, handler in self._before.items():
            signal.signal(signum, handler)

    def _note(self, signum, frame):
        self.signum = signum
        signal.signal(signal.SIGINT, signal.default_int_handler)


def cosine_lr(args, step, total):
    """The learning rate of step `step` of `total`: a function of the step
    alone, so a resumed run continues the same schedule."""
    return 0.5 * args.lr * (1.0 + math.cos(math.pi * step / total))


def crc(tensor):
    return zlib.crc32(tensor.detach().cpu().contiguous().numpy().tobytes())


class Log:
    """The loss lines: one every N steps (by step number, so that a resumed
    run prints at the steps the uninterrupted run does), one at the end of
    each epoch, and the final line's summary. The losses stay on the
    device until a line is printed: one copy to the host per line, not per
    step. The mean loss of each epoch so far goes into the checkpoint
    (state_dict), so that a resumed run reports whole epochs and the
    whole run."""

    def __init__(self, every, batch_size, classes):
        self.every, self.batch_size, self.classes = every, batch_size, classes
        self.window = []  # the losses since the last step line
        self.epoch = None  # the epoch in progress,
        self.pending = []  # its losses not yet added up (on the device),
        self.total, self.batches = 0.0, 0  # and those that are
        self.epochs = []  # (epoch, mean loss) of each epoch ended
        self.started = self.window_started = time.monotonic()

    def state_dict(self):
        self._add_up()
        return {"epochs": list(self.epochs),
                "epoch": (self.epoch, self.total, self.batches)}

    def load_state_dict(self, state):
        self.epochs = list(state["epochs"])
        self.epoch, self.total, self.batches = state["epoch"]

    def step(self, loss, epoch, number, per_epoch, step, lr):
        loss = loss.detach()
        self.pending.append(loss)
        self.window.append(loss)
        if step % self.every:
            return
        mean = torch.stack(self.window).float().mean().item()
        now = time.monotonic()
        rate = len(self.window) * self.batch_size / max(
            now - self.window_started, 1e-9)
        self.window, self.window_started = [], now
        print(f"epoch {epoch} batch {number + 1}/{per_epoch} step {step} "
              f"loss {mean:.4f} lr {lr:.5f} ({rate:.0f} images/s)",
              flush=True)

    def start_epoch(self, epoch):
        """Ends the epoch in progress when it is an earlier one (a run
        resumed from a checkpoint saved after that epoch's last step)."""
        if self.epoch is not None and self.epoch != epoch:
            self.end_epoch()
        self.epoch = epoch

    def _add_up(self):
        # one at a time, in step order: a run stopped and resumed adds the
        # same numbers in the same order as one that was not
        if self.pending:
            for value in torch.stack(self.pending).float().cpu().tolist():
                self.total += value
                self.batches += 1
            self.pending = []

    def end_epoch(self):
        """The line of the epoch that ended (over all its batches, those
        trained on before a resume included)."""
        self._add_up()
        if self.batches == 0:
            return
        mean = self.total / self.batches
        self.epochs.append((self.epoch, mean))
        print(f"end of epoch {self.epoch}: mean loss {mean:.4f} over "
              f"{self.batches} batches", flush=True)
        self.total, self.batches = 0.0, 0

    def summary(self):
        """The mean loss of the first epoch and of the last one (as far as
        it went, when the run stopped inside it)."""
        self._add_up()
        epochs = list(self.epochs)
        if self.batches:
            epochs.append((self.epoch, self.total / self.batches))
        if not epochs:
            return "no step taken"
        (first, at_first), (last, at_last) = epochs[0], epochs[-1]
        text = f"mean loss {at_first:.4f} in epoch {first}"
        if last != first:
            text += f", {at_last:.4f} in epoch {last}"
        return (f"{text} (chance: ln {self.classes} = "
                f"{math.log(self.classes):.4f})")


def open_loader(args, device):
    """The loader: batches scaled and normalised as torchvision's ToTensor
    and Normalize give them, on the GPU when training there. drop_last:
    a training batch of one image breaks BatchNorm."""
    return ringfeed.Loader(args.data, args.batch_size,
                           transform=args.transform, size=args.size,
                           shuffle=True, seed=args.seed, drop_last=True,
                           num_workers=args.workers,
                           device=device if device.type == "cuda" else None,
                           dtype=torch.float32, mean=MEAN, std=STD)


def make_scaler(enabled):
    """AMP's GradScaler: torch.amp's where torch has it (2.3 and later,
    where torch.cuda.amp's is deprecated), else torch.cuda.amp's."""
    if hasattr(torch, "amp") and hasattr(torch.amp, "GradScaler"):
        return torch.amp.GradScaler("cuda", enabled=enabled)
    return torch.cuda.amp.GradScaler(enabled=enabled)


class Trainer:
    """ResNet-18, its optimizer and AMP's scaler, fed by `loader`."""

    def __init__(self, args, device, classes, loader):
        self.args, self.device, self.classes = args, device, classes
        self.amp = device.type == "cuda"
        torch.manual_seed(args.seed)  # the model's initial weights
        self.model = torchvision.models.resnet18(num_classes=classes)
        self.model.to(device).train()
        self.optimizer = torch.optim.SGD(self.model.parameters(), lr=args.lr,
                                         momentum=0.9, weight_decay=1e-4)
        self.scaler = make_scaler(self.amp)
        self.criterion = torch.nn.CrossEntropyLoss()
        self.loader = loader
        self.per_epoch = len(loader)
        self.total = args.epochs * self.per_epoch
        self.log = Log(args.log_every, args.batch_size, classes)
        self.parts = {"model": self.model, "optimizer": self.optimizer,
                      "scaler": self.scaler, "loader": loader, "log": self.log}
        self.step = 0  # steps since the start of training
        self.taken = 0  # steps in this run
        self.saved = None  # the step of the last checkpoint saved or resumed

    def place(self):
        """Where the loader resumes: 'epoch E batch B/N' (B from 1), or
        past the last epoch, the end."""
        state = self.loader.state_dict()
        if state["epoch"] >= self.args.epochs:
            return f"the end: all {self.args.epochs} epochs trained"
        return (f"epoch {state['epoch']} batch {state['batch'] + 1}"
                f"/{self.per_epoch}")

    def resume(self):
        self.step = load_checkpoint(self.args.checkpoint, self.parts,
                                    self.args)
        self.saved = self.step
        print(f"resuming from {self.args.checkpoint} at {self.place()} "
              f"(step {self.step})", flush=True)

    def save(self):
        """Saves the checkpoint, or ends the run saying why it cannot and
        which checkpoint is left (a traceback, or torch's abort, said
        neither)."""
        path = self.args.checkpoint
        try:
            save_checkpoint(path, self.parts, self.step, self.args)
        except OSError as e:
            if self.saved is not None:
                kept = f"{path} still holds step {self.saved}"
            elif os.path.exists(path):
                kept = f"{path} is left as it was"
            else:
                kept = "no checkpoint was saved"
            sys.exit(f"train: cannot save the checkpoint {path} at step "
                     f"{self.step}: {e.strerror}; {kept}. Free some space, "
                     "or give --checkpoint a path on another file system")
        self.saved = self.step

    def train_step(self, batch):
        images, labels = batch.images, batch.labels
        if self.args.print_batches:
            print(f"batch epoch {batch.epoch} number {batch.number} indices "
                  f"{crc(batch.indices):08x} labels {crc(labels):08x} "
                  f"images {crc(images):08x}", flush=True)
        if int(labels.max()) >= self.classes:
            sys.exit(f"train: a batch has label {int(labels.max())}, but "
                     f"the model has {self.classes} classes: give the "
                     "dataset's number of classes with --classes")
        labels = labels.to(self.device, non_blocking=True)
        lr = cosine_lr(self.args, self.step, self.total)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        with torch.autocast(self.device.type, enabled=self.amp):
            loss = self.criterion(self.model(images), labels)
        self.optimizer.zero_grad(set_to_none=True)
        self.scaler.scale(loss).backward()
        self.scaler.step(self.optimizer)
        self.scaler.update()
        self.step += 1
        self.taken += 1
        self.log.step(loss, batch.epoch, batch.number, self.per_epoch,
                      self.step, lr)

    def run(self, signals):
        """Trains to the end of --epochs; returns None then, "stop-after"
        after --stop-after steps, or the number of a signal that asked to
        stop (signals, a StopSignals), each time with the checkpoint
        saved."""
        args = self.args
        first = self.loader.state_dict()["epoch"]
        for epoch in range(first, args.epochs):
            # the epoch the loader is already in keeps its position: a
            # resumed epoch goes on where the checkpoint left it
            self.loader.set_epoch(epoch)
            self.log.start_epoch(epoch)
            for batch in self.loader.batches():
                self.train_step(batch)
                # the batch just trained on counts as consumed: a
                # checkpoint saved now resumes at the one after it
                stop = signals.signum or (
                    "stop-after" if args.stop_after and
                    self.taken == args.stop_after else None)
                if stop:
                    self.stop_here(stop)
                    return stop
                if args.save_every and self.step % args.save_every == 0:
                    self.save()
            self.log.end_epoch()
            if args.checkpoint:
                self.save()
            if signals.signum:  # came during the epoch's end or its save
                self.stop_here(signals.signum)
                return signals.signum
        return None

    def stop_here(self, why):
        """Saves (with --checkpoint) and says so, for --stop-after or a
        signal."""
        by = "" if why == "stop-after" else f" by {signal.Signals(why).name}"
        if not self.args.checkpoint:
            print(f"stopped{by} after {self.taken} steps; nothing saved "
                  "(no --checkpoint)", flush=True)
            return
        self.save()
        print(f"stopped{by} after {self.taken} steps; saved "
              f"{self.args.checkpoint} (resumes at {self.place()})",
              flush=True)


def train(args, device):
    with open_loader(args, device) as loader:
        stats = loader.stats()
        if args.checkpoint and stats["world_size"] > 1:
            # each rank trains a model of its own: a checkpoint of its own
            # (one shared path had the ranks' renames race)
            args.checkpoint += f".rank{stats['rank']}"
        if args.checkpoint:
            check_checkpoint_folder(args.checkpoint)
        if args.classes is None:  # ImageFolder's classes, or the pack's
            args.classes = len(loader.classes)
        classes = args.classes
        trainer = Trainer(args, device, classes, loader)
        if args.resume:
            trainer.resume()
            if loader.state_dict()["epoch"] >= args.epochs:
                print(f"the checkpoint is past --epochs {args.epochs}: "
                      "nothing to do")
                return 0
        print(f"ResNet-18, {classes} classes, on {device}"
              f"{' with AMP' if trainer.amp else ''}; {trainer.per_epoch} "
              f"batches of {args.batch_size} per epoch, {args.transform} at "
              f"{args.size}; {loader.stats()['producers']} producers",
              flush=True)
        with StopSignals() as signals:
            stopped = trainer.run(signals)
        waited = loader.stats()["wait_s"]
    seconds = time.monotonic() - trainer.log.started
    print(f"done: {trainer.taken} steps in {seconds:.1f} s (waited "
          f"{waited:.1f} s for batches){', stopped' if stopped else ''}; "
          f"{trainer.log.summary()}")
    return 128 + stopped if isinstance(stopped, int) else 0


def main(argv):
    args = parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    use_gpu = torch.cuda.is_available() and not args.cpu
    device = torch.device("cuda" if use_gpu else "cpu")
    try:
        return train(args, device)
    except ringfeed.RingfeedError as e:
        print(f"train: {e}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
