"""dtype= and mean=/std=: how a batch's uint8 pixels become the tensor
asked for, on the CPU or the GPU alike.

Arguments are read as torchvision users give them: a torch dtype, or its
name ('float16'), or numpy's; mean=/std= as one value per channel or one
number for all (as Normalize(0.5, 0.5)), in [0, 1] units (as ToTensor +
Normalize). Every check runs at construction, so a mistake is raised by
Loader() and never by the first batch.
"""

from __future__ import annotations

import warnings
from typing import Any, Callable, Dict, Tuple

from .errors import ConfigError, ConfigTypeError


# What to give instead of a NaN, an infinity or a number beyond float32
_GIVE_FINITE = ("give finite numbers float32 holds (every batch would be "
                "NaN or infinite)")


def _check_finite(keyword: str, values: Any, torch: Any) -> None:
    """ConfigError naming the keyword and the channel for a value that is
    not a finite float32 (NaN, an infinity, or beyond float32's range,
    where the batches are computed): every pixel of every batch would
    come out NaN or infinite, with no error."""
    wrong = (~torch.isfinite(values.to(torch.float32))).nonzero()
    if len(wrong):
        channel = int(wrong[0])
        raise ConfigError(
            f"{keyword}= holds {float(values[channel])!r} for channel "
            f"{channel}: {_GIVE_FINITE}")


def _as_tensor(keyword: str, given: Any, torch: Any) -> Any:
    """mean= or std= (`keyword`, given as `given`) as a float64 tensor on
    the CPU, else a ConfigError naming the keyword: for what is no number,
    and for a number float64 cannot hold (an int such as 10**400, which
    torch refuses with a bare OverflowError)."""
    try:
        # as_tensor: a tensor given is taken as it is, without torch's
        # warning that copying one with torch.tensor() is slow
        return torch.as_tensor(given, dtype=torch.float64).cpu()
    except OverflowError:
        raise ConfigError(f"{keyword}= holds a number beyond float32's "
                          f"range: {_GIVE_FINITE}") from None
    except (TypeError, ValueError, RuntimeError):
        raise ConfigError(f"{keyword}={given!r}: give a sequence of "
                          "numbers, one per channel, or a number for every "
                          "channel") from None


def _per_channel(mean: Any, std: Any, channels: int,
                 torch: Any) -> Tuple[Any, Any]:
    """mean= and std= as float64 tensors of one value per channel, each
    given as a sequence (a tensor, an array) of one per channel or as a
    number (a 0-d array or tensor too) for every channel, as torchvision's
    Normalize(0.5, 0.5) takes it; else ConfigError saying which (see
    _as_tensor for what is no number)."""
    mean_t = _as_tensor("mean", mean, torch)
    std_t = _as_tensor("std", std, torch)
    if mean_t.dim() > 1 or std_t.dim() > 1:
        raise ConfigError(f"mean={mean!r} and std={std!r}: give flat "
                          "sequences of numbers, one per channel, or a "
                          "number for every channel")
    counts = {keyword: int(t.shape[0]) for keyword, t
              in (("mean", mean_t), ("std", std_t)) if t.dim() == 1}
    if len(set(counts.values())) == 2:
        raise ConfigError(f"mean= gives {counts['mean']} value(s) and std= "
                          f"{counts['std']}: give one of each per channel "
                          f"({channels} here)")
    for keyword, count in counts.items():
        if count != channels:
            said = ("mean= and std= give" if len(counts) == 2
                    else f"{keyword}= gives")
            raise ConfigError(f"{said} {count} value(s) but the images "
                              f"have {channels} channel(s) (channels=): "
                              "give one value per channel, or a number "
                              "for every channel")
    if mean_t.dim() == 0:
        mean_t = mean_t.expand(channels)
    if std_t.dim() == 0:
        std_t = std_t.expand(channels)
    return mean_t, std_t


# The dtypes the Loader converts to, by name as torch names them
# (str(torch.float32) is "torch.float32"; "half" is float16) and numpy
# its own, each with the torch dtype's name: the one list of them, for a
# torch dtype, a name and a numpy dtype alike
_DTYPE_NAMES = {"uint8": "uint8", "float16": "float16", "half": "float16",
                "bfloat16": "bfloat16", "float32": "float32",
                "float": "float32", "float64": "float64",
                "double": "float64"}
_USE = ("use torch.uint8 or a float dtype (torch.float32, float16, "
        "bfloat16, float64), by name too ('float32') or numpy's "
        "(np.float32)")


