"""One run of the C loader: the producers, the ring mapped as one array,
and the batches the loop holds; and the Loader's arguments as the
library's configuration. Nothing here is public."""

from __future__ import annotations

import collections
import ctypes
import errno
import os
import threading
import weakref
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

import numpy as np

from . import _capi
from .batch import Batch
from ._arguments import shown_path
from ._lifetime import keep_interrupt
from .errors import (ConfigError, LoaderClosed, RingfeedError,
                     SampleFields, from_code)
from .params import param, user_terms
from .source import Synthetic

try:
    import torch
except ImportError:  # numpy arrays instead
    torch = None  # type: ignore[assignment]


def _unmap_if_kept(base: int, size: int, kept: List[bool],
                   before: List[Optional[Callable[[], None]]]) -> None:
    """The ring array's finalizer: unmaps the ring if the library handed
    the mapping over (else rf_loader_close() unmapped it). `before[0]`,
    when set, runs first: the device uploader's close, which waits for its
    copies and unregisters the ring, when a Loader in a reference cycle is
    collected and Python runs this before the Loader's __del__. A Ctrl-C
    here is kept for the next batch (_lifetime.keep_interrupt)."""
    try:
        if before[0] is not None:
            try:
                before[0]()
            except Exception:  # a CUDA error: unmapped all the same
                pass
        if kept[0]:
            _capi.munmap(base, size)
    except KeyboardInterrupt:  # after munmap: the signal waits for a bytecode
        keep_interrupt()


class _Held:
    """A batch the loop holds: the C batch to release, and what was built
    on it."""

    __slots__ = ("c_batch", "batch", "pending")

    def __init__(self, c_batch: _capi.Batch, batch: Batch,
                 pending: Any = None) -> None:
        self.c_batch, self.batch, self.pending = c_batch, batch, pending


