"""Where this process stands in a data-parallel job: rank and world size
from an initialised torch.distributed, else from the launcher."""

from __future__ import annotations

import os
from typing import Any, Dict, Optional, SupportsIndex, Tuple

from ._arguments import whole
from .errors import ConfigError

# The launchers' variables, in the order the library itself reads them
# (rf_loader_open: RANK/WORLD_SIZE from torchrun, then Open MPI's). Slurm's
# are read here too, for srun without torchrun.
_LAUNCHERS = (("RANK", "WORLD_SIZE"),
              ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"),
              ("PMI_RANK", "PMI_SIZE"),
              ("SLURM_PROCID", "SLURM_NTASKS"))


def _from_torch() -> Optional[Tuple[int, int, str]]:
    try:
        import torch.distributed as dist
    except ImportError:
        return None
    if not (dist.is_available() and dist.is_initialized()):
        return None
    return dist.get_rank(), dist.get_world_size(), "torch.distributed"


def _from_environment() -> Optional[Tuple[int, int, str]]:
    for rank_name, size_name in _LAUNCHERS:
        rank, size = os.environ.get(rank_name), os.environ.get(size_name)
        if rank is None and size is None:
            continue
        if rank is None or size is None:
            unset, set_ = ((rank_name, size_name) if rank is None
                           else (size_name, rank_name))
            raise ConfigError(f"${unset} is not set but ${set_} is; set "
                              "both, or pass rank= and world_size=")
        try:
            r, w = int(rank), int(size)
        except ValueError:
            raise ConfigError(
                f"${rank_name}={rank!r} and ${size_name}={size!r} must be "
                "whole numbers; or pass rank= and world_size=") from None
        return r, w, f"${rank_name}/${size_name}"
    return None


def check_still_holds(rank: int, world: int, where: str,
                      given: Tuple[bool, bool]) -> None:
    """At a loop's start: the rank and the world size taken when the
    Loader was made, those of them not given (`given`: rank=, world_size=),
    must be what an initialised torch.distributed says now. A Loader made
    before init_process_group() took 0 of 1 (or the launcher's), and every
    rank would read a shard that is not its own, or the whole dataset:
    DistributedSampler refuses to be made there, and this refuses to go
    on. A value given is the caller's (world_size=1 for a loader that one
    rank reads whole, a validation set on rank 0)."""
    found = _from_torch()
    if found is None:
        return
    now = (rank if given[0] else found[0], world if given[1] else found[1])
    if now == (rank, world):
        return
    raise ConfigError(
        f"this Loader took rank {rank} of world_size {world} from {where} "
        f"when it was made, but torch.distributed now says rank "
        f"{found[0]} of {found[1]}: make the Loader after "
        "torch.distributed.init_process_group(), or pass rank= and "
        "world_size= to say which shard it reads")


def rank_and_world(rank: Optional[SupportsIndex],
                   world_size: Optional[SupportsIndex]
                   ) -> Tuple[int, int, str]:
    """(rank, world_size, where they came from): the arguments where
    given, else an initialised torch.distributed's, else the launcher's
    environment (torchrun, mpirun, Slurm), else (0, 1)."""
    rank = None if rank is None else whole(rank, "rank")
    world_size = None if world_size is None else whole(world_size,
                                                       "world_size")
    if rank is not None and world_size is not None:
        r, w, where = int(rank), int(world_size), "arguments"
    else:
        found = _from_torch() or _from_environment()
        if found is None and (rank is not None or world_size is not None):
            given, other = (("rank", "world_size") if rank is not None
                            else ("world_size", "rank"))
            alone = ("rank= alone does not say how many shards there are"
                     if rank is not None else "with world_size= alone every "
                     "process would read rank 0's shard")
            raise ConfigError(
                f"{given}= without {other}=, and no torch.distributed or "
                f"launcher to take {other} from: pass both ({alone})")
        r, w, where = found or (0, 1, "default")
        if rank is not None:
            r, where = int(rank), f"rank= and {where}"
        if world_size is not None:
            w, where = int(world_size), f"world_size= and {where}"
    if w < 1:  # no rank fits: the world size is what is wrong
        raise ConfigError(
            f"world_size {w} (from {where}): world_size= is the number of "
            "ranks and must be at least 1 (world_size=1 for a Loader this "
            "process reads whole)")
    if not 0 <= r < w:
        mixed = ("; pass both rank= and world_size= (rank=0, world_size=1 "
                 "for a Loader this process reads whole)"
                 if (rank is None) != (world_size is None) else "")
        raise ConfigError(f"rank {r} of world_size {w} (from {where}): the "
                          f"rank must be 0 to world_size - 1{mixed}")
    return r, w, where


# The local-rank variables the library reads (rf__budget_local_ranks in
# lib/common/cpu-budget.c), each of a pair with a size or a count of tasks
_LOCAL_RANKS = ("RF_LOCAL_RANK", "LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_RANK",
                "MPI_LOCALRANKID", "SLURM_LOCALID")


def unpin_whole(world: int,
                wanted: Dict[str, Any]) -> Optional[Tuple[str, str]]:
    """A Loader of world_size=1 in one rank of several (an initialised
    torch.distributed's), with no launcher's local rank
    (torch.multiprocessing.spawn sets none): a validation set that every
    rank reads whole. The library sees one process alone on the
    node and pins its producers from the mask's first CPU, so every rank
    of the node puts its own on the same CPUs; as for a Loader of the
    job's world size there (resolve_unranked in lib/consumer/resolve.c),
    its producers are left unpinned: sets wanted["pin_producers"] False
    unless the caller gave it, and returns (the cpu_budget line's reason,
    the message to say), else None. A local rank set, the library divides
    the node by it (or says why it cannot)."""
    if world != 1 or "pin_producers" in wanted or any(
            os.environ.get(name) for name in _LOCAL_RANKS):
        return None
    found = _from_torch()
    if found is None or found[1] < 2:
        return None
    rank, size, where = found
    wanted["pin_producers"] = False
    return (f"one of {size} ranks, no local rank",
            f"rank {rank} of {size} ({where}) has no local rank (no "
            "LOCAL_RANK/LOCAL_WORLD_SIZE or other launcher's pair; "
            "torch.multiprocessing.spawn sets none), so this Loader of "
            "world_size=1, which the rank reads whole, takes the CPUs as "
            "if it ran alone on the node, and its producers are not "
            "pinned, lest every rank of the node pin its own to the same "
            "CPUs: set RF_LOCAL_RANK and RF_LOCAL_WORLD_SIZE in each rank "
            "so that the node's ranks share the CPUs out")
