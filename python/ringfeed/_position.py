"""Where a Loader is in its run, and the rules that move it: a loop's
start and end, set_epoch() and load_state_dict(). Kept apart from the
producers and the ring, which only follow it (Loader restarts them when
they are making another batch than the one the position names)."""

from __future__ import annotations

import collections
import threading
from typing import Any, Deque, Optional

from .errors import RingfeedError


class Loop:
    """One loop over a Loader (a ``for``, an iter() kept, batches()): the
    thread it last ran in, whether it is running now (from its resumption
    until it hands its batch over: taking a batch, counting it), the
    batches it has taken but not shown yet (a device's prefetch), and
    what ended it if it was paused. A loop paused in its thread (an
    iterator peeked at and kept, a generator a kept traceback holds, as
    in a notebook after an exception in the step) is ended by the next
    loop there, as torch's DataLoader starts a new pass, or by
    load_state_dict(); if it is resumed it raises instead of sharing
    batches with the next loop."""

    def __init__(self) -> None:
        self.thread = threading.get_ident()
        self.running = False
        self.prefetched: Deque[Any] = collections.deque()
        self.ended_by: Optional[str] = None

    def resumes(self, lock: Any) -> bool:
        """The loop goes on to its next batch, in this thread: False when
        something ended it while it was paused (it must then take, count
        and hand over nothing). From here until handed_over() it runs,
        and end() refuses (a signal handler or on_message calling): the
        flag is up before the check, so that an end() between the two
        is seen, and both are under `lock`, the Loader's, as end() is."""
        with lock:
            self.running = True
            if self.ended_by is not None:
                self.running = False
                return False
            self.thread = threading.get_ident()
            return True

    def handed_over(self) -> None:
        """The loop's batch is counted and about to be yielded: paused."""
        self.running = False

    def end(self, run: Any, by: str) -> bool:
        """Ends this loop if it is paused in this thread between two
        batches, its prefetched batches given back to `run` (the Loader's
        _Run; the caller holds the Loader's lock); `by` says what ended
        it. False, and nothing done, for a loop that runs: in another
        thread, or inside its own work (a signal handler or on_message
        calling from there)."""
        if self.thread != threading.get_ident() or self.running:
            return False
        self.ended_by = by
        self.give_back(run)
        return True

    def give_back(self, run: Any) -> None:
        """Releases the batches taken but not shown to `run` (while it is
        open), each once however this is cut short; the caller holds the
        Loader's lock."""
        while self.prefetched:  # released, then dropped: none kept held
            if run is not None and run.handle:
                run.release(self.prefetched[0])  # again is refused, harmless
            self.prefetched.popleft()

    def check_not_ended(self) -> None:
        """Raises in a loop resumed after something ended it."""
        if self.ended_by is not None:
            raise RingfeedError(
                f"this loop over the Loader was ended by {self.ended_by}, "
                "called in this loop's body or while this loop was paused "
                "(its iterator kept): one loop at a time; open a second "
                "Loader for a second stream")