class _Run:
    """One rf_loader: the producers, the ring, and the batches held.

    Owns the C loader; closing it stops the producers. The ring's memory is
    handed to a finalizer (rf_loader_keep_arena) so that a tensor that
    outlives the run reads stale pixels instead of faulting.
    """

    def __init__(self, cfg: "_Config", start_epoch: int, start_batch: int,
                 on_message: Callable[[str], None]) -> None:
        self.handle = ctypes.c_void_p()
        self._pid = os.getpid()  # the process whose producers these are
        self.ring: Any = None
        # whether the ring's mapping is the array's (rf_loader_keep_arena)
        self._arena_kept = [False]
        # what must run before the ring is unmapped (_unmap_if_kept): the
        # device uploader's close while it has the ring registered
        self.before_unmap: List[Optional[Callable[[], None]]] = [None]
        # set by interrupt(): next() raises LoaderClosed instead of going on
        self.closing = False
        # interrupt() may come from any thread: it and close() take this,
        # so that it never reaches a handle rf_loader_close() freed
        self._guard = threading.Lock()
        # What on_message raised: ctypes would print and drop it; the loop
        # raises it at its next batch instead (a callback may mean to stop
        # the run, at a respawn say).
        self.message_error: Optional[BaseException] = None
        # The callback refers to the run weakly: a strong reference would
        # make a cycle (run -> callback -> run), and the ring it holds
        # would stay mapped after close() until the cyclic collector ran,
        # a ring per closed loader or restarted loop.
        me = weakref.ref(self)

        def deliver(_user: Any, text: bytes) -> None:
            try:
                on_message(user_terms(text.decode(errors="replace")))
            except BaseException as e:
                run = me()
                if run is not None and run.message_error is None:
                    run.message_error = e

        self._message_fn = _capi.MESSAGE_FN(deliver)
        self._unpinned = cfg.unpinned
        c = cfg.build(start_epoch, start_batch, self._message_fn)
        # From the open on, any exception closes the loader: Ctrl-C while a
        # slow file system is listed lands here, and nothing else holds
        # the handle yet (the library writes it before it returns).
        try:
            err = ctypes.c_void_p()
            rc = _capi.lib().rf_loader_open(ctypes.byref(self.handle), c,
                                            ctypes.byref(err))
            detail = _capi.take_message(err)
            if rc == _capi.E_FORK_UNSAFE:  # start_mode="fork" here
                raise ConfigError(user_terms(detail.decode(errors="replace")),
                                  rc)
            if rc < 0:
                raise from_code(rc, detail)
            self._attach(start_epoch, start_batch)
            if cfg.unpinned is not None:  # said as the library's are
                deliver(None, cfg.unpinned[1].encode())
        except BaseException:
            if self.handle:
                if self.ring is not None and not self._arena_kept[0]:
                    # cut short between the array and the hand-over: hand
                    # it over now (idempotent), or the array's finalizer
                    # would leave the mapping, or close() would unmap it
                    # under the array
                    try:
                        self._hand_over_arena()
                    except Exception:  # the array goes with this run
                        pass
                _capi.lib().rf_loader_close(self.handle)
                self.handle = ctypes.c_void_p()
            raise

    def _attach(self, start_epoch: int, start_batch: int) -> None:
        self.stats = _capi.Stats()
        _capi.lib().rf_loader_stats(self.handle, ctypes.byref(self.stats))
        # the sequence number of the batch next() hands out next
        self.next_seq = (start_epoch * self.stats.batches_per_epoch
                         + start_batch)
        self.held: Deque[_Held] = collections.deque()
        self._map_arena()

    @property
    def arena(self) -> Any:
        """The whole ring as one tensor (tests ask it is_pinned()); batches
        are not views of it, see Loader._wrap()."""
        return torch.from_numpy(self.ring) if torch is not None else self.ring

    def _map_arena(self) -> None:
        """self.ring: one numpy array over the whole ring, made once; each
        batch is a slice of it. The memory stays mapped until the last view
        is gone: the array's finalizer unmaps it, once the library has
        handed the mapping over. The array and its finalizer come first,
        so that an exception (Ctrl-C) at any point leaves the mapping to
        exactly one owner (see __init__)."""
        base, size = ctypes.c_void_p(), ctypes.c_size_t()
        lib = _capi.lib()
        rc = lib.rf_loader_arena(self.handle, ctypes.byref(base),
                                 ctypes.byref(size))
        if rc < 0:
            raise from_code(rc, lib.rf_loader_error(self.handle))
        if not base.value:
            raise RingfeedError("the library gave no ring to map")
        self.base, self.size = base.value, size.value
        ring = array = None
        try:
            ring = (ctypes.c_uint8 * self.size).from_address(self.base)
            array = np.frombuffer(memoryview(ring), dtype=np.uint8)
            unmap = weakref.finalize(array, _unmap_if_kept, self.base,
                                     self.size, self._arena_kept,
                                     self.before_unmap)
            # Not at exit: finalizers run there before atexit's loader
            # close, which may still have to wait for a copy from the ring
            # and unregister it; the process's exit unmaps it anyway.
            unmap.atexit = False
            self.ring = array
        except BaseException:
            # not left in the traceback's frame over memory that
            # rf_loader_close() is about to unmap
            ring = array = None
            raise
        self._hand_over_arena()

    def _hand_over_arena(self) -> None:
        """rf_loader_keep_arena(): the mapping outlives close(), for the
        array's finalizer to unmap. Idempotent."""
        lib = _capi.lib()
        rc = lib.rf_loader_keep_arena(self.handle)
        if rc < 0:
            raise from_code(rc, lib.rf_loader_error(self.handle))
        self._arena_kept[0] = True

    def next(self) -> Optional[_capi.Batch]:
        """The next C batch, or None at the end; raises on failure. A
        signal (Ctrl-C) returns control to Python between waits, so that
        KeyboardInterrupt is raised here at once."""
        if self.message_error is not None:
            error, self.message_error = self.message_error, None
            raise error
        c_batch = _capi.Batch()
        lib = _capi.lib()
        while True:
            if self.closing or not self.handle:
                raise LoaderClosed(
                    "the Loader was closed (by close(), in this thread or "
                    "another, or at interpreter exit); open a new one")
            rc = lib.rf_loader_next(self.handle, ctypes.byref(c_batch))
            if self.closing:  # the batch, if any, goes with the loader
                continue
            if rc == 1:
                self.next_seq = max(self.next_seq, c_batch.sequence + 1)
                return c_batch
            if rc == 0:
                return None
            if rc != -errno.EINTR:
                raise from_code(rc, lib.rf_loader_error(self.handle),
                                self.failed_sample())

    def failed_sample(self) -> Optional[SampleFields]:
        """rf_loader_failed_sample(): the sample whose failure ended the
        run, its fields apart, or None."""
        f = _capi.FailedSample()
        if _capi.lib().rf_loader_failed_sample(self.handle,
                                               ctypes.byref(f)) < 0:
            return None
        reason = user_terms(f.reason.decode(errors="replace"))
        return (int(f.index), os.fsdecode(f.path) or None,
                os.fsdecode(f.name) or None, reason)

    def interrupt(self) -> None:
        """From another thread, or a callback inside next(): next() stops
        waiting and raises LoaderClosed, so that the loader can be closed
        once that thread has left the library (rf_loader_interrupt())."""
        self.closing = True
        with self._guard:
            if self.handle:
                _capi.lib().rf_loader_interrupt(self.handle)

    def release(self, held: _Held) -> None:
        """Gives the batch's slot back. A CPU batch's views are released
        with it; a GPU batch's tensor is torch's and stays valid, so the
        slot can go back as soon as its copy is done."""
        if held.pending is None:
            held.batch._release()
        if not self.handle:  # closed: every slot went with it
            return
        if held.pending is not None:
            held.pending.copied.synchronize()  # the DMA read the slot
        _capi.lib().rf_loader_release(self.handle, ctypes.byref(held.c_batch))

    def counters(self) -> Dict[str, Any]:
        """rf_loader_stats(): the counters now, by Loader.stats()'s names
        (cpu_budget aside)."""
        s = _capi.Stats()
        rc = _capi.lib().rf_loader_stats(self.handle, ctypes.byref(s))
        if rc < 0:
            raise from_code(rc, "rf_loader_stats() failed")
        return {"batches": s.batches, "samples": s.samples, "bytes": s.bytes,
                "wait_s": s.wait_ns / 1e9, "elapsed_s": s.elapsed_ns / 1e9,
                "producers": s.producers, "slots": s.slots,
                "slots_at_producers": s.slots_at_producers,
                "slots_ready": s.slots_ready,
                "slots_with_user": s.slots_with_user,
                "slots_free": s.slots_free,
                "failed_samples": s.failed_samples, "respawns": s.respawns,
                "batches_per_epoch": s.batches_per_epoch,
                "samples_in_dataset": s.dataset_samples, "rank": s.rank,
                "world_size": s.world_size}

    def cpu_budget(self) -> str:
        """rf_loader_cpu_budget()'s line, in Python's terms; where the
        Loader itself turned pinning off (_distributed.unpin_whole), with
        its reason in place of the one the library was given
        (pin_producers=False, whatever words the library has for it)."""
        out = ctypes.create_string_buffer(1024)  # RF_CPU_BUDGET_MAX
        _capi.lib().rf_loader_cpu_budget(self.handle, out, len(out))
        line = user_terms(out.value.decode(errors="replace"))
        if self._unpinned is None:
            return line
        # the pinning ends the line (describe() in lib/common/cpu-budget.c),
        # ", not pinned (REASON)" where the library would have pinned; a
        # bare ", not pinned" where it would not have: then nothing to say
        head, unpinned, _ = line.rpartition(", not pinned (")
        if not unpinned:
            return line
        return f"{head}, not pinned ({self._unpinned[0]})"

    def class_names(self) -> Optional[List[str]]:
        """rf_loader_class_name() of each label: the names of the listing
        the producers read; None when the library kept no listing open
        (few fds were free), and the caller opens the path instead."""
        out = ctypes.create_string_buffer(4096)
        names: List[str] = []
        while True:
            rc = _capi.lib().rf_loader_class_name(self.handle, len(names),
                                                  out, len(out))
            if rc == -errno.ERANGE:
                return names
            if rc == -errno.ENODATA:
                return None
            # a pack's label with no named sample: its number, as
            # source.class_names() gives it
            names.append(os.fsdecode(out.value) if rc == 0
                         else str(len(names)))

    def sample_errors(self) -> List[Tuple[int, int, str]]:
        """rf_loader_sample_errors(): (index, epoch, message) of the first
        1,024 samples that failed."""
        errors = (_capi.SampleError * 1024)()
        n = _capi.lib().rf_loader_sample_errors(self.handle, errors, 1024)
        return [(e.index, e.epoch, user_terms(e.message.decode(
            errors="replace"))) for e in errors[:min(n, 1024)]]

    def release_beyond(self, keep: int) -> None:
        """Gives back the oldest held batches until `keep` are held."""
        while len(self.held) > keep:
            self.release(self.held.popleft())

    def free_child_copy(self) -> None:
        """In a child of fork(): frees this process's copy of the loader
        only (the producers and ring are the parent's)."""
        with self._guard:
            handle, self.handle = self.handle, ctypes.c_void_p()
        if handle:
            _capi.lib().rf_loader_close(handle)

    def __del__(self) -> None:
        # A run dropped unclosed: a Ctrl-C that landed as its __init__
        # returned, before the Loader stored it, where nothing else holds
        # the handle (the producers ran on until the process ended).
        if not getattr(self, "handle", None):
            return
        try:
            if os.getpid() != self._pid:  # a child of fork(): its copy
                self.free_child_copy()
            else:
                self.close()
        except KeyboardInterrupt:  # Python would drop it here
            keep_interrupt()
        except Exception:  # interpreter shutdown: modules may be gone
            pass

    def close(self) -> None:
        """Stops the producers. Waits for the copies still reading the ring
        first, but closes whatever those waits raise (a CUDA error of the
        caller's): producers must not outlive their loader."""
        if not self.handle:
            return
        try:
            for held in self.held:
                if held.pending is None:
                    held.batch._release()
                else:
                    held.pending.copied.synchronize()
        finally:
            self.held.clear()
            with self._guard:
                handle, self.handle = self.handle, ctypes.c_void_p()
            _capi.lib().rf_loader_close(handle)
            # the ring is unmapped now, or when the last view the caller
            # kept is gone
            self.ring = None


