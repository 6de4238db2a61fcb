"""device="cuda": batches go from the shared ring to the GPU in one DMA.

One CUDA runtime only: torch's. The ring (rf_loader_arena()) is registered
as pinned memory with torch's own cudaHostRegister, the copy is torch's
non-blocking copy_ on a side stream (from registered memory that is one
cudaMemcpyAsync, a DMA with no staging copy), and the conversion to the
dtype asked for and the normalisation run on that stream too. ringfeed's
C CUDA consumer (cuda/) links the CUDA runtime the library was built
with, which may not be torch's, and the package never loads it: both
would share the driver's context, but each runtime keeps its own error
state and current device (an error one leaves behind surfaces in the
other's next call), ringfeed's may need a newer driver than torch's, and
its device buffers would not come from torch's allocator, so the tensor
would not be torch's and record_stream could not protect it.

Ordering:
- the copy and conversion do not wait for the caller's stream: they
  overlap with the step it runs (the buffers they write are new
  allocations of the side stream, which torch's allocator keeps apart);
- the caller's current stream waits for the batch's `ready` event before
  it can read the tensor (Stream.wait_event: no host stall);
- the tensor is recorded on the caller's stream (record_stream), so torch's
  allocator reuses its memory only after that stream has passed the step
  that used it; it belongs to torch from then on;
- a ring slot goes back to the producers only once its copy has finished
  (`copied` event), never while the DMA may still read it.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Optional, Tuple

from .errors import ConfigError, ConfigTypeError, RingfeedError

def check_device(device: Any) -> "Any":
    """The torch.device for `device`, or ConfigError when torch, CUDA or
    that GPU is missing: raised at construction, not at the first batch."""
    try:
        import torch
    except ImportError:
        raise ConfigError(f"device={device!r} needs PyTorch with CUDA; "
                          "torch is not installed (use device=None for CPU "
                          "tensors)") from None
    try:
        dev = torch.device(device)
    except (RuntimeError, TypeError) as e:
        raise ConfigError(f"device={device!r} is not a device: {e}; use "
                          "None (CPU), 'cuda' or 'cuda:N'") from None
    if dev.type != "cuda":
        raise ConfigError(f"device={device!r}: only None (CPU) and "
                          "'cuda' or 'cuda:N' are supported")
    if not torch.cuda.is_available():
        raise ConfigError(f"device={device!r} but torch sees no usable CUDA "
                          "GPU (torch.cuda.is_available() is False: no GPU, "
                          "no driver, or a CPU-only torch build); use "
                          "device=None")
    if getattr(torch.cuda, "_is_in_bad_fork", lambda: False)():
        raise ConfigError(f"device={device!r} in a child of fork() of a "
                          "process that had started CUDA, which CUDA cannot "
                          "do; start this process with the 'spawn' start "
                          "method (torch.multiprocessing)")
    index = dev.index if dev.index is not None else torch.cuda.current_device()
    if index >= torch.cuda.device_count():
        raise ConfigError(f"device={device!r} but torch sees "
                          f"{torch.cuda.device_count()} GPU(s)")
    return torch.device("cuda", index)


@dataclass
class Pending:
    """A batch on its way to the GPU."""

    out: Any  # the tensor the caller gets
    copied: Any  # torch.cuda.Event: the DMA from the slot is done
    ready: Any  # torch.cuda.Event: converted, the caller may read it


class Uploader:
    """Registers the ring with CUDA and moves batches to one device."""

    def __init__(self, device: Any, base: int, size: int,
                 convert: Optional[Callable[[Any], Any]],
                 before_unmap: List[Optional[Callable[[], None]]]) -> None:
        """before_unmap: the ring's, which close() is put in while the ring
        is registered, so that it runs before any unmapping."""
        import torch
        self._torch = torch
        self.device = device
        self._convert = convert
        self._base, self._size = base, size
        self._registered = False
        self._before_unmap = before_unmap
        with torch.cuda.device(device):
            self.stream = torch.cuda.Stream(device)
            cudart = torch.cuda.cudart()
            error = cudart.cudaHostRegister(base, size, 0)  # a cudaError
            rc = int(error)
            if rc != 0:
                text = cudart.cudaGetErrorString(error)
                _clear_error(torch)
                advice = _REGISTER_ADVICE.get(rc, _LESS)
                raise RingfeedError(
                    f"cudaHostRegister of the ring ({size} bytes) failed: "
                    f"{text} (CUDA error {rc}); {advice}")
            self._registered = True
            before_unmap[0] = self.close

    def launch(self, host_view: Any) -> Pending:
        """Queues the copy of one batch (a CPU tensor viewing its slot) and
        its conversion on the side stream; returns at once."""
        torch = self._torch
        with torch.cuda.stream(self.stream):
            raw = torch.empty(host_view.shape, dtype=torch.uint8,
                              device=self.device)
            raw.copy_(host_view, non_blocking=True)
            # the host waits on it to give the slot back: sleep, not spin
            # (a spinning host thread takes a CPU from the producers)
            copied = torch.cuda.Event(blocking=True)
            copied.record(self.stream)
            out = self._convert(raw) if self._convert else raw
            ready = torch.cuda.Event()
            ready.record(self.stream)
        return Pending(out, copied, ready)

    def hand_over(self, pending: Pending) -> Any:
        """The batch's tensor, ordered on the caller's current stream."""
        caller = self._torch.cuda.current_stream(self.device)
        caller.wait_event(pending.ready)
        pending.out.record_stream(caller)
        return pending.out

    def close(self) -> None:
        """Waits for every copy and unregisters the ring (before the
        loader unmaps it). Unregisters even when the wait raises (a CUDA
        error of the caller's, say), so that the ring is never unmapped
        while registered, and raises that error afterwards."""
        if not self._registered:
            return
        torch = self._torch
        try:
            self.stream.synchronize()
        finally:
            with torch.cuda.device(self.device):
                rc = int(torch.cuda.cudart().cudaHostUnregister(self._base))
                if rc != 0:  # on this device: not a context on GPU 0
                    _clear_error(torch)
            self._registered = False
            self._before_unmap[0] = None
            if rc != 0:
                warnings.warn(f"cudaHostUnregister of the ring failed (CUDA "
                              f"error {rc}); it is unmapped all the same",
                              RuntimeWarning, stacklevel=2)


# What to change when cudaHostRegister fails, by its error.
_LESS = ("lower slots= or batch_size= (the ring is slots x batch bytes, all "
         "of it pinned)")
_REGISTER_ADVICE = {
    712: "the ring is pinned already: do not cudaHostRegister it yourself",
    801: "this platform cannot pin memory CUDA did not allocate; use "
         "device=None and move the batches yourself",
}


def _clear_error(torch: Any) -> None:
    """Takes the error a failed cudart call left in torch's runtime, which
    would otherwise be raised by the next unrelated torch kernel. torch's
    cudart binding has no cudaGetLastError; a kernel launch reads and
    clears the error (torch checks it after every launch)."""
    try:
        torch.ones(1, device="cuda")
    except RuntimeError:
        pass


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
            f"{channel}: give finite numbers float32 holds (every batch "
            "would be NaN or infinite)")


def _per_channel(mean: Any, std: Any, channels: int,
                 torch: Any) -> Tuple[Any, Any]:
    """mean= and std= as float64 tensors of one value per channel, each
    given as a sequence (a tensor, an array) of one per channel or as a
    number (a 0-d array or tensor too) for every channel, as torchvision's
    Normalize(0.5, 0.5) takes it; else ConfigError saying which."""
    try:
        # as_tensor: a tensor given is taken as it is, without torch's
        # warning that copying one with torch.tensor() is slow
        mean_t = torch.as_tensor(mean, dtype=torch.float64).cpu()
        std_t = torch.as_tensor(std, dtype=torch.float64).cpu()
    except (TypeError, ValueError, RuntimeError):
        raise ConfigError(f"mean={mean!r} and std={std!r}: give sequences "
                          "of numbers, one per channel, or a number for "
                          "every channel") from None
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


# dtype= by name, as torch names its dtypes (str(torch.float32) is
# "torch.float32") and numpy its own: those the Loader converts to, each
# with the torch dtype's name
_DTYPE_NAMES = {"uint8": "uint8", "float16": "float16", "half": "float16",
                "bfloat16": "bfloat16", "float32": "float32",
                "float": "float32", "float64": "float64",
                "double": "float64"}
_USE = ("use torch.uint8 or a float dtype (torch.float32, float16, "
        "bfloat16, float64), by name too ('float32') or numpy's "
        "(np.float32)")


def torch_dtype(dtype: Any, torch: Any) -> Any:
    """dtype= as a torch dtype (None stays None): a torch dtype as it is; a
    name torch uses ('float32', 'half', 'torch.bfloat16') or a numpy dtype
    (np.float32, np.dtype('float16')) of one the Loader converts to as
    that torch dtype. Another dtype is a ConfigError, anything else a
    ConfigTypeError, both naming dtype=."""
    if dtype is None or isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str):
        name = dtype[len("torch."):] if dtype.startswith("torch.") else dtype
        if name not in _DTYPE_NAMES:
            known = isinstance(getattr(torch, name, None), torch.dtype)
            what = "not supported" if known else "not a name of a dtype"
            raise ConfigError(f"dtype={dtype!r} is {what}: {_USE}")
    else:
        import numpy as np
        if not (isinstance(dtype, np.dtype) or (
                isinstance(dtype, type) and issubclass(dtype, np.generic))):
            raise ConfigTypeError(f"dtype={dtype!r} is not a dtype: {_USE}")
        name = np.dtype(dtype).name
        if name not in _DTYPE_NAMES:  # numpy's names are torch's
            raise ConfigError(f"dtype={dtype!r} is not supported: {_USE}")
    return getattr(torch, _DTYPE_NAMES[name])


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
    if not dtype.is_floating_point:
        raise ConfigError(f"dtype={dtype} is not supported: use torch.uint8 "
                          "or a float dtype (float32, float16, bfloat16; "
                          "float64 works too)")
    if (mean is None) != (std is None):
        raise ConfigError("give mean= and std= together")
    if mean is None:
        return lambda x: x.to(dtype).div_(255.0)
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
            UserWarning, stacklevel=3)  # Loader()'s caller
    # (x/255 - mean) / std == x * scale + shift, one fused pass per batch
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
