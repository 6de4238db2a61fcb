"""The Loader's arguments checked and turned into the library's numbers:
whole numbers, size=, epochs=, num_workers=, seed=, set_epoch()'s epoch,
and the keywords of the library's table, with errors that name the keyword
to change (and, for an unknown keyword, what to use instead). Nothing here
is public."""

from __future__ import annotations

import difflib
import inspect
import os
from typing import Any, Callable, Dict, Iterable, Optional, Tuple

from .errors import ConfigError, ConfigTypeError
from .params import Param, as_int, by_keyword, param


def whole(value: Any, keyword: str) -> int:
    """A whole number of any kind (params.as_int), else ConfigTypeError
    naming the keyword."""
    number = as_int(value)
    if number is None:
        raise ConfigTypeError(f"{keyword}={value!r} is not a whole number")
    return number


def epoch_number(epoch: Any) -> int:
    """set_epoch()'s argument: a whole number of any kind in the range the
    library runs, else ConfigTypeError (another type) or ConfigError."""
    last = param("start_epoch").maximum
    number = as_int(epoch)
    if number is None or not 0 <= number <= last:
        raise (ConfigTypeError if number is None else ConfigError)(
            f"set_epoch({epoch!r}): an epoch is a whole number from 0 to "
            f"{last}")
    return number


def source_path(source: Any) -> str:
    """source= as an absolute path (str, bytes or os.PathLike, relative
    to the working directory now; a leading ~ is the home folder, as
    ImageFolder(root) takes it), checked as the operating system would
    take it: not empty, and no NUL (which would end the path where the
    library reads it, opening another folder). The library checks its
    length."""
    try:
        path = os.fsdecode(os.fspath(source))
    except TypeError:
        raise ConfigTypeError(
            f"source={source!r}: give the path of a folder of class folders "
            "or of a packed file (str or os.PathLike), or "
            "ringfeed.Synthetic(...)") from None
    if not path:
        raise ConfigError("source='' is empty: give the path of a folder of "
                          "class folders or of a packed file")
    if "\0" in path:
        raise ConfigError(f"source={path!r} holds a NUL character, which no "
                          "path has")
    # torchvision expands it ("~/data/train" from a config file): the
    # library would look for a folder named ~ in the working directory
    path = os.path.expanduser(path)
    # from the directory it is relative to now: the paths in errors
    # (CorruptSample.path) then stay right after an os.chdir(). Joined,
    # not normalised: "a/../b" goes through a as the kernel would.
    return path if os.path.isabs(path) else os.path.join(os.getcwd(), path)


def shown_path(path: str) -> str:
    """A path for a message: whole up to 200 characters, else its start
    and end."""
    return repr(path) if len(path) <= 200 else \
        f"{path[:80]!r}...{path[-80:]!r}"


def epoch_count(epochs: Any) -> Optional[int]:
    """epochs=: None (one epoch per for loop) or a count of them."""
    if epochs is None:
        return None
    count = whole(epochs, "epochs")
    if count < 1:
        raise ConfigError(f"epochs={count}: give None (one epoch per for "
                          "loop) or a count >= 1")
    return count


def worker_count(num_workers: Any) -> int:
    """num_workers= given as a number: producer processes, in the
    library's range (None, the CPU budget, is the caller's to handle)."""
    count = whole(num_workers, "num_workers")
    if count < 1:
        raise ConfigError(
            f"num_workers={count}: ringfeed always decodes in producer "
            "processes, never in the training process; pass None (this "
            "rank's CPU budget) or a count >= 1")
    most = param("producers").maximum
    if count > most:
        raise ConfigError(f"num_workers={count} is out of range: 1..{most}, "
                          "or None for this rank's CPU budget")
    return count


def seed_value(seed: Any) -> Any:
    """seed= as the library's signed 64 bits: an integer type (numpy's
    too) as int, and 2**63..2**64-1 as the negative number with the same
    bits, so that a seed drawn as an unsigned 64-bit number is taken.
    Anything else goes on as it is, for the table's check to name."""
    number = as_int(seed)  # np.uint64, ...
    if number is not None:
        seed = number
    if isinstance(seed, int) and 1 << 63 <= seed < 1 << 64:
        return seed - (1 << 64)
    return seed


