"""DistributedDataParallel with an empty batch on one rank.

Under on_error="skip" a batch whose every sample failed comes out empty,
so that every rank takes as many steps. The step docs/python.md gives
for it (the forward on the empty batch too, a loss of out.sum() * 0
there) keeps the ranks in step: `continue` on one rank alone leaves the
other waiting in the gradient all-reduce (a gloo timeout, checked by
hand on torch 1.13), and so does a zero loss made of the parameters
without the forward (DDP all-reduces only after its own forward). Here
two ranks of torch.multiprocessing.spawn (gloo, the CPU), rank 1's first
batch made only of bad files, run a model without and with BatchNorm:
no rank waits (a collective that waited would time out: 90 s, room for
a loaded CI machine, inside the run's 180), the parameters
come out the same on both ranks, and the same as a replay in one process
in which the empty batch adds nothing to the gradient (DDP's mean over
the ranks)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from helpers import child_env, free_port, write_folder

SCRIPT = r'''
import datetime, json, sys
import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn
import torch.nn.functional as F
from torch.nn.parallel import DistributedDataParallel as DDP
import ringfeed


def make_model(batch_norm):
    torch.manual_seed(0)
    layers = [nn.Conv2d(3, 4, 3, padding=1)]
    if batch_norm:
        layers.append(nn.BatchNorm2d(4))
    layers += [nn.ReLU(), nn.AdaptiveAvgPool2d(1), nn.Flatten(),
               nn.Linear(4, 2)]
    return nn.Sequential(*layers)


def step(model, optimizer, images, labels):  # docs/python.md's
    out = model(images)              # every rank, an empty batch too
    if len(labels):
        loss = F.cross_entropy(out, labels)
    else:                            # every sample failed: add nothing,
        loss = out.sum() * 0.0       # but all-reduce with the others
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    return loss


def replay(batch_norm, ranks):
    """The same steps in one process: each step's gradient the mean over
    the ranks of each rank's, an empty batch's zero."""
    model = make_model(batch_norm)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5, momentum=0.9)
    for batches in zip(*[seen for seen, _ in ranks]):
        optimizer.zero_grad()
        for images, labels, _ in batches:
            if len(labels):
                (F.cross_entropy(model(images), labels) / len(ranks)
                 ).backward()
        optimizer.step()
    return [p.detach() for p in model.parameters()]


def run(rank, root, address, out):
    dist.init_process_group("gloo", init_method=address, rank=rank,
                            world_size=2,
                            timeout=datetime.timedelta(seconds=90))
    report = {}
    for batch_norm in (False, True):
        net = make_model(batch_norm)
        model = DDP(net)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.5,
                                    momentum=0.9)
        seen = []
        with ringfeed.Loader(root, 2, size=16, shuffle=False,
                             on_error="skip", max_error_ppm=1_000_000,
                             num_workers=1, quiet=True,
                             on_message=lambda text: None) as loader:
            for images, labels in loader:
                images = images.float() / 255
                loss = step(model, optimizer, images, labels)
                seen.append((images.clone(), labels.clone(), float(loss)))
        params = [p.detach() for p in net.parameters()]
        ranks = [None, None]
        dist.all_gather_object(ranks, (seen, params))
        report[str(batch_norm)] = {
            "shapes": [[list(i.shape) for i, _, _ in s] for s, _ in ranks],
            "losses": [[l for _, _, l in s] for s, _ in ranks],
            "ranks_equal": all(torch.equal(a, b) for a, b in
                               zip(ranks[0][1], ranks[1][1])),
            "replay_diff": max(float((a - b).abs().max()) for a, b in
                               zip(params, replay(batch_norm, ranks))),
            "finite": all(bool(torch.isfinite(p).all()) for p in params)}
    if rank == 0:
        with open(out, "w") as f:
            json.dump(report, f)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    root, address, out = sys.argv[1:]
    mp.spawn(run, args=(root, address, out), nprocs=2)
'''


def test_an_empty_batch_on_one_rank_keeps_ddp_in_step(tmp_path):
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    root = str(tmp_path / "data")
    write_folder(root, 2, 4, seed=31, sides=(24, 40))
    # shuffle=False: rank 1 of 2 reads positions 1, 3, 5, 7, in batches
    # of 2; its first batch, class_00's img_0001 and img_0003, fails whole
    for name in ("img_0001.jpg", "img_0003.jpg"):
        with open(os.path.join(root, "class_00", name), "wb") as f:
            f.write(b"not an image")
    script = tmp_path / "ddp_empty.py"
    script.write_text(SCRIPT)
    out = tmp_path / "report.json"
    done = subprocess.run(
        [sys.executable, str(script), root,
         f"tcp://127.0.0.1:{free_port()}", str(out)],
        env=child_env(), capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads(out.read_text())
    for batch_norm in ("False", "True"):
        got = report[batch_norm]
        assert got["shapes"] == [[[2, 3, 16, 16], [2, 3, 16, 16]],
                                 [[0, 3, 16, 16], [2, 3, 16, 16]]], got
        assert got["losses"][1][0] == 0.0, got  # the empty batch's
        assert got["finite"], got
        assert got["ranks_equal"], got
        assert got["replay_diff"] < 1e-5, got
