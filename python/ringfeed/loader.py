"""ringfeed.Loader: batches of decoded images for a PyTorch training loop.

The producers are processes started by the C library (they ignore Ctrl-C,
die with this process and are replaced if they crash); they decode each
batch into a slot of a ring of shared memory, and the Loader hands it to
the loop as a tensor that views the slot (zero copy). A slot goes back to
the producers when the loop takes the next batch (or keep_batches later),
so a CPU tensor is valid until then: ``.clone()`` what you keep longer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
from typing import (Any, Callable, Deque, Dict, Iterator, List, Mapping,
                    Optional, Sequence, Set, SupportsIndex, Tuple, Union)

import numpy as np

from . import _capi, _checkpoint
from ._arguments import (epoch_count, epoch_number, library_values,
                         seed_value, size_pair, source_path, too_few_slots,
                         whole, worker_count)
from ._dataloader import NotADataLoader
from ._distributed import check_still_holds, rank_and_world, unpin_whole
from ._lifetime import (keep_interrupt, raise_kept_interrupt, track, untrack,
                        weak_say)
from ._position import Loop, Position
from ._run import _Config, _Held, _Run, copy_array
from .batch import Batch
from .errors import (ConfigError, ConfigTypeError, ForkError, LoaderClosed,
                     RingfeedError)
from .params import param
from .source import Synthetic, class_names

try:
    import torch
except ImportError:  # numpy arrays instead
    torch = None  # type: ignore[assignment]

__all__ = ["Loader", "Batch", "Synthetic"]

log = logging.getLogger("ringfeed")
PathLike = Union[str, bytes, "os.PathLike[str]", "os.PathLike[bytes]"]


class Loader(NotADataLoader):
    """Batches of images from a folder of class folders (torchvision's
    ImageFolder) or a packed file, decoded and augmented by producer
    processes into shared memory.

    ``for images, labels in loader`` runs one epoch (PyTorch's way; the
    next ``for`` runs the next epoch, or the one set_epoch() names) and
    yields ``images``, a uint8 tensor (N, C, H, W) for layout="nchw" or
    (N, H, W, C) for "nhwc", and ``labels``, int64 (N,). Without torch
    installed both are numpy arrays.

    On the CPU (device=None, dtype uint8) ``images`` is a view of the slot
    the producers wrote: no copy. It is valid until the loop takes the
    next batch (or keep_batches batches later); then the producers reuse
    the slot. Keep one longer with ``images.clone()``. ``labels`` is a
    copy. With device="cuda" the batch is copied to the GPU in one DMA
    from the pinned ring, overlapped with your step, then converted to
    dtype there; that tensor is torch's, yours to keep.

    Arguments (everything after batch_size is keyword-only):
      source       folder or packed file (str, bytes or os.PathLike, ~
                   expanded), or ringfeed.Synthetic(samples, classes)
      batch_size   images per batch
      transform    "train" (RandomResizedCrop + flip, as torchvision's
                   ImageNet recipe), "eval" (resize to resize= then center
                   crop), "none" (resize to size)
      size         output side, or (height, width)
      shuffle, seed, drop_last   as torch's DataLoader/DistributedSampler
      num_workers  producer processes; None: this rank's CPU budget (its
                   affinity, container quota and share of the node's ranks)
      layout       "nchw" or "nhwc"
      on_error     "fail": a sample that does not decode raises
                   CorruptSample; "skip": it is left out (the batch is
                   shorter) until max_errors= / max_error_ppm= are passed
      epochs       None: each ``for`` is one epoch. N: one ``for`` runs N
                   epochs back to back (len() is then N epochs' batches)
      rank, world_size   this process's shard; None: from an initialised
                   torch.distributed, else torchrun/mpirun/Slurm's
                   environment, else 0 of 1
      device       None (CPU tensors) or "cuda" / "cuda:N"
      dtype        torch.uint8 (None, the default), float32, float16 or
                   bfloat16, or its name ('float16') or numpy's; a float
                   is scaled to [0, 1] like torchvision's ToTensor
      mean, std    with a float dtype: per-channel normalisation in those
                   [0, 1] units, e.g. (0.485, 0.456, 0.406) /
                   (0.229, 0.224, 0.225); a number: every channel's
      keep_batches how many of the latest batches stay valid (default 1,
                   the current one); raise it for prefetching or
                   gradient accumulation that holds views
      on_message   called with each event the library reports (a producer
                   replaced after a crash); default: logging's "ringfeed"
                   logger at WARNING
      **params     any other parameter of the library by its Loader
                   keyword (ringfeed.params() lists them, Param.keyword,
                   with defaults and ranges: min_scale_ppm=, resize=,
                   max_pixels=, jpeg_warnings=, slots=, on_producer_death=,
                   batch_timeout_ms=, ...)

    Producers start at construction, so errors in the arguments, the
    source or the device are raised here, and the ring fills while the
    model is built. close() (or ``with``) stops them; so do garbage
    collection and interpreter exit. A Loader cannot be used in a child of
    fork(): open one there. One loop at a time: a new loop ends one left
    paused in this thread (its iterator kept), which raises if resumed,
    and one thread at a time: any thread may iterate a Loader, but a
    second loop while another thread's runs raises.
    """

    def __init__(self, source: Union[PathLike, Synthetic],
                 batch_size: SupportsIndex,
                 *, transform: str = "train",
                 size: Union[SupportsIndex, Sequence[SupportsIndex]] = 224,
                 shuffle: bool = True, seed: SupportsIndex = 0,
                 drop_last: bool = False,
                 num_workers: Optional[SupportsIndex] = None,
                 layout: str = "nchw", on_error: str = "fail",
                 epochs: Optional[SupportsIndex] = None,
                 rank: Optional[SupportsIndex] = None,
                 world_size: Optional[SupportsIndex] = None,
                 device: Optional[Union[str, Any]] = None, dtype: Any = None,
                 mean: Optional[Union[float, Sequence[float], Any]] = None,
                 std: Optional[Union[float, Sequence[float], Any]] = None,
                 keep_batches: SupportsIndex = 1,
                 on_message: Optional[Callable[[str], None]] = None,
                 **params: Any) -> None:
        self._run: Optional[_Run] = None
        self._uploader: Any = None
        # Held while a loop takes a batch (the library's calls and the
        # upload), and by close(): close() from another thread (a
        # watchdog, the exit hook while a daemon thread iterates) first
        # cuts that thread's wait short, then waits for it to leave.
        self._lock = threading.RLock()
        # the thread holding _lock for a loop, and a close() that thread
        # asked for meanwhile (a signal handler, on_message): see _busy()
        self._taking: Optional[int] = None
        self._close_pending = False
        # on the GPU, the prefetched batch's failure, raised at its turn
        self._deferred: Optional[RingfeedError] = None
        self._classes: Optional[List[str]] = None
        self._closed = False
        self._forked = False
        self._pid = os.getpid()
        if not isinstance(source, Synthetic):
            source = source_path(source)
        height, width = size_pair(size)
        epochs = epoch_count(epochs)
        keep_batches = whole(keep_batches, "keep_batches")
        if keep_batches < 1:
            raise ConfigError(f"keep_batches={keep_batches} must be >= 1")
        if on_message is not None and not callable(on_message):
            raise ConfigTypeError(f"on_message={on_message!r} is not "
                                  "callable: give a function of one str, "
                                  "or None (the 'ringfeed' logger)")
        self._rank, self._world, self._rank_from = rank_and_world(
            rank, world_size)
        self._shard_given = (rank is not None, world_size is not None)
        wanted: Dict[str, Any] = dict(
            batch_size=batch_size, transform=transform, shuffle=shuffle,
            seed=seed_value(seed), drop_last=drop_last, layout=layout,
            on_error=on_error, rank=self._rank, world_size=self._world,
            **params)
        if num_workers is not None:
            wanted["num_workers"] = worker_count(num_workers)
        unpinned = unpin_whole(self._world, wanted)
        values = library_values(wanted, height, width, Loader)
        values["epochs"] = epochs or 0  # the run goes on; the Loader counts
        self._config = _Config(source, values, unpinned)
        self._source = source
        self._epochs = epochs
        self._keep = keep_batches
        self._keep_given = keep_batches != 1
        self._layout = layout
        self._on_message = on_message or (lambda text: log.warning("%s", text))
        self._opening = False  # the library's open is running (_say)
        self._said_at_open: Set[str] = set()
        self._dtype, self._mean, self._std = dtype, mean, std
        self._device = None
        self._convert_fn = None
        if device is not None:
            from ._cuda import check_device
            self._device = check_device(device)
        if dtype is not None or mean is not None or device is not None:
            if torch is None:
                raise ConfigError("dtype=, mean=, std= and device= need "
                                  "PyTorch; it is not installed")
            from ._convert import make_converter
            self._convert_fn = make_converter(
                dtype, mean, std, 1 if layout == "nchw" else 3,
                int(values.get("channels", param("channels").default)))
        self._at = Position(epochs)
        # what the first run listed, which every later run reads
        # (_Config.continue_from): its size and digest, for checkpoints
        self._samples = 0
        self._listing: Optional[int] = None
        self._open_run()
        track(self)

    # ---- the run --------------------------------------------------------

    def _open_run(self) -> _Run:
        """(Re)starts the producers at the loader's position (self._at),
        going on with the run that ends (_Config.continue_from)."""
        if self._run is not None:
            self._config.continue_from(self._run.handle)
        self._close_run()
        self._opening = True
        try:
            run = self._run = _Run(self._config, self._at.epoch,
                                   self._at.batch, weak_say(self))
        finally:
            self._opening = False
        stats = run.stats
        self._at.per_epoch = int(stats.batches_per_epoch)
        if self._listing is None:
            self._samples = int(stats.dataset_samples)
            self._listing = int(stats.listing_digest)
        # On the GPU a slot goes back at the next batch, whatever
        # keep_batches= says: the loop holds the batch handed over and the
        # next one's, being copied.
        held_at_most = self._keep if self._device is None else 2
        if stats.slots <= held_at_most:
            self._close_run()
            raise ConfigError(too_few_slots(
                held_at_most, stats.slots, self._device is not None,
                self._keep if self._keep_given else None))
        if self._device is not None:
            from ._cuda import Uploader
            try:
                self._uploader = Uploader(self._device, run.base, run.size,
                                          self._convert_fn, run.before_unmap)
            except BaseException:  # no CPU batches in place of GPU ones
                self._close_run()
                raise
        return run

    def _say(self, text: str) -> None:
        """A message of the library's to on_message. What the open says
        of the configuration (the CPU budget, a local rank without its
        size, raw samples under a transform) is said once per Loader, not
        again at each restart of the producers (set_epoch() to another
        epoch, load_state_dict())."""
        if self._opening:
            if text in self._said_at_open:
                return
            self._said_at_open.add(text)
        self._on_message(text)

    def _close_run(self) -> None:
        """Unregisters the ring, then stops the producers: the second even
        when the first raises."""
        uploader, self._uploader = self._uploader, None
        run, self._run = self._run, None
        self._deferred = None  # that run's
        try:
            if uploader is not None:
                uploader.close()
        finally:
            if run is not None:
                run.close()

    def _check_open(self) -> None:
        """Raises unless this process's Loader is open; starts nothing."""
        if self._forked or self._pid != os.getpid():
            raise ForkError(
                f"this Loader was opened in process {self._pid}; its "
                "producers and ring belong to that process. Open a new "
                "Loader in the child of fork() (or use the Loader in the "
                "parent only)", _capi.E_FORK_UNSAFE)
        if self._closed:
            raise LoaderClosed("the Loader was closed; open a new one")

    def _usable(self) -> _Run:
        self._check_open()
        return self._run if self._run is not None else self._open_run()

    # ---- iteration ------------------------------------------------------

    def __len__(self) -> int:
        """Batches one whole ``for`` loop yields: this rank's batches per
        epoch (times epochs= when given), as DataLoader's len(). A loop
        resumed mid-epoch by load_state_dict() yields only the rest; a
        loop after a break starts at the next epoch (with epochs=, the
        rest of the epoch left is not run)."""
        self._usable()
        return self._at.per_epoch * (self._epochs or 1)

    def __iter__(self) -> Iterator[Tuple[Any, Any]]:
        """One epoch (or epochs=N) of (images, labels)."""
        for batch in self.batches():
            yield batch._images, batch._labels

    def batches(self) -> Iterator[Batch]:
        """Like iterating, but yields Batch objects with the details:
        indices, epoch, number, skipped (see Batch)."""
        self._check_open()
        check_still_holds(self._rank, self._world, self._rank_from,
                          self._shard_given)
        with self._busy():  # a loop in another thread checks the same
            if not self._at.end_paused_loop(self._run, "a later loop over "
                                            "it (a for loop or iter())"):
                raise RingfeedError(
                    "this Loader is already being iterated: one loop at a "
                    "time (finish or leave the other loop, or open a "
                    "second Loader)")
            # under the lock: another loop's start may be between closing
            # its producers and opening the next ones
            self._usable()
            if not self._at.loop_starts():
                return
            self._restart_if_elsewhere()
            run = self._usable()
            loop = self._at.loop = Loop()
        early = False
        try:
            yield from self._stream(run, self._at.loop_end(), loop)
            loop.check_not_ended()
        except GeneratorExit:
            early = True
            raise
        finally:
            # The batches shown stay held, the last one valid until the
            # loader takes another batch (in the next loop) or closes:
            # `images, labels = next(iter(loader))` gives a batch that
            # stays as it is. A failure and Ctrl-C have closed the loader
            # (_stream), which released them. After a break this runs as
            # the generator is collected, where Python drops a Ctrl-C.
            try:
                if self._at.loop is loop:  # else a later loop ended it
                    self._at.loop_ends(early)
            except KeyboardInterrupt:
                keep_interrupt()

    def _stream(self, run: _Run, end: int, loop: Loop) -> Iterator[Batch]:
        prefetched = loop.prefetched
        position = self._at.sequence
        try:
            while position < end and loop.resumes(self._lock):
                try:
                    held = self._next_held(run, prefetched, position, end)
                    if held is None:
                        return
                    self._at.yielded(position)
                finally:
                    self._at.loop_hands_over(loop)
                position += 1
                yield held.batch
        except (RingfeedError, KeyboardInterrupt):
            self.close()
            raise
        finally:
            try:  # after a break, as the generator is collected (above)
                with self._lock:
                    loop.give_back(run)
            except KeyboardInterrupt:
                keep_interrupt()

    def _next_held(self, run: _Run, prefetched: Deque[_Held], position: int,
                   end: int) -> Optional[_Held]:
        """The batch at `position`, held in the run, or None at the end."""
        raise_kept_interrupt()
        with self._busy():
            self._check_open()
            if self._device is not None:  # the GPU tensors are torch's:
                run.release_beyond(0)  # the last slot's copy is long done
            held = self._take(run, prefetched, position, end)
            if held is None:
                return None
            run.held.append(held)
            if self._device is None:
                run.release_beyond(self._keep)
        return held

    def _take(self, run: _Run, prefetched: Deque[_Held], position: int,
              end: int) -> Optional[_Held]:
        """The batch at `position`, and with a device the next one's copy
        queued before it is handed over (overlap with the caller's step)."""
        if self._device is None:
            c_batch = run.next()
            return None if c_batch is None else self._wrap(run, c_batch)
        if self._deferred is not None:  # the next batch's failure, now
            error, self._deferred = self._deferred, None
            raise error
        if not prefetched:
            c_batch = run.next()
            if c_batch is None:
                return None
            prefetched.append(self._wrap(run, c_batch))
        held = prefetched.popleft()
        try:
            if position + 1 < end:
                self._prefetch(run, prefetched)
            held.batch._images = self._uploader.hand_over(held.pending)
        except BaseException:  # Ctrl-C, out of GPU memory: not lost
            prefetched.appendleft(held)
            raise
        return held

    def _prefetch(self, run: _Run, prefetched: Deque[_Held]) -> None:
        """Queues the next batch's copy. A failure of that batch (a corrupt
        sample, a producer's death) is raised when the loop asks for it,
        as on the CPU, after the batch in hand has been handed over."""
        try:
            c_batch = run.next()
        except LoaderClosed:
            raise  # a close() asked for meanwhile: not this batch's
        except RingfeedError as e:
            self._deferred = e
            return
        if c_batch is not None:
            prefetched.append(self._wrap(run, c_batch))

    def _wrap(self, run: _Run, c: _capi.Batch) -> _Held:
        offset = c.data - run.base
        if self._layout == "nchw":
            shape = (c.samples, c.channels, c.height, c.width)
        else:
            shape = (c.samples, c.height, c.width, c.channels)
        # A tensor of its own over the batch's bytes, not a view of one
        # over the ring: torch.save(), pickle and torch.multiprocessing
        # then copy this batch alone, not the ring and the other batches
        # in it (a slice of the numpy ring keeps the mapping alive).
        pixels = run.ring[offset:offset + c.bytes]
        images: Any  # a tensor, an array, or None until uploaded
        if torch is not None:
            images = torch.from_numpy(pixels).view(*shape)
        else:
            # numpy can refuse writes into the shared slot (torch cannot)
            images = pixels.reshape(shape)
            images.flags.writeable = False
        labels = copy_array(c.labels, c.samples, np.int64)
        # dataset indices are below 2^63: the same bits as int64, torch's
        indices = copy_array(c.indices, c.samples, np.uint64).view(np.int64)
        if torch is not None:
            labels, indices = torch.from_numpy(labels), torch.from_numpy(
                indices)
        pending = None
        if self._uploader is not None:
            pending = self._uploader.launch(images)
            images = None  # set when handed over
        elif self._convert_fn is not None:
            images = self._convert_fn(images)
        batch = Batch(images, labels, indices, c.epoch, c.number, c.sequence,
                      c.skipped)
        return _Held(c, batch, pending)

    # ---- epochs and checkpoints -----------------------------------------

    def set_epoch(self, epoch: SupportsIndex) -> None:
        """Makes the next ``for`` loop run epoch `epoch` (its own order,
        crops and flips), as DistributedSampler.set_epoch does. Without it
        each loop runs the epoch after the last one. Setting the epoch the
        loader is already in keeps its position, so a resumed checkpoint
        (load_state_dict) is not undone by the usual
        ``for epoch in range(start, n): loader.set_epoch(epoch)``; after a
        checkpoint taken at an epoch's last batch, setting that finished
        epoch (once or more, before the next loop; not with epochs=N)
        gives a loop with nothing left in it, so a trainer counting its
        own epochs resumes exactly too. After a loop left early
        (``break``, or ``next(iter(loader))`` to look at a batch), setting
        its epoch starts that epoch over, a new pass, as a DataLoader's
        next ``iter()`` does; load_state_dict(state_dict()) goes on where
        it was left instead.

        Called during a loop, it takes effect when that loop ends (as
        DistributedSampler.set_epoch does for the next iter()): the loop
        goes on with its own epoch, and state_dict() records the loop's
        position until then. Setting the epoch of the batch in hand (a
        per-epoch hook) changes nothing: the loop's place stays, at its
        end or after a ``break``. Raises ConfigError for an epoch that is not
        a whole number from 0 to 2**30, LoaderClosed after close()."""
        epoch = epoch_number(epoch)
        self._check_open()
        self._at.set_epoch(epoch)

    def _restart_if_elsewhere(self) -> None:
        """Restarts the producers when they are not making the batch the
        loader is to yield next (set_epoch to another epoch, a loaded
        checkpoint); otherwise what they prefetched is used."""
        run = self._usable()
        if run.next_seq != self._at.sequence:
            self._open_run()

    def state_dict(self) -> Dict[str, Any]:
        """Where the loader is: enough for load_state_dict() in a new
        Loader with the same arguments to yield exactly the batches this
        one would yield next (torchdata's Stateful protocol). Take it
        between steps; the batch the loop holds counts as consumed. Works
        after close() too (after Ctrl-C, say): it records the position.
        After a loop left early (break) it records where that loop
        stopped, as StatefulDataLoader does: loaded, the next loop goes
        on from there, where this Loader's next loop would start the next
        epoch (or the one set_epoch() names).

        The position is the same on every rank of a job (each has the
        same number of batches per epoch), so one rank's state_dict()
        resumes all of them, as when only rank 0 saves the checkpoint."""
        if self._forked or self._pid != os.getpid():
            self._usable()  # raises ForkError
        _checkpoint.check_ordered(self._config.values, "state_dict()")
        at = self._at
        return _checkpoint.make_state(self._config.values, at.epoch,
                                      at.batch, at.per_epoch,
                                      self._samples, self._listing or 0,
                                      self._rank, self._world)

    def load_state_dict(self, state_dict: Mapping[str, Any],
                        strict: bool = True) -> None:
        """Resumes at the position `state_dict` (from state_dict())
        records: the next ``for`` loop yields the rest of that epoch, batch
        for batch what the run that saved it would have yielded, on every
        rank. (The argument's name is torchdata's StatefulDataLoader's and
        torch.nn.Module's.)

        Raises ConfigError, naming the entry, when it is not a whole
        state_dict() (an entry missing, a position out of range or not a
        whole number), and, naming the keyword, when the checkpoint was
        made with another dataset (its sample count), seed, batch size,
        shuffle, drop_last, shard_pad, transform, size or world size. With
        strict=False a checkpoint from another world size (a job restarted
        on more or fewer GPUs) is taken too: the loader starts at the same
        epoch, at the batch where as many samples of it had been consumed
        across all ranks; samples of that epoch near the cut may be seen
        twice or not at all (a warning says so), as each rank's share of
        the order changes with the world size. A loop paused in this
        thread (its iterator kept) ends, and raises if resumed."""
        self._check_open()
        _checkpoint.check_ordered(self._config.values, "load_state_dict()")
        at = _checkpoint.resume_position(state_dict, self.state_dict(),
                                         strict)  # refused: nothing changes
        with self._busy():
            if not self._at.end_paused_loop(self._run, "load_state_dict()"):
                raise RingfeedError(
                    "load_state_dict() while a loop over this Loader runs: "
                    "that loop would go on from where it is. Leave it "
                    "first, or load the state before it starts")
            self._at.resume_at(*at)

    # ---- reports and lifetime -------------------------------------------

    def stats(self) -> Dict[str, Any]:
        """Counters since the producers last started: batches, samples,
        bytes, wait_s (time the loop waited for batches), elapsed_s,
        producers, slots, where the slots are; over the Loader's whole run:
        failed_samples (a sample once per pass of an epoch it failed in),
        respawns; and batches_per_epoch, samples_in_dataset, rank,
        world_size, cpu_budget."""
        with self._busy():  # not under a close() from another thread
            counters = self._usable().counters()
        return dict(counters, cpu_budget=self.cpu_budget)

    @property
    def cpu_budget(self) -> str:
        """Where the number of producers and their CPUs came from: "4 CPUs:
        affinity 0-15, quota 4.00 (...), local rank 1 of 4 (...)"."""
        with self._busy():
            return self._usable().cpu_budget()

    def sample_errors(self) -> List[Tuple[int, int, str]]:
        """(index, epoch, message) for each sample that has failed so far
        under on_error="skip", once per sample with its first failure
        (however many epochs it failed in), oldest first; the first 1,024
        samples are kept."""
        with self._busy():
            return self._usable().sample_errors()

    @property
    def classes(self) -> List[str]:
        """The class names, by label: torchvision ImageFolder's
        ``dataset.classes`` (the class folders' names, sorted), for a
        packed file the names it was written with; for a Synthetic source
        "0", "1", .... Those of the listing the producers read, made when
        the Loader was: class folders added since do not shift them.
        Read on first use, then kept."""
        if self._classes is None:
            self._classes = self._class_names()
        return list(self._classes)

    def _class_names(self) -> List[str]:
        if isinstance(self._source, Synthetic):
            return class_names(self._source)
        if not self._closed and self._pid == os.getpid():
            with self._busy():
                names = self._usable().class_names()
            if names is not None:
                return names
        # no listing kept (few fds free at open), or closed: the path
        # again, refused if it no longer holds the loader's samples
        return class_names(self._source, self._listing)

    @property
    def closed(self) -> bool:
        """Whether close() ran."""
        return self._closed

    @property
    def batch_size(self) -> int:
        """Samples per batch, as given (a batch with skipped samples, or
        the last one without drop_last, has fewer)."""
        return int(self._config.values["batch_size"])

    @property
    def drop_last(self) -> bool:
        """Whether an epoch's last, short batch is left out."""
        return bool(self._config.values.get("drop_last",
                                            param("drop_last").default))

    def close(self) -> None:
        """Stops the producers and frees the ring. Batches still held are
        released (their Batch objects raise from then on). Safe to call
        more than once, from a child of fork() (where it frees only the
        child's copy), and from another thread than the loop's: a loop
        waiting for a batch then raises LoaderClosed at once."""
        if self._closed:
            return
        if self._forked or self._pid != os.getpid():
            self._close_locked()  # the child's copy, which no loop uses
            return
        if self._taking == threading.get_ident():
            # This thread is taking a batch: a signal handler or on_message
            # (called back from inside the library's next()) runs in it.
            # Closing here would free what that work is using; it stops at
            # once instead, and closes the loader on its way out (_busy).
            self._close_pending = True
            if self._run is not None:
                self._run.interrupt()
            return
        # Another thread may be taking a batch, maybe waiting for one: cut
        # its wait short (again, should it restart its producers) until
        # it has left.
        while not self._lock.acquire(timeout=0.05):
            run = self._run
            if run is not None:
                run.interrupt()
        try:
            self._close_locked()
        finally:
            self._lock.release()

    @contextlib.contextmanager
    def _busy(self) -> Iterator[None]:
        """Holds _lock while this thread works in the library for a loop.
        A close() from this same thread meanwhile is put off until the
        work is left (see close()); then the loader closes, and when the
        work had not failed otherwise, LoaderClosed is raised."""
        self._lock.acquire()
        outer, self._taking = self._taking, threading.get_ident()
        closed_now = False
        try:
            yield
        finally:
            self._taking = outer
            self._lock.release()
            if outer is None and self._close_pending:
                self._close_pending = False
                self.close()
                closed_now = True
        if closed_now:
            raise LoaderClosed("the Loader was closed (close() from a signal "
                               "handler or on_message while it took a "
                               "batch)")

    def _close_locked(self) -> None:
        if self._closed:
            return
        self._closed = True
        untrack(self)
        self._config.close()
        if self._forked or self._pid != os.getpid():
            if self._run is not None:
                self._run.free_child_copy()
            return
        self._close_run()

    def __enter__(self) -> "Loader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except KeyboardInterrupt:  # Python would drop it here
            keep_interrupt()
        except Exception:  # interpreter shutdown: modules may be gone
            pass

    def __repr__(self) -> str:
        state = "closed" if self._closed else (
            f"epoch {self._at.epoch}, batch {self._at.batch}")
        return f"<ringfeed.Loader {self._source!r}: {state}>"
