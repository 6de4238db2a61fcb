"""Where this process stands in a data-parallel job: rank and world size
from an initialised torch.distributed, else from the launcher."""

from __future__ import annotations

import os
from typing import Optional, Tuple

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


def rank_and_world(rank: Optional[int], world_size: Optional[int]
                   ) -> Tuple[int, int, str]:
    """(rank, world_size, where they came from): the arguments where
    given, else an initialised torch.distributed's, else the launcher's
    environment (torchrun, mpirun, Slurm), else (0, 1)."""
    if rank is not None and world_size is not None:
        return rank, world_size, "arguments"
    found = _from_torch() or _from_environment() or (0, 1, "default")
    r, w, where = found
    if rank is not None:
        r, where = rank, f"rank= and {where}"
    if world_size is not None:
        w, where = world_size, f"world_size= and {where}"
    return r, w, where
