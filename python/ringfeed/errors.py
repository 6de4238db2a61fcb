"""ringfeed's exceptions: one class per kind of failure, each carrying the
library's detail (which names the sample, its file and the reason, and
says what to change)."""

from __future__ import annotations

import errno
import os
import re
from typing import Dict, Optional, Tuple, Type, Union

from . import _capi
from .params import user_terms

__all__ = [
    "RingfeedError", "ConfigError", "ConfigTypeError", "DatasetError",
    "DatasetNotFound", "DatasetUnreadable",
    "CorruptSample",
    "ProducerDied", "ProducerFailed", "ProducerNotFound", "ForkError",
    "RingCorrupted", "BatchReleased", "LoaderClosed",
]


class RingfeedError(Exception):
    """Base of every ringfeed error.

    code:   the library's return code (a negative errno or RF_E_*), or 0
            for an error raised by the package itself
    detail: the library's full message
    """

    def __init__(self, detail: str, code: int = 0) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


class ConfigError(RingfeedError, ValueError):
    """A Loader argument or a combination of them that cannot work; the
    message names the keyword to change."""


class ConfigTypeError(ConfigError, TypeError):
    """A Loader argument of a type its keyword does not take (batch_size=
    4.0, shuffle="yes"): a ConfigError like any other bad value, and a
    TypeError, as Python's own calls raise for a wrong type."""


class DatasetError(RingfeedError, OSError):
    """The source cannot be opened for a reason of the operating system's
    (a symbolic link loop, a name too long, an I/O error; the subclasses
    below for a missing or unreadable one), with the OSError fields that
    an except OSError clause reads: errno (the library's code, else
    `default_errno`), filename (the path the library's "cannot open
    dataset 'PATH': ..." names) and strerror (the detail)."""

    default_errno = errno.ENOENT

    def __init__(self, detail: str, code: int = 0) -> None:
        super().__init__(detail, code)
        self.errno = -code if code < 0 else self.default_errno
        self.strerror = detail
        named = re.match(r"cannot open dataset '(.*?)': ", detail)
        self.filename = named.group(1) if named else None

    def __str__(self) -> str:
        return self.detail


class DatasetNotFound(DatasetError, FileNotFoundError):
    """The source path does not exist or is not a dataset."""


class DatasetUnreadable(DatasetError, PermissionError):
    """The source, or a folder in it, may not be read by this process
    (permission denied while listing it); the detail names the folder."""

    default_errno = errno.EACCES


# A failed sample's index, path, name and reason, as the library gives
# them apart (None for a path or name it does not know).
SampleFields = Tuple[int, Optional[str], Optional[str], str]


class CorruptSample(RingfeedError):
    """A sample could not be read or decoded (on_error="fail"), or too many
    did (on_error="skip" past max_errors / max_error_ppm).

    index:  the sample's index in the dataset (None when not known)
    path:   the file: the image's path in a folder, or the packed file
    name:   for a packed file, the sample's name inside it, else None
    reason: what was wrong with it
    """

    # "sample N (NAME, packed offset K) of PACK: REASON", "sample N
    # (packed offset K) of PACK: REASON" (a sample without a name), or
    # "sample N (PATH): REASON". A name or path may hold parentheses
    # ("photo (1).jpg", "best (2019) of cats") and the separator that
    # follows it ("): " in a file's name, ": " in a pack's path): the
    # path ends at the first separator that leaves the name of a file on
    # disk, else at the first one.
    _HEAD = re.compile(r"sample (?P<index>\d+) \(")
    _PACKED = re.compile(r"(?:(?P<name>.*?), )?packed offset \d+\) of ",
                         re.S)
    # what the library puts in the middle of a description too long to
    # give whole (rf__copy_elided(): 239 bytes at most)
    _ELIDED = "..."

    def __init__(self, detail: str, code: int = _capi.E_CORRUPT_SAMPLE,
                 names: Optional[str] = None,
                 sample: Optional[SampleFields] = None) -> None:
        """sample: the fields as the library gives them apart
        (rf_loader_failed_sample()); without them, or without a path in
        them, they are taken from the message: names is the library's
        message as the file system's names decode (os.fsdecode), for path
        and name; detail, for the rest, has a name's bytes that are not
        UTF-8 replaced."""
        super().__init__(detail, code)
        self.index: Optional[int] = None
        self.path: Optional[str] = None
        self.name: Optional[str] = None
        self.reason: str = detail
        if sample is not None and sample[1] is not None:
            self.index, self.path, self.name, self.reason = sample
            return
        if sample is not None:  # no path (no listing kept, a path past
            # 4095 bytes): the index is the library's, the rest is read
            # from the message as far as it goes
            self.index, self.reason = sample[0], sample[3]
        names = detail if names is None else names
        head, named_head = self._HEAD.search(detail), self._HEAD.search(names)
        if not head or not named_head:
            self._whole_dataset(detail, names)
            return
        text, named = detail[head.end():], names[named_head.end():]
        packed, named_packed = self._PACKED.match(text), \
            self._PACKED.match(named)
        if packed and named_packed:
            text, named = text[packed.end():], named[named_packed.end():]
            separator = ": "
        elif packed or named_packed:
            return
        else:
            separator = "): "
        found = self._path_and_reason(text, named, separator)
        if found is None:
            return
        self.index = int(head.group("index"))
        path, self.reason = found
        # a path shortened in the middle is no file's: None, not a wrong
        # one (a file that is gone since the listing keeps its path)
        shortened = self._ELIDED in path and not os.path.lexists(path)
        self.path = None if shortened else path
        if named_packed:
            self.name = named_packed.group("name")

    def _whole_dataset(self, detail: str, names: str) -> None:
        """"cannot open dataset 'PATH': REASON", a packed file damaged as a
        whole (its header or index): no sample, the file and the reason."""
        opening = "cannot open dataset '"
        if not detail.startswith(opening) or not names.startswith(opening):
            return
        found = self._path_and_reason(detail[len(opening):],
                                      names[len(opening):], "': ")
        if found is not None:
            self.path, self.reason = found

    @staticmethod
    def _path_and_reason(text: str, named: str,
                         separator: str) -> Optional[Tuple[str, str]]:
        """The path (from named) and the reason (from text) either side of
        the separator that ends the path: the first that leaves a file on
        disk (not a folder: the file's class folder may be named like the
        start of another's), else the first. The separator is ASCII, so
        the path holds as many in both strings (only a name's bytes that
        are not UTF-8 differ); the reason may hold more."""
        cuts = [m.start() for m in re.finditer(re.escape(separator), named)]
        chosen = next((n for n, cut in enumerate(cuts)
                       if os.path.lexists(named[:cut]) and
                       not os.path.isdir(named[:cut])), 0)
        text_cuts = [m.start()
                     for m in re.finditer(re.escape(separator), text)]
        if not cuts or len(text_cuts) <= chosen:
            return None
        return (named[:cuts[chosen]],
                text[text_cuts[chosen] + len(separator):])


