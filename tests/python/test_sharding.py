"""Sharding across ranks: rank and world size from the launchers'
environment (torchrun's RANK/WORLD_SIZE, Open MPI's OMPI_COMM_WORLD_*)
and from an initialised torch.distributed (gloo, two processes). The
ranks' shards are disjoint without padding and cover the dataset with it;
every rank gets as many batches, and len(loader) says how many."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from helpers import child_env, dataset, free_port, producers_of

BATCH = 5
EPOCHS = 2

# Prints one JSON line per shard_pad setting: what the loader yielded.
CHILD = textwrap.dedent("""
    import json, sys
    mode, root = sys.argv[1], sys.argv[2]
    if mode == "numpy":  # no torch: quicker to start, numpy batches
        sys.modules["torch"] = None
    if mode == "gloo":
        import torch.distributed as dist
        dist.init_process_group("gloo", init_method=sys.argv[3],
                                rank=int(sys.argv[4]),
                                world_size=int(sys.argv[5]))
    import ringfeed
    for pad in (False, True):
        with ringfeed.Loader(root, %(batch)d, size=16, shard_pad=pad,
                             seed=5, num_workers=1) as loader:
            epochs, sizes = [], []
            for epoch in range(%(epochs)d):
                loader.set_epoch(epoch)
                indices = []
                for batch in loader.batches():
                    indices += [int(i) for i in batch.indices]
                    sizes.append(len(batch.labels))
                epochs.append(indices)
            stats = loader.stats()
            print(json.dumps({"pad": pad, "len": len(loader),
                              "epochs": epochs, "sizes": sizes,
                              "rank": stats["rank"],
                              "world_size": stats["world_size"]}),
                  flush=True)
    if mode == "gloo":
        dist.barrier()
        dist.destroy_process_group()