class Position:
    """The batch the next loop yields: (epoch, batch), batch counted in
    the epoch; with per_epoch batches an epoch and `epochs` (None: one
    epoch per loop) epochs in one loop."""

    def __init__(self, epochs: Optional[int]) -> None:
        self.epochs = epochs
        self.epoch = 0  # the epoch the next batch comes from
        self.batch = 0  # and its number in it
        self.per_epoch = 0  # known once the producers have started
        # A loop left early: the next loop starts the next epoch (torch's
        # DataLoader starts a new pass there), while state_dict() still
        # records the position, for a checkpoint taken after the break.
        self._left_early = False
        # load_state_dict() at the start of an epoch (epoch, 0) after the
        # checkpoint's loop had finished epoch - 1: set_epoch(epoch - 1)
        # then means that finished epoch, whose loop yields nothing more
        self._resumed_after: Optional[int] = None
        self._nothing_left = False  # the next loop yields no batch
        self.loop: Optional[Loop] = None  # the loop running (one at a time)
        # set_epoch() called during a loop: applied when that loop ends
        self._epoch_after_loop: Optional[int] = None
        # and the last such call since the loop handed its last batch
        # over, made again if the loop was only paused and a later loop
        # ends it (end_paused_loop()): made after the loop, as far as the
        # loop can tell. One in the body of a loop then left with its
        # iterator kept is taken so too.
        self._set_in_loop: Optional[int] = None

    @property
    def iterating(self) -> bool:
        """A loop is running (or paused between two batches)."""
        return self.loop is not None

    @property
    def sequence(self) -> int:
        """The next batch's number counted from the run's start, as the
        producers number the batches they make."""
        return self.epoch * self.per_epoch + self.batch

    def loop_starts(self) -> bool:
        """A loop begins: whether it has batches to yield. After a loop
        left early it is the next epoch's start."""
        if self._left_early and self.batch:
            self.epoch, self.batch = self.epoch + 1, 0
        self._left_early = False
        self._resumed_after = None
        if self._nothing_left:
            self._nothing_left = False
            return False
        return self.sequence < self.loop_end()

    def loop_end(self) -> int:
        """The sequence number at which the loop starting now stops."""
        if self.epochs is None:
            return (self.epoch + 1) * self.per_epoch
        return self.epochs * self.per_epoch

    def yielded(self, sequence: int) -> None:
        """The loop handed over batch `sequence`: the next is after it."""
        self.epoch, self.batch = divmod(sequence + 1, self.per_epoch)

    def loop_ends(self, early: bool) -> None:
        """The loop ended (early: left by break, an exception or a closed
        generator before its last batch). A set_epoch() made in it takes
        effect now, unless it named where the loop stopped."""
        self.loop = None
        self._set_in_loop = None
        self._left_early = early
        if self._epoch_after_loop is not None:
            epoch, self._epoch_after_loop = self._epoch_after_loop, None
            self._left_early = False
            if epoch != self.epoch:  # where the loop stopped, it stays
                self.epoch, self.batch = epoch, 0

    def end_paused_loop(self, run: Any, by: str) -> bool:
        """Ends the loop if it is paused in this thread (Loop.end()): as
        if left where it paused, a set_epoch() made since taken as made
        after it (the trainer's loop over epochs, after a peek with the
        iterator kept), as when the paused loop's generator is collected.
        False while a loop runs; True when none is open now."""
        if self.loop is None:
            return True
        if not self.loop.end(run, by):
            return False
        epoch = self._set_in_loop
        self.loop_ends(True)
        if epoch is not None:
            self.set_epoch(epoch)
        return True

    def loop_hands_over(self, loop: Loop) -> None:
        """`loop` has its batch (Loop.handed_over()): a set_epoch() made
        before this was made in its body or its work, not after it."""
        loop.handed_over()
        self._set_in_loop = None

    def set_epoch(self, epoch: int) -> None:
        """Loader.set_epoch()'s rules (its docstring says them)."""
        if self.iterating:
            # the running loop's batches are already on their way, and its
            # position is what a checkpoint taken in it must record. The
            # epoch of the batch in hand is the one running (a per-epoch
            # hook saying so): nothing to do when the loop ends.
            running = (self.sequence - 1) // max(self.per_epoch, 1)
            self._epoch_after_loop = None if epoch == running else epoch
            self._set_in_loop = epoch
            return
        if self._resumed_after is not None:
            # right after a checkpoint taken at the end of an epoch: the
            # trainer's own count may still name that epoch, as often as
            # it sets it before the next loop
            if epoch == self._resumed_after:
                self._nothing_left = True
                return
            self._resumed_after = None
        self._nothing_left = False
        if epoch != self.epoch or self._left_early:
            self.epoch, self.batch = epoch, 0
        self._left_early = False

    def resume_at(self, epoch: int, batch: int) -> None:
        """load_state_dict(): the next loop starts at (epoch, batch)."""
        self.epoch, self.batch = epoch, batch
        self._left_early = self._nothing_left = False
        # with epochs=N one loop runs them all, and set_epoch() moving back
        # means to run again from there
        self._resumed_after = (epoch - 1 if batch == 0 and epoch > 0 and
                               self.epochs is None else None)
        self._epoch_after_loop = None
