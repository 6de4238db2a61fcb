"""ringfeed.Batch: one batch and its details, valid while its slot is held."""

from __future__ import annotations

import copy
from typing import Any, Dict, Iterator

from .errors import BatchReleased

__all__ = ["Batch"]


class Batch:
    """One batch with its details, as ``Loader.batches()`` yields it.

    Every attribute raises BatchReleased once the batch's slot went back to
    the producers (the loop took the next batch, or the loader closed):
    the package never hands out what producers have since overwritten.
    A tensor taken from it earlier (``images = batch.images``) is a view of
    the slot and is not checked: use it before the next batch, or clone it.
    """

    __slots__ = ("_images", "_labels", "_indices", "_epoch", "_number",
                 "_sequence", "_skipped", "_released", "__weakref__")

    def __init__(self, images: Any, labels: Any, indices: Any, epoch: int,
                 number: int, sequence: int, skipped: int) -> None:
        self._images, self._labels, self._indices = images, labels, indices
        self._epoch, self._number = epoch, number
        self._sequence, self._skipped = sequence, skipped
        self._released = False

    def _check(self) -> None:
        if self._released:
            raise BatchReleased(
                f"batch {self._number} of epoch {self._epoch} was released "
                "(the loader took a later batch, or closed); its slot "
                "holds other images now. Copy what you "
                "keep while the batch is current (batch.images.clone(), or "
                ".copy() of a numpy array), or pass keep_batches= to Loader "
                "to keep more batches valid")

    @property
    def images(self) -> Any:
        """The images: uint8 (or dtype=) tensor, NCHW or NHWC."""
        self._check()
        return self._images

    @property
    def labels(self) -> Any:
        """int64 labels, one per image (a copy: safe to keep)."""
        self._check()
        return self._labels

    @property
    def indices(self) -> Any:
        """int64 dataset index of each image (a copy)."""
        self._check()
        return self._indices

    @property
    def epoch(self) -> int:
        """The epoch (0-based)."""
        self._check()
        return self._epoch

    @property
    def number(self) -> int:
        """The batch's number within its epoch (0-based)."""
        self._check()
        return self._number

    @property
    def sequence(self) -> int:
        """The batch's number across epochs."""
        self._check()
        return self._sequence

    @property
    def skipped(self) -> int:
        """Samples left out of this batch because they failed to decode
        (on_error="skip"); the batch is that much shorter."""
        self._check()
        return self._skipped

    def _release(self) -> None:
        """Marks the batch released and lets go of its pixels: on the CPU
        they view the slot, and a released Batch the caller still holds
        (a loop's last `batch`, one kept in a list) kept the whole ring
        mapped, its shared memory in use, after close()."""
        self._released = True
        self._images = None

    @property
    def released(self) -> bool:
        """Whether the batch's slot went back to the producers."""
        return self._released

    def __copy__(self) -> "Batch":
        """A copy with pixels of its own, as copy.deepcopy() makes: a
        shallow one would share the slot's pixels without knowing when the
        slot goes back, and read what the producers write next."""
        return copy.deepcopy(self)

    def __deepcopy__(self, memo: Dict[int, Any]) -> "Batch":
        twin = Batch(copy.deepcopy(self._images, memo),
                     copy.deepcopy(self._labels, memo),
                     copy.deepcopy(self._indices, memo), self._epoch,
                     self._number, self._sequence, self._skipped)
        twin._released = self._released  # a released batch's copy raises
        return twin

    def __iter__(self) -> Iterator[Any]:
        """(images, labels), so ``images, labels = batch`` works."""
        return iter((self.images, self.labels))

    def __getitem__(self, index: int) -> Any:
        """batch[0] is images and batch[1] labels, as in a DataLoader's
        (images, labels) batch."""
        return (self.images, self.labels)[index]

    def __repr__(self) -> str:
        if self._released:
            return (f"<ringfeed.Batch {self._number} of epoch "
                    f"{self._epoch}, released>")
        return (f"<ringfeed.Batch {self._number} of epoch {self._epoch}: "
                f"{len(self._labels)} images>")
