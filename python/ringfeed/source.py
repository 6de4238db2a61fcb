"""What a Loader reads: a path (a folder of class folders or a packed
file), or Synthetic, a dataset made up on the fly; and the class names of
either."""

from __future__ import annotations

import ctypes
import os
from typing import Any, List, Optional, Tuple

from . import _capi
from ._arguments import whole
from .errors import ConfigError, RingfeedError, from_code

__all__ = ["Synthetic", "class_names"]


class Synthetic:
    """A dataset made up on the fly, for tests and benchmarks: `samples`
    images of `classes` labels; jpeg=True makes each one a JPEG that the
    producers decode (the cost of a real dataset), False fills the pixels
    directly. Immutable, as a path is: a Loader made on it keeps reading
    what it was made with."""

    __slots__ = ("samples", "classes", "jpeg")
    samples: int
    classes: int
    jpeg: bool

    def __init__(self, samples: int, classes: int = 1000, *,
                 jpeg: bool = True) -> None:
        fields = (whole(samples, "samples"), whole(classes, "classes"))
        if fields[0] < 1 or fields[1] < 1:
            raise ConfigError("Synthetic needs samples >= 1 and classes >= 1")
        for name, value in zip(self.__slots__, fields + (bool(jpeg),)):
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"Synthetic is immutable: make a new one with "
                             f"the {name} you want")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Synthetic) and all(
            getattr(self, n) == getattr(other, n) for n in self.__slots__)

    def __hash__(self) -> int:
        return hash((self.samples, self.classes, self.jpeg))

    def __reduce__(self) -> Tuple[Any, Tuple[int, int, bool]]:
        """Pickled (sent to another process) and copied as its arguments."""
        return _synthetic, (self.samples, self.classes, self.jpeg)

    def __repr__(self) -> str:
        return (f"Synthetic(samples={self.samples}, classes={self.classes}, "
                f"jpeg={self.jpeg})")


def _synthetic(samples: int, classes: int, jpeg: bool) -> Synthetic:
    return Synthetic(samples, classes, jpeg=jpeg)


def class_names(source: Any, listing: Optional[int] = None) -> List[str]:
    """The names of a source's classes, by label, opening it again; with
    `listing`, a Loader's listing digest, RingfeedError unless the source
    still holds the samples that Loader reads (class folders added or
    removed since would shift every name)."""
    if isinstance(source, Synthetic):
        return [str(i) for i in range(source.classes)]
    lib = _capi.lib()
    ds, err = ctypes.c_void_p(), ctypes.c_void_p()
    rc = lib.rf_dataset_open(ctypes.byref(ds), os.fsencode(source),
                             ctypes.byref(err))
    detail = _capi.take_message(err)
    if rc < 0:
        raise from_code(rc, detail)
    try:
        info = _capi.DatasetInfo()
        lib.rf_dataset_get_info(ds, ctypes.byref(info))
        if listing is not None and info.listing_digest != listing:
            raise RingfeedError(
                f"the class names of source={source!r} cannot be given: its "
                "samples have changed since the Loader was opened (files or "
                "class folders added, removed or renamed), and the Loader "
                "kept no copy of its listing; open a new Loader to read what "
                "it holds now")
        names, out = [], ctypes.create_string_buffer(4096)
        for label in range(info.classes):
            rc = lib.rf_dataset_class_name(ds, label, out, len(out))
            names.append(os.fsdecode(out.value) if rc == 0 else str(label))
        return names
    finally:
        lib.rf_dataset_close(ds)