class _Config:
    """The Loader's arguments as the library's parameters: one rf_config
    for the Loader's life, freed by close() or when the Loader is
    collected. At each restart it takes over the run that ends
    (continue_from()), so that every later run reads the samples the first
    listed, as torchvision's ImageFolder lists a folder once, and the skip
    policy counts over the Loader's whole run."""

    def __init__(self, source: Any, values: Dict[str, int],
                 unpinned: Optional[Tuple[str, str]] = None) -> None:
        self.source = source
        self.values = values  # parameter name -> int64
        # (why, what to say) where the Loader turned pinning off itself
        # (_distributed.unpin_whole), which each run says and shows
        self.unpinned = unpinned
        self._c = 0
        self._free: Optional[weakref.finalize] = None

    def build(self, start_epoch: int, start_batch: int,
              message_fn: Any) -> int:
        """The configuration for a run from this position, reporting to
        message_fn; owned by this object (valid until close())."""
        lib = _capi.lib()
        c = self._c or self._create()
        values = dict(self.values, start_epoch=start_epoch,
                      start_batch=start_batch)
        if isinstance(self.source, Synthetic):
            values["source"] = param("source").convert(
                "synthetic-jpeg" if self.source.jpeg else "synthetic",
                "source")
            values["samples"] = self.source.samples
            values["classes"] = self.source.classes
        for name, value in values.items():
            if lib.rf_config_set(c, param(name).number, value) < 0:
                raise ConfigError(user_terms(lib.rf_config_error(c).decode()))
        lib.rf_config_set_message_handler(c, message_fn, None)
        return c

    def _create(self) -> int:
        lib = _capi.lib()
        c: int = lib.rf_config_create()
        if not c:
            raise MemoryError("rf_config_create")
        self._free = weakref.finalize(self, lib.rf_config_free, c)
        if not isinstance(self.source, Synthetic) and \
                lib.rf_config_set_path(c, os.fsencode(self.source)) < 0:
            why = lib.rf_config_error(c).decode(errors="replace")
            self.close()
            raise ConfigError(f"source={shown_path(self.source)}: "
                              + why.replace("rf_config_set_path: ", ""))
        self._c = c
        return c

    def continue_from(self, handle: Any) -> None:
        """Later runs go on with the run of the open loader `handle`
        (rf_config_continue): they read its dataset as the first run
        listed it, not the path listed again (files added since are not
        read, a file removed since fails as that sample), and carry on its
        record of failed samples (sample_errors(), failed_samples, the
        max_errors= tally, the samples already said) and of the samples
        that crashed producers. Nothing for a synthetic source. Raises
        (no fd free, no memory) with the run left as it was."""
        if isinstance(self.source, Synthetic):
            return
        lib = _capi.lib()
        rc = lib.rf_config_continue(self._c, handle)
        if rc < 0:
            why = lib.rf_config_error(self._c).decode(errors="replace")
            raise from_code(rc, "cannot start the producers again: " +
                            why.replace("rf_config_continue: ", ""))

    def close(self) -> None:
        """Frees the configuration and the dataset fds it kept."""
        if self._free is not None:
            self._free()
        self._c, self._free = 0, None


def copy_array(address: int, count: int, dtype: Any) -> Any:
    """A numpy copy of `count` items at `address` (labels, indices)."""
    if count == 0 or not address:
        return np.zeros(0, dtype=dtype)
    nbytes = count * np.dtype(dtype).itemsize
    view = (ctypes.c_uint8 * nbytes).from_address(address)
    return np.frombuffer(memoryview(view), dtype=dtype).copy()  # the one copy