def _dtype_name(dtype: Any, torch: Any) -> str:
    """The name dtype= goes by: a torch dtype's, a string's own (without
    "torch."), a numpy dtype's; ConfigError for a string that names no
    dtype, ConfigTypeError for what is no dtype, both naming dtype=."""
    if isinstance(dtype, torch.dtype):
        return str(dtype)[len("torch."):]
    if isinstance(dtype, str):
        name = dtype[len("torch."):] if dtype.startswith("torch.") else dtype
        if name not in _DTYPE_NAMES and not isinstance(
                getattr(torch, name, None), torch.dtype):
            raise ConfigError(f"dtype={dtype!r} is not a name of a dtype: "
                              f"{_USE}")
        return name
    import numpy as np
    if not (isinstance(dtype, np.dtype) or (
            isinstance(dtype, type) and issubclass(dtype, np.generic))):
        raise ConfigTypeError(f"dtype={dtype!r} is not a dtype: {_USE}")
    return str(np.dtype(dtype).name)  # numpy's names are torch's


def torch_dtype(dtype: Any, torch: Any) -> Any:
    """dtype= as a torch dtype (None stays None): a torch dtype, a name
    torch uses ('float32', 'half', 'torch.bfloat16') or a numpy dtype
    (np.float32, np.dtype('float16')) of one the Loader converts to, as
    that torch dtype. Another dtype (torch.int32, 'int32', np.int32, a
    float8) is a ConfigError saying the same whatever its form; see
    _dtype_name for the rest."""
    if dtype is None:
        return None
    name = _dtype_name(dtype, torch)
    if name not in _DTYPE_NAMES:
        raise ConfigError(f"dtype={dtype!r} is not supported: {_USE}")
    return getattr(torch, _DTYPE_NAMES[name])


def _scale_and_shift(mean: Any, std: Any, channels: int,
                     torch: Any) -> Tuple[Any, Any]:
    """(x/255 - mean) / std as x * scale + shift, one fused pass per
    batch: the float32 scale and shift per channel, mean= and std= checked
    (see _per_channel and _check_finite), and warned about when they look
    like 0-255 units."""
    mean_t, std_t = _per_channel(mean, std, channels, torch)
    _check_finite("mean", mean_t, torch)
    _check_finite("std", std_t, torch)
    given = mean_t, std_t  # float64: the values as given, for messages
    mean_t, std_t = mean_t.to(torch.float32), std_t.to(torch.float32)
    if bool((std_t == 0).any()):
        raise ConfigError("std= must not hold 0")
    if bool((mean_t.abs() > 1).any() or (std_t.abs() > 1).any()):
        warnings.warn(
            "mean= and std= hold values above 1, like 0-255 "
            "units, but the images are scaled to [0, 1] before they are "
            "normalised (as torchvision's ToTensor + Normalize): give them "
            "divided by 255, e.g. mean=(0.485, 0.456, 0.406)",
            UserWarning, stacklevel=4)  # Loader()'s caller
    scale = 1.0 / (255.0 * std_t)
    shift = -mean_t / std_t
    # pixels 0 and 255 (those between fall between), as convert() does
    white = torch.addcmul(shift, torch.full_like(scale, 255.0), scale)
    ends = torch.stack([shift, white])
    overflow = (~torch.isfinite(ends).all(0)).nonzero()
    if len(overflow):  # each finite, the result not: std= tiny, mean= huge
        c = int(overflow[0])
        raise ConfigError(
            f"mean= {float(given[0][c])!r} and std= {float(given[1][c])!r} "
            f"for channel {c}: (x - mean) / std overflows float32; give "
            "std= in [0, 1] units, near the pixels' spread")
    return scale, shift


def make_converter(dtype: Any, mean: Any, std: Any, channel_dim: int,
                   channels: int) -> Callable[[Any], Any]:
    """A function from a uint8 tensor to `dtype`: uint8 as it is; a float
    dtype scaled to [0, 1] (torchvision's ToTensor) and, with mean and
    std, normalised per channel ((x - mean) / std, in those units; a
    number, as torchvision's Normalize(0.5, 0.5) takes it, is that value
    for every channel). Works on CPU and GPU tensors alike."""
    import torch
    dtype = torch_dtype(dtype, torch)
    if dtype is None or dtype == torch.uint8:
        if mean is not None or std is not None:
            raise ConfigError("mean= and std= need a float dtype= "
                              "(torch.float32, float16 or bfloat16)")
        return lambda x: x
    if (mean is None) != (std is None):
        raise ConfigError("give mean= and std= together")
    if mean is None:
        return lambda x: x.to(dtype).div_(255.0)
    scale, shift = _scale_and_shift(mean, std, channels, torch)
    shape = [1, 1, 1, 1]
    shape[channel_dim] = -1
    cache: Dict[Any, Tuple[Any, Any]] = {}

    def convert(x: Any) -> Any:
        key = x.device
        if key not in cache:
            cache[key] = (scale.view(shape).to(x.device),
                          shift.view(shape).to(x.device))
        s, b = cache[key]
        if s.shape[channel_dim] != x.shape[channel_dim]:
            raise ConfigError(f"mean= and std= have {s.shape[channel_dim]} "
                              f"values but the images {x.shape[channel_dim]} "
                              "channels")
        # in float32, then to dtype: float16/bfloat16 keep the rounding of
        # one conversion, as torchvision's Normalize on a float32 tensor
        return torch.addcmul(b, x.to(torch.float32), s).to(dtype)

    return convert