""") % {"batch": BATCH, "epochs": EPOCHS}


def launch(mode, root, envs, extra_args=()):
    """Starts one child per rank at once, waits, returns
    {pad: [report of rank 0, rank 1, ...]}."""
    procs = [subprocess.Popen([sys.executable, "-c", CHILD, mode, root,
                               *[a.format(rank=r) for a in extra_args]],
                              env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for r, env in enumerate(envs)]
    reports = {False: [], True: []}
    for p in procs:
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        for line in out.splitlines():
            report = json.loads(line)
            reports[report["pad"]].append(report)
    return reports


def check_shards(reports, world, samples):
    for pad in (False, True):
        ranks = reports[pad]
        assert [r["rank"] for r in ranks] == list(range(world))
        assert all(r["world_size"] == world for r in ranks)
        per_rank = -(-samples // world) if pad else samples // world
        batches = -(-per_rank // BATCH)
        for r in ranks:
            assert r["len"] == batches, "len(loader)"
            assert len(r["sizes"]) == batches * EPOCHS, "batches yielded"
        for epoch in range(EPOCHS):
            shards = [r["epochs"][epoch] for r in ranks]
            assert all(len(s) == per_rank for s in shards)
            assert all(len(set(s)) == len(s) for s in shards), \
                "a sample twice within one rank's shard"
            union = set().union(*map(set, shards))
            if pad:
                assert union == set(range(samples)), \
                    "the padded shards do not cover the dataset"
            else:
                assert sum(map(len, shards)) == len(union), \
                    "the shards overlap"
                assert len(union) == per_rank * world
        # a new order each epoch, still a partition
        assert ranks[0]["epochs"][0] != ranks[0]["epochs"][1]


def test_from_torchrun_environment(tmp_path_factory):
    root = dataset(tmp_path_factory, "odd")
    world = 3
    envs = [child_env(RANK=str(r), WORLD_SIZE=str(world))
            for r in range(world)]
    check_shards(launch("env", root, envs), world, 33)


def test_from_open_mpi_environment(tmp_path_factory):
    """Open MPI's variables (in processes without torch, which read the
    environment alone)."""
    root = dataset(tmp_path_factory, "odd")
    world = 2
    envs = [child_env(OMPI_COMM_WORLD_RANK=str(r),
                      OMPI_COMM_WORLD_SIZE=str(world))
            for r in range(world)]
    check_shards(launch("numpy", root, envs), world, 33)


def test_from_torch_distributed(tmp_path_factory):
    """torch.distributed's rank and world size win over the environment
    (which here says rank 0 of 1 in both processes)."""
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    root = dataset(tmp_path_factory, "odd")
    world = 2
    envs = [child_env(RANK="0", WORLD_SIZE="1") for _ in range(world)]
    address = f"tcp://127.0.0.1:{free_port()}"
    reports = launch("gloo", root, envs,
                     (address, "{rank}", str(world)))
    check_shards(reports, world, 33)


LAUNCHER_VARIABLES = ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                      "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                      "SLURM_PROCID", "SLURM_NTASKS")


def test_single_process_sees_everything(tmp_path_factory, monkeypatch):
    """No launcher: rank 0 of 1, every sample each epoch."""
    import ringfeed
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    root = dataset(tmp_path_factory, "odd")
    for pad in (False, True):
        with ringfeed.Loader(root, BATCH, size=16, shard_pad=pad,
                             num_workers=1) as loader:
            indices = [int(i) for b in loader.batches() for i in b.indices]
            stats = loader.stats()
        assert (stats["rank"], stats["world_size"]) == (0, 1)
        assert sorted(indices) == list(range(33))


def test_rank_arguments_win(tmp_path_factory, monkeypatch):
    """rank= and world_size= given: the environment is not read."""
    import ringfeed
    monkeypatch.setenv("RANK", "0")
    monkeypatch.setenv("WORLD_SIZE", "1")
    root = dataset(tmp_path_factory, "odd")
    shards = []
    for rank in range(3):
        with ringfeed.Loader(root, BATCH, size=16, rank=rank, world_size=3,
                             shard_pad=False, num_workers=1) as loader:
            assert len(loader) == 3  # 11 samples each
            shards.append({int(i) for b in loader.batches()
                           for i in b.indices})
    assert all(len(s) == 11 for s in shards)
    assert len(set().union(*shards)) == 33


def test_one_of_the_pair_given_says_to_give_both(tmp_path_factory,
                                                 monkeypatch):
    """world_size=1 alone on the launcher's rank 1 (a Loader meant to read
    everything): refused, saying to pass both, and what for."""
    import ringfeed
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    root = dataset(tmp_path_factory, "odd")
    with pytest.raises(ringfeed.ConfigError,
                       match=r"rank 1 of world_size 1 \(from world_size= and "
                             r"\$RANK/\$WORLD_SIZE\).*pass both rank= and "
                             r"world_size= \(rank=0, world_size=1"):
        ringfeed.Loader(root, BATCH, size=16, world_size=1)
    for name in LAUNCHER_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ringfeed.ConfigError,
                       match=r"rank= alone does not say how many shards"):
        ringfeed.Loader(root, BATCH, size=16, rank=1)


def test_world_size_0_is_refused_naming_world_size(tmp_path_factory):
    """world_size=0 is refused as a world size below 1, naming
    world_size=; it said "the rank must be 0 to world_size - 1", as if
    rank=0 were what to change."""
    import ringfeed
    root = dataset(tmp_path_factory, "odd")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, BATCH, size=16, rank=0, world_size=0)
    said = str(caught.value)
    assert "world_size= is the number of ranks and must be at least 1" \
        in said, said
    assert "the rank must be" not in said, said


MADE_BEFORE_INIT = textwrap.dedent("""
    import sys
    import torch.distributed as dist
    import ringfeed
    root, address, rank = sys.argv[1], sys.argv[2], int(sys.argv[3])
    early = ringfeed.Loader(root, 5, size=16, num_workers=1)  # 0 of 1
    given = ringfeed.Loader(root, 5, size=16, num_workers=1, rank=0,
                            world_size=1)  # every rank reads it all: meant
    dist.init_process_group("gloo", init_method=address, rank=rank,
                            world_size=2)
    try:
        next(iter(early))
        print("early: no error")
    except ringfeed.ConfigError as e:
        print("early:", e)
    print("given:", len(next(iter(given))[1]))
    if rank == 0:  # a validation set that rank 0 alone reads, whole
        val = ringfeed.Loader(root, 5, size=16, num_workers=1, world_size=1)
        print("val:", len(next(iter(val))[1]))
    dist.barrier()
    dist.destroy_process_group()