def size_pair(size: Any) -> Tuple[int, int]:
    """size= as (height, width): one whole number, or two (a tuple, a
    list, torch.Size, a numpy array of two)."""
    try:
        sides = None if isinstance(size, (str, bytes)) else len(size)
    except TypeError:  # a number, or a numpy array of none (np.array(224))
        sides = None
    if sides is None:
        side = whole(size, "size")
        return side, side
    if sides != 2:
        raise ConfigError(f"size={size!r}: give one side (224) or "
                          "(height, width)")
    try:
        height, width = size[0], size[1]
    except (TypeError, LookupError):  # a set: two sides in no order
        raise ConfigTypeError(f"size={size!r}: give one side (224) or "
                              "(height, width), a sequence") from None
    return whole(height, "size"), whole(width, "size")


def library_values(wanted: Dict[str, Any], height: int, width: int,
                   loader: Callable[..., Any]) -> Dict[str, int]:
    """Python values to the library's numbers, each checked against the
    library's table; errors name the keyword. `loader` (the Loader class)
    gives its own keywords, looked at only to name the nearest ones to an
    unknown keyword."""
    table = by_keyword()
    values = {}
    for keyword, value in wanted.items():
        p = table.get(keyword)
        if p is None:
            own = [name for name in inspect.signature(loader).parameters
                   if name not in ("self", "params")]
            raise TypeError(_unknown_keyword(keyword, table, own))
        values[p.name] = _checked(p, value, keyword)
    shown = height if height == width else (height, width)
    for name, side in (("height", height), ("width", width)):
        values[name] = _side(name, side, shown)  # both from size=
    return values


def _checked(p: Param, value: Any, keyword: str) -> int:
    try:
        return p.convert(value, keyword)
    except TypeError as e:
        raise ConfigTypeError(str(e)) from None
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _side(name: str, side: int, size: Any) -> int:
    """One side of size= (whole already, `size` as given), in the
    library's range."""
    p = param(name)
    if not p.minimum <= side <= p.maximum:
        raise ConfigError(f"size={size!r}: a {name} of {side} is out of "
                          f"range; use {p.minimum}..{p.maximum} pixels")
    return side


# torch DataLoader's keywords that have no namesake here, and what does
# their job (the first thing a user moving a loop over passes)
_DATALOADER_KEYWORDS = {
    "pin_memory": "device='cuda' (batches are uploaded from ringfeed's own "
                  "pinned ring)",
    "pin_memory_device": "device='cuda:N'",
    "sampler": "shuffle=, seed=, and rank=/world_size= for shards",
    "batch_sampler": "batch_size=, shuffle= and drop_last=",
    "collate_fn": "nothing: producers write whole batches",
    "persistent_workers": "nothing: producers live as long as the Loader",
    "prefetch_factor": "slots= (batches in the ring)",
    "worker_init_fn": "nothing: producers are ringfeed's own processes",
    "generator": "seed=",
    "timeout": "batch_timeout_ms=",
    "multiprocessing_context": "start_mode=",
    "in_order": "ordered=",
}


def _unknown_keyword(keyword: str, table: Dict[str, Param],
                     own: Iterable[str]) -> str:
    """The TypeError's text for a keyword that is neither Loader's own nor
    the library's: DataLoader's equivalent, else the nearest names."""
    text = f"Loader() got an unexpected keyword argument {keyword!r}"
    if keyword in _DATALOADER_KEYWORDS:
        return (f"{text}: it is torch DataLoader's; here use "
                f"{_DATALOADER_KEYWORDS[keyword]}")
    renamed = [p.keyword for p in table.values() if p.name == keyword]
    if renamed:  # the library's name of a parameter the Loader renames
        return f"{text}: the library's {keyword} is the Loader's {renamed[0]}="
    names = sorted(set(own) | set(table))
    close = difflib.get_close_matches(keyword, names, n=3, cutoff=0.6)
    if close:
        return f"{text}; did you mean {' or '.join(close)}?"
    return (f"{text}; help(ringfeed.Loader) lists its arguments, and "
            "ringfeed.params() the library's keywords")


def too_few_slots(held: int, slots: int, device: bool,
                  keep_batches: Optional[int]) -> str:
    """What to do when a loop holding `held` slots (device=: 2;
    keep_batches= when given; else 1) would hold every slot of the
    ring."""
    ring = f"the ring has {slots} slot{'s' if slots != 1 else ''}"
    if device:
        holder = ("device= holds 2 slots (the batch handed over and the "
                  "next one's, being copied)")
    elif keep_batches is not None:
        holder = (f"keep_batches={keep_batches} holds {keep_batches} "
                  "slots, one a batch")
    else:
        holder = "the loop holds 1 slot, the batch it is on"
    return (f"{holder}, and {ring}; the producers need one more: pass "
            f"slots={held + 1} or more")
