"""A Loader's checkpoint: the dict state_dict() returns, and the position
load_state_dict() resumes at. Nothing here is public."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any, Dict, Tuple

from .errors import ConfigError
from .params import as_int, param

STATE_VERSION = 1

# What a checkpoint must share with the Loader that loads it, and the
# keyword to change when it does not.
MUST_MATCH = (("samples", "source"), ("seed", "seed"),
              ("batch_size", "batch_size"), ("shuffle", "shuffle"),
              ("drop_last", "drop_last"), ("shard_pad", "shard_pad"),
              ("transform", "transform"), ("size", "size"))


def keyword_value(values: Dict[str, int], name: str) -> Any:
    """Parameter `name`'s value as the Loader's keyword takes it (a choice
    by name, a flag as a bool), from the library's numbers in `values`."""
    p = param(name)
    value = values.get(name)
    if value is None:
        return p.default
    if p.kind == "choice":
        return p.choices[value - p.minimum]
    if p.kind == "boolean":
        return bool(value)
    return value


def check_ordered(values: Dict[str, int], call: str) -> None:
    """ConfigError naming `call` (state_dict() or load_state_dict()) for
    a Loader of ordered=False: it yields batches as they are ready, so no
    position says which have been consumed."""
    if not values.get("ordered", 1):
        raise ConfigError(f"{call} needs batches in order: drop "
                          "ordered=False")


def make_state(values: Dict[str, int], epoch: int, batch: int,
               per_epoch: int, samples: int, listing: int, rank: int,
               world: int) -> Dict[str, Any]:
    """The dict state_dict() returns: the position of the next batch and
    what that position depends on. `listing` is the library's digest of
    which samples a dataset holds (rf_stats.listing_digest; 0 for a
    Synthetic source)."""
    state = {"version": STATE_VERSION, "epoch": epoch, "batch": batch,
             "batches_per_epoch": per_epoch, "samples": samples,
             "listing": listing, "rank": rank, "world_size": world,
             "size": [keyword_value(values, "height"),
                      keyword_value(values, "width")]}
    for key, _ in MUST_MATCH:
        if key not in state:
            state[key] = keyword_value(values, key)
    return state


def _check_form(state: Any) -> None:
    """ConfigError, naming the entry, for a dict that is not a whole,
    undamaged state_dict()."""
    if not isinstance(state, Mapping):
        raise ConfigError("load_state_dict() takes the dict state_dict() "
                          "returned")
    if state.get("version") != STATE_VERSION:
        raise ConfigError(f"state version {state.get('version')!r} is not "
                          f"{STATE_VERSION}: not a ringfeed Loader's "
                          "state_dict()")
    needed = ["epoch", "batch", "batches_per_epoch", "world_size"]
    missing = [k for k in needed + [k for k, _ in MUST_MATCH]
               if k not in state]
    if missing:
        listed = ", ".join(map(repr, missing))
        raise ConfigError(f"the checkpoint has no {listed}: not a whole "
                          "ringfeed Loader state_dict()")
    for key in needed:
        value = as_int(state[key])  # a numpy integer after a round trip too
        least = 1 if key == "world_size" else 0  # a run has a rank
        if value is None or value < least:
            raise ConfigError(f"the checkpoint's state[{key!r}] is "
                              f"{state[key]!r} ({type(state[key]).__name__}),"
                              f" not a whole number >= {least}: a damaged or "
                              "hand-edited state_dict()")
    if state["batch"] >= max(state["batches_per_epoch"], 1):
        raise ConfigError(f"the checkpoint's state['batch'] is "
                          f"{state['batch']} but its epochs have "
                          f"{state['batches_per_epoch']} batches: a damaged "
                          "or hand-edited state_dict()")
    last = param("start_epoch").maximum
    if state["epoch"] > last:
        raise ConfigError(f"the checkpoint's state['epoch'] is "
                          f"{state['epoch']}, beyond any run (epochs go up "
                          f"to {last}): a damaged or hand-edited "
                          "state_dict()")


