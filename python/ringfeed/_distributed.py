"""Where this process stands in a data-parallel job: rank and world size
from an initialised torch.distributed, else from the launcher."""

from __future__ import annotations

import os
from typing import Optional, SupportsIndex, Tuple

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
    if w < 1 or not 0 <= r < w:
        mixed = ("; pass both rank= and world_size= (rank=0, world_size=1 "
                 "for a Loader this process reads whole)"
                 if (rank is None) != (world_size is None) else "")
        raise ConfigError(f"rank {r} of world_size {w} (from {where}): the "
                          f"rank must be 0 to world_size - 1{mixed}")
    return r, w, where