""")


def test_made_before_init_process_group_is_refused(tmp_path_factory):
    """A Loader made before torch.distributed.init_process_group() took
    rank 0 of 1: its first loop raises ConfigError saying what to do,
    where every rank would otherwise read the whole dataset. rank= and
    world_size= given stand, and so does world_size=1 alone, made after
    init on rank 0 (its first loop refused it: torch.distributed's world
    size differed from the one given)."""
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    root = dataset(tmp_path_factory, "odd")
    address = f"tcp://127.0.0.1:{free_port()}"
    env = child_env()  # no launcher: 0 of 1 by default
    procs = [subprocess.Popen([sys.executable, "-c", MADE_BEFORE_INIT, root,
                               address, str(r)], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for r in range(2)]
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        early, given, *val = out.splitlines()
        assert val == (["val: 5"] if r == 0 else [])
        assert early.startswith("early: this Loader took rank 0 of "
                                "world_size 1 from default"), early
        assert f"torch.distributed now says rank {r} of 2" in early
        assert "init_process_group()" in early and "rank=" in early
        assert given == "given: 5"


LOCAL_RANK_VARIABLES = ("RF_LOCAL_RANK", "RF_LOCAL_WORLD_SIZE", "LOCAL_RANK",
                        "LOCAL_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
                        "OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALRANKID",
                        "MPI_LOCALNRANKS", "SLURM_LOCALID", "SLURM_NODEID",
                        "SLURM_TASKS_PER_NODE", "SLURM_NTASKS_PER_NODE")


def test_a_rank_without_a_local_rank_does_not_pin(tmp_path_factory,
                                                  monkeypatch):
    """torch.multiprocessing.spawn's ranks (the ImageNet example's) have a
    rank and a world size but no local rank: each took the whole mask,
    as if alone on the node, and pinned its producers from the mask's
    first CPU, so every rank of the node put its producers on the same
    CPUs (num_workers=1 on 8 ranks: 8 producers on CPU 0, the other CPUs
    idle). Now such a rank leaves its producers unpinned, and says what
    to set (and the word on num_workers= over the budget names it
    unpinned; with pin_producers=False it says the budget only, not that
    it left unpinned what the caller chose so); a process alone (world
    size 1), and a rank with its local rank (0 of 1 too: the node's only
    rank), still pin."""
    import ringfeed
    for name in LOCAL_RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    root = dataset(tmp_path_factory, "odd")
    mask = os.sched_getaffinity(0)
    with ringfeed.Loader(root, BATCH, size=16, num_workers=1) as alone:
        if "pinned to" not in alone.cpu_budget:
            pytest.skip(f"no pinning here: {alone.cpu_budget}")
        assert [len(os.sched_getaffinity(p))
                for p in producers_of(os.getpid())] == [1]
    for workers in (1, None):
        said = []
        with ringfeed.Loader(root, BATCH, size=16, rank=1, world_size=2,
                             num_workers=workers,
                             on_message=said.append) as loader:
            producers = producers_of(os.getpid())
            assert producers
            assert all(os.sched_getaffinity(p) == mask for p in producers)
            assert "not pinned (one of 2 ranks, no local rank)" in \
                loader.cpu_budget
            assert sum(len(labels) for _, labels in loader) == 17
        [message] = [m for m in said if "no local rank" in m]
        assert message.startswith("rank 1 of 2 has no local rank")
        assert "RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE" in message
        assert ("all %d CPUs" % len(mask) in message) == (workers is None)
    # producers the caller asked not to pin: the budget is said, and not
    # that they are left unpinned, which the caller chose
    said = []
    with ringfeed.Loader(root, BATCH, size=16, rank=1, world_size=2,
                         pin_producers=False, on_message=said.append):
        pass
    [message] = [m for m in said if "no local rank" in m]
    assert "all %d CPUs" % len(mask) in message, message
    assert "not pinned" not in message and "lest" not in message, message
    assert "RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE" in message
    # more producers than the budget: the word on it names the budget
    # unpinned, as it is (it said "pinned to 0-1" beside "not pinned")
    said = []
    with ringfeed.Loader(root, BATCH, size=16, rank=1, world_size=2,
                         num_workers=len(mask) + 1,
                         on_message=said.append) as loader:
        assert "pinned to" not in loader.cpu_budget
    [more] = [m for m in said if "more than this rank's CPU budget" in m]
    assert "not pinned (one of 2 ranks, no local rank)" in more, more
    assert not [m for m in said if "pinned to" in m], said
    # the node's only rank (torchrun --nproc_per_node=1 on several nodes):
    # a local rank, 0 of 1, so its whole mask is its own and pinned
    monkeypatch.setenv("LOCAL_RANK", "0")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "1")
    said = []
    with ringfeed.Loader(root, BATCH, size=16, rank=1, world_size=2,
                         num_workers=1, on_message=said.append) as loader:
        assert "pinned to" in loader.cpu_budget
        assert [len(os.sched_getaffinity(p))
                for p in producers_of(os.getpid())] == [1]
    assert not [m for m in said if "no local rank" in m]
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")
    said = []
    with ringfeed.Loader(root, BATCH, size=16, rank=1, world_size=2,
                         num_workers=1, on_message=said.append) as loader:
        assert "local rank 1 of 2" in loader.cpu_budget
        if len(mask) > 1:
            assert "pinned to" in loader.cpu_budget
    assert not [m for m in said if "no local rank" in m]


def test_a_loader_unpinned_by_the_package_shows_its_reason(
        tmp_path_factory, monkeypatch):
    """A Loader of world_size=1 in one rank of several without a local
    rank (_distributed.unpin_whole) passes pin_producers=False, and its
    cpu_budget shows its own reason where the library's line gives the
    one it was given: here without torch.distributed (made to say rank 1
    of 2), so that the case runs wherever the library pins, where the
    two-rank case below needs gloo and two CPUs. It showed the library's
    reason when the words it looked for were not those of the line."""
    import ringfeed
    from ringfeed import _distributed
    for name in LOCAL_RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    root = dataset(tmp_path_factory, "odd")
    with ringfeed.Loader(root, BATCH, size=16, num_workers=1) as alone:
        pins = "pinned to" in alone.cpu_budget
    monkeypatch.setattr(_distributed, "_from_torch",
                        lambda: (1, 2, "torch.distributed"))
    said = []
    with ringfeed.Loader(root, BATCH, size=16, num_workers=1, rank=0,
                         world_size=1, on_message=said.append) as val:
        budget = val.cpu_budget
        assert sum(len(labels) for _, labels in val) == 33
    assert "pinned to" not in budget, budget
    assert "pin_producers" not in budget, budget
    if pins:
        assert budget.endswith(
            ", not pinned (one of 2 ranks, no local rank)"), budget
    [message] = [m for m in said if "no local rank" in m]
    assert message.startswith("rank 1 of 2 (torch.distributed) has no "
                              "local rank"), message


WHOLE_IN_EACH_RANK = textwrap.dedent("""
    import json, os, sys
    import torch.distributed as dist
    root, address, rank, tests = sys.argv[1:]
    sys.path.insert(0, tests)
    from helpers import producers_of
    import ringfeed
    dist.init_process_group("gloo", init_method=address, rank=int(rank),
                            world_size=2)
    # as spawn's ranks have it; then pin_producers=True given; then the
    # remedy, the rank's local rank set
    for case in ("spawned", "given", "local"):
        if case == "local":
            os.environ["RF_LOCAL_RANK"] = rank
            os.environ["RF_LOCAL_WORLD_SIZE"] = "2"
        said = []
        pin = {"pin_producers": True} if case == "given" else {}
        with ringfeed.Loader(root, 5, size=16, num_workers=1, rank=0,
                             world_size=1, on_message=said.append,
                             **pin) as val:
            cpus = [sorted(os.sched_getaffinity(p))
                    for p in producers_of(os.getpid())]
            samples = [sum(len(labels) for _, labels in val)]
            val.set_epoch(3)  # the producers start again
            samples.append(sum(len(labels) for _, labels in val))
            print(json.dumps({"budget": val.cpu_budget, "cpus": cpus,
                              "said": said, "samples": samples}))
    dist.barrier()
    dist.destroy_process_group()