class ProducerDied(RingfeedError, RuntimeError):
    """A producer process died or stopped answering and was not replaced
    (on_producer_death="fail", or the respawn limit was reached); the
    detail names the pid, the signal, the batch and the sample. A
    RuntimeError, as DataLoader's for a worker that died."""


class ProducerFailed(RingfeedError, RuntimeError):
    """A producer process stopped with an error it reported."""


class ProducerNotFound(RingfeedError):
    """The ringfeed-producer helper that runs the producers is missing."""


class ForkError(RingfeedError, RuntimeError):
    """A loader was used in a child of fork(): its producers and ring are
    the parent's. Open a new Loader in the child."""


class RingCorrupted(RingfeedError, RuntimeError):
    """The shared ring was overwritten (the wrong build of the producer
    helper, or memory damage)."""


class BatchReleased(RingfeedError, ValueError):
    """A Batch was read after its slot went back to the producers (the
    loop took further batches, or the loader closed). Copy what you keep
    (``batch.images.clone()``) while the batch is current. A ValueError,
    as the use of a released memoryview is."""


class LoaderClosed(RingfeedError, ValueError):
    """The Loader was used after close() (a ValueError, as a closed file's
    and a released memoryview's use are)."""


_BY_CODE: Dict[int, Type[RingfeedError]] = {
    _capi.E_CORRUPT_SAMPLE: CorruptSample,
    _capi.E_PRODUCER_DIED: ProducerDied,
    _capi.E_PRODUCER_FAILED: ProducerFailed,
    _capi.E_NO_PRODUCER_BINARY: ProducerNotFound,
    _capi.E_FORK_UNSAFE: ForkError,
    _capi.E_BAD_HANDLE: RingCorrupted,
    _capi.E_ABI: RingCorrupted,
    -errno.EINVAL: ConfigError,
    -errno.ENOENT: DatasetNotFound,
    -errno.ENOTDIR: DatasetNotFound,
    -errno.EACCES: DatasetUnreadable,
    -errno.EPERM: DatasetUnreadable,
}


def from_code(code: int, detail: Union[str, bytes],
              sample: Optional[SampleFields] = None) -> RingfeedError:
    """The exception for a library return code and its detail (the
    library's bytes, or text), the detail put in Python's terms (keywords
    for C parameters); for a CorruptSample, the sample's fields when the
    library gave them."""
    names = None
    if isinstance(detail, bytes):
        names = os.fsdecode(detail)  # file names as open() takes them
        detail = detail.decode(errors="replace")
    detail = user_terms(detail) if detail else _capi.strerror(code)
    if code == -errno.ENOMEM:
        return RingfeedError(detail, code)
    cls = _BY_CODE.get(code, RingfeedError)
    if cls is CorruptSample and "not a ringfeed packed file" in detail:
        cls = DatasetNotFound  # a file that is no dataset at all
    if cls is CorruptSample:
        return CorruptSample(detail, code, names, sample)
    # rf_loader_open() begins the detail of the dataset's own errors so,
    # and no other's (ringfeed.h): an -EACCES after it is not the dataset's
    # (a helper, a memfd, ...)
    of_dataset = detail.startswith("cannot open dataset")
    if cls is DatasetUnreadable and not of_dataset:
        cls = RingfeedError
    elif cls is RingfeedError and of_dataset and code < 0:
        cls = DatasetError  # an errno of its own: ELOOP, ENAMETOOLONG, EIO
    return cls(detail, code)
