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
from typing import Any, Callable, List, Optional

from .errors import ConfigError, RingfeedError


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