""")


def test_a_whole_set_in_a_rank_without_a_local_rank_does_not_pin(
        tmp_path_factory, monkeypatch):
    """A validation Loader that each rank reads whole (rank=0,
    world_size=1) in a job of 2 ranks (gloo) with no local rank, as
    torch.multiprocessing.spawn's: the library saw one process alone on
    the node and pinned its producers from the mask's first CPU, so every
    rank put its validation producers on the same CPUs (num_workers=1:
    CPU 0 in both ranks). Like a Loader of the job's world size there, its
    producers are now left unpinned, and it says once what to set.
    pin_producers= given is obeyed; with RF_LOCAL_RANK/RF_LOCAL_WORLD_SIZE
    set it pins to the rank's slice; a process alone still pins."""
    import ringfeed
    pytest.importorskip("torch.distributed")
    import torch.distributed as dist
    if not dist.is_available() or not dist.is_gloo_available():
        pytest.skip("torch.distributed with gloo is not available")
    for name in LOCAL_RANK_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    root = dataset(tmp_path_factory, "odd")
    mask = sorted(os.sched_getaffinity(0))
    with ringfeed.Loader(root, BATCH, size=16, num_workers=1, rank=0,
                         world_size=1) as alone:
        if "pinned to" not in alone.cpu_budget or len(mask) < 2:
            pytest.skip(f"no pinning to show here: {alone.cpu_budget}")
        assert len(os.sched_getaffinity(producers_of(os.getpid())[0])) == 1
    address = f"tcp://127.0.0.1:{free_port()}"
    tests = os.path.dirname(os.path.abspath(__file__))
    procs = [subprocess.Popen([sys.executable, "-c", WHOLE_IN_EACH_RANK,
                               root, address, str(r), tests],
                              env=child_env(), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True)
             for r in range(2)]
    pinned = []
    for r, p in enumerate(procs):
        out, err = p.communicate(timeout=120)
        assert p.returncode == 0, err
        spawned, given, local = map(json.loads, out.splitlines())
        assert spawned["cpus"] == [mask], spawned
        assert spawned["budget"].endswith(
            ", not pinned (one of 2 ranks, no local rank)"), spawned
        [message] = [m for m in spawned["said"] if "no local rank" in m]
        assert message.startswith(f"rank {r} of 2 (torch.distributed) has "
                                  "no local rank"), message
        assert "RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE" in message
        assert "pinned to" in given["budget"], given
        assert [len(c) for c in given["cpus"]] == [1], given
        assert not [m for m in given["said"] if "no local rank" in m]
        assert f"local rank {r} of 2" in local["budget"], local
        assert "pinned to" in local["budget"], local
        assert not [m for m in local["said"] if "no local rank" in m]
        [cpus] = local["cpus"]
        pinned.append(cpus)
        for case in (spawned, given, local):
            assert case["samples"] == [33, 33], case  # the whole set
    assert len(pinned[0]) == len(pinned[1]) == 1, pinned
    assert pinned[0] != pinned[1], pinned  # each rank's slice its own
