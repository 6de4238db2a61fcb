#!/usr/bin/python3
"""tools/dev/resume-loop.py - docs/python.md's checkpoint-and-resume loop,
stopped and resumed: the runs behind "A complete loop that checkpoints
and resumes".

    tools/dev/resume-loop.py kill  [--after 17]
    tools/dev/resume-loop.py int   [--runs 5] [--epochs 8]

The loop is the doc's (set_epoch(), the start batch from state_dict(), a
save() every 5 steps, after the step, and one in `except
KeyboardInterrupt`), with a small model (a seeded conv layer and a linear
one, one torch thread, SGD with momentum) on 400 ringfeed-synth JPEGs in
4 classes at size 32, batches of 31: 13 batches an epoch.

kill: runs the loop for 3 epochs without a stop, then again killed with
SIGKILL once it has finished --after steps, and once more from its
checkpoint to the end; prints how many steps the resumed run trained and
whether its final weights are those of the uninterrupted run, bit for
bit. int: --runs runs of --epochs epochs, each sent SIGINT after another
step count (spread over the run), resumed from the checkpoint its
`except` clause saved, and compared in the same way; prints where each
interrupt landed (in the loader's wait, which closes the loader, or
outside it: the driver sends it as soon as the step's line is printed, so
not inside the forward or backward pass) and the result.
Exits 1 when any final weights differ.

Needs torch and ringfeed importable (PYTHONPATH, RINGFEED_LIBRARY,
RINGFEED_PRODUCER for a build tree) and ringfeed-synth:
RINGFEED_TOOLS=<build>/tools (default _build/tools). About a minute on
the 2-CPU dev VM.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
TOP = os.path.dirname(os.path.dirname(HERE))

# The training process: the doc's loop, printing "step N" after each
# optimizer step and, on KeyboardInterrupt, whether the loader had closed
# (the interrupt landed in its wait) or not (in the step).
CHILD = r'''
import os, sys
import torch
import torch.nn.functional as F
import ringfeed

TRAIN, CKPT, OUT = sys.argv[1], sys.argv[2], sys.argv[4]
EPOCHS = int(sys.argv[3])
torch.set_num_threads(1)
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Conv2d(3, 8, 3, stride=2),
                            torch.nn.ReLU(), torch.nn.Flatten(),
                            torch.nn.Linear(8 * 15 * 15, 4))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
loader = ringfeed.Loader(TRAIN, 31, seed=0, size=32,
                         dtype=torch.float32, mean=(0.5, 0.5, 0.5),
                         std=(0.25, 0.25, 0.25))
if os.path.exists(CKPT):
    ckpt = torch.load(CKPT)
    model.load_state_dict(ckpt["model"])
    optimizer.load_state_dict(ckpt["optimizer"])
    loader.load_state_dict(ckpt["loader"])
start = loader.state_dict()["epoch"]


def save():
    torch.save({"model": model.state_dict(),
                "optimizer": optimizer.state_dict(),
                "loader": loader.state_dict()}, CKPT + ".tmp")
    os.replace(CKPT + ".tmp", CKPT)


steps = 0
try:
    for epoch in range(start, EPOCHS):
        loader.set_epoch(epoch)
        first = loader.state_dict()["batch"]
        for step, (images, labels) in enumerate(loader, start=first):
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            steps += 1
            print("step", steps, flush=True)
            if step % 5 == 4:
                save()
except KeyboardInterrupt:
    save()
    print("interrupted", "wait" if loader.closed else "outside", flush=True)
    raise
save()
loader.close()
torch.save(model.state_dict(), OUT)
print("done", steps, flush=True)
'''


def child(work, ckpt, epochs, out, stderr=None):
    return subprocess.Popen(
        [sys.executable, "-c", CHILD, f"{work}/ds", ckpt, str(epochs), out],
        stdout=subprocess.PIPE, stderr=stderr, text=True)


def run_to_end(work, ckpt, epochs, out):
    proc = child(work, ckpt, epochs, out)
    lines = proc.stdout.read().split()
    if proc.wait() != 0 or "done" not in lines:
        sys.exit(f"a run failed (exit {proc.returncode})")
    return int(lines[-1])


def stopped(work, ckpt, epochs, out, after, sig):
    """Runs until `after` steps are done, sends sig, returns what the
    child said about the interrupt (None for SIGKILL)."""
    # its KeyboardInterrupt traceback is expected: not shown
    proc = child(work, ckpt, epochs, out, subprocess.DEVNULL)
    landed = None
    for line in proc.stdout:
        if line.split() == ["step", str(after)]:
            proc.send_signal(sig)
        elif line.startswith("interrupted"):
            landed = line.split()[1]
    proc.wait()
    return landed


def same(a, b):
    import torch
    x, y = torch.load(a), torch.load(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=("kill", "int"))
    ap.add_argument("--after", type=int, default=17)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--epochs", type=int)
    args = ap.parse_args()
    epochs = args.epochs or (3 if args.mode == "kill" else 8)
    tools = os.environ.get("RINGFEED_TOOLS", f"{TOP}/_build/tools")
    ok = True
    with tempfile.TemporaryDirectory(prefix="resume-loop-") as work:
        subprocess.run([f"{tools}/ringfeed-synth", f"{work}/ds", "--images",
                        "400", "--classes", "4", "--jobs", "2", "--quiet"],
                       check=True, stdout=subprocess.DEVNULL)
        total = run_to_end(work, f"{work}/ref.pt", epochs, f"{work}/ref.out")
        print(f"uninterrupted: {total} steps over {epochs} epochs")
        if args.mode == "kill":
            stops = [args.after]
            sig = signal.SIGKILL
        else:
            stops = [total * (2 * i + 1) // (2 * args.runs)
                     for i in range(args.runs)]
            sig = signal.SIGINT
        for n, after in enumerate(stops):
            ckpt, out = f"{work}/ck{n}.pt", f"{work}/out{n}.pt"
            landed = stopped(work, ckpt, epochs, out, after, sig)
            resumed = run_to_end(work, ckpt, epochs, out)
            equal = same(f"{work}/ref.out", out)
            ok &= equal
            where = {None: "", "wait": ", in the loader's wait (it closed)",
                     "outside": ", outside the loader's wait (it stayed "
                                "open)"}[landed]
            print(f"{sig.name} after step {after}{where}: the resumed run "
                  f"trained {resumed} steps; final weights "
                  f"{'bit for bit those of' if equal else 'DIFFER from'} "
                  f"the uninterrupted run")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