def _position_on_other_world(state: Dict[str, Any], mine: Dict[str, Any]
                             ) -> Tuple[int, int]:
    """strict=False: the batch of the same epoch where as many samples had
    been consumed across all ranks, rounded down."""
    epoch, batch = int(state["epoch"]), int(state["batch"])
    consumed = batch * mine["batch_size"] * int(state["world_size"])
    batch = consumed // (mine["batch_size"] * mine["world_size"])
    if batch >= mine["batches_per_epoch"]:
        epoch, batch = epoch + 1, 0
    warnings.warn(
        f"resuming a {state['world_size']}-rank checkpoint on "
        f"{mine['world_size']} ranks: epoch {epoch} from batch {batch}; "
        "samples of this epoch near the cut may repeat or be missed",
        RuntimeWarning, stacklevel=4)
    return epoch, batch


def _check_same_samples(state: Dict[str, Any], mine: Dict[str, Any]) -> None:
    """ConfigError when the checkpoint was made on other samples than the
    Loader's source holds now: another number of them, or as many under
    other names or labels (a file swapped, a class folder renamed), which
    would put other samples at the checkpoint's positions."""
    theirs, now = state["samples"], mine["samples"]
    if theirs != now:
        raise ConfigError(
            f"the checkpoint was made on {theirs} samples and source= now "
            f"holds {now} (files added or removed since?): resume on the "
            "samples the checkpoint was made with, or start the run over "
            "without load_state_dict()")
    listing = state.get("listing")  # none in a checkpoint before 0.2
    if listing is not None and (listing == 0) != (mine["listing"] == 0):
        made, now_on = (("a Synthetic source", "a dataset on disk")
                        if listing == 0 else
                        ("a dataset on disk", "a Synthetic source"))
        raise ConfigError(
            f"the checkpoint was made on {made} and source= is {now_on}: "
            "resume on the source the checkpoint was made with, or start "
            "the run over without load_state_dict()")
    if listing and mine["listing"] and listing != mine["listing"]:
        raise ConfigError(
            f"the checkpoint was made on other samples than source= holds "
            f"now: as many ({now}), but not the same names and labels (a "
            "file renamed, or one added and another removed, or a class "
            "folder renamed since it was made); resume on the samples the "
            "checkpoint was made with, or start the run over without "
            "load_state_dict()")


def _shown(key: str, value: Any) -> str:
    """A value of the checkpoint's or the Loader's for a message: a seed
    the library holds as a negative number also as the unsigned one with
    the same 64 bits (seed= takes both), the form of a seed drawn as an
    unsigned 64-bit number, which the user may have passed: seed=2**64-1
    is -1 in the checkpoint."""
    number = as_int(value) if key == "seed" else None
    if number is not None and -(1 << 63) <= number < 0:
        return f"{number} (or {number + (1 << 64)}: the same 64 bits)"
    return repr(value)


def resume_position(state: Any, mine: Dict[str, Any],
                    strict: bool) -> Tuple[int, int]:
    """(epoch, batch) to resume at from checkpoint `state`, given the
    loading Loader's own state `mine`; ConfigError naming the keyword when
    they do not fit together (see Loader.load_state_dict)."""
    _check_form(state)
    _check_same_samples(state, mine)
    for key, keyword in MUST_MATCH:
        if key == "samples":  # _check_same_samples says more
            continue
        theirs = state[key]
        if isinstance(theirs, tuple):  # size, through a format that
            theirs = list(theirs)      # keeps tuples (torch.save)
        if theirs != mine[key]:
            raise ConfigError(
                f"the checkpoint has {key} {_shown(key, state[key])} but "
                f"this Loader {_shown(key, mine[key])}: resuming needs the "
                f"run's own {keyword}=")
    world = mine["world_size"]
    if state.get("world_size") != world:
        if strict:
            raise ConfigError(
                f"the checkpoint was made with world_size="
                f"{state.get('world_size')} and this Loader has "
                f"world_size={world}: resume with world_size="
                f"{state.get('world_size')}, or pass strict=False to "
                "load_state_dict() to resume near the same place (not "
                "exactly)")
        return _position_on_other_world(state, mine)
    if state.get("batches_per_epoch") != mine["batches_per_epoch"]:
        raise ConfigError(
            f"the checkpoint's epochs have {state.get('batches_per_epoch')} "
            f"batches and this Loader's {mine['batches_per_epoch']}: "
            "resuming needs the run's own source, batch_size, drop_last "
            "and world_size")
    return int(state["epoch"]), int(state["batch"])
