"""The C API of libringfeed through ctypes: loading the library, the
structures of include/ringfeed.h and the prototypes of the calls used.

Nothing here is public. The structures must match the header byte for
byte; tests/python/test_capi.py compares every offset with what the C
compiler puts there (tests/python-reference layout).

Why ctypes and not a compiled extension: the package is then one wheel
for every CPython from 3.9 on (no Python headers, no per-version build),
the C library's API is already a stable ABI with a table of its
parameters, and the binding makes one foreign call per batch, a few
microseconds against the milliseconds a batch takes to decode.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import errno
import os
import threading
from typing import List, Optional

__all__ = ["lib", "library_path"]

# The library's version this binding was written for (RF_VERSION_NUMBER)
# and the calls it needs from it (RINGFEED_0.2 and later).
MIN_VERSION = 200

# ---- the return codes (include/ringfeed.h, RF_ERROR_MAP) ----------------
E_ABI = -10001
E_BAD_HANDLE = -10002
E_PRODUCER_DIED = -10003
E_PRODUCER_FAILED = -10004
E_CORRUPT_SAMPLE = -10005
E_ALL_SLOTS_HELD = -10006
E_NO_PRODUCER_BINARY = -10007
E_FORK_UNSAFE = -10008
E_CUDA = -10009

# ---- enums -------------------------------------------------------------
PARAM_KIND_INTEGER = 0
PARAM_KIND_BOOLEAN = 1
PARAM_KIND_CHOICE = 2

SOURCE_SYNTHETIC = 0
SOURCE_EMPTY = 1
SOURCE_PATH = 2
SOURCE_SYNTHETIC_JPEG = 3

LAYOUT_NHWC = 0
LAYOUT_NCHW = 1


class Batch(ctypes.Structure):
    """struct rf_batch."""

    _fields_ = [
        ("data", ctypes.c_void_p),
        ("bytes", ctypes.c_size_t),
        ("sample_bytes", ctypes.c_size_t),
        ("samples", ctypes.c_uint32),
        ("height", ctypes.c_uint32),
        ("width", ctypes.c_uint32),
        ("channels", ctypes.c_uint32),
        ("layout", ctypes.c_int),
        ("slot", ctypes.c_uint32),
        ("labels", ctypes.c_void_p),
        ("indices", ctypes.c_void_p),
        ("epoch", ctypes.c_uint64),
        ("number", ctypes.c_uint64),
        ("sequence", ctypes.c_uint64),
        ("handle", ctypes.c_uint64),
        ("skipped", ctypes.c_uint32),
        ("reserved32_", ctypes.c_uint32),
        ("reserved_", ctypes.c_uint64 * 5),
    ]


class Stats(ctypes.Structure):
    """struct rf_stats."""

    _fields_ = [
        ("batches", ctypes.c_uint64),
        ("samples", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("wait_ns", ctypes.c_uint64),
        ("elapsed_ns", ctypes.c_uint64),
        ("producers", ctypes.c_uint32),
        ("slots", ctypes.c_uint32),
        ("producer_busy_ns", ctypes.c_uint64 * 64),
        ("failed_samples", ctypes.c_uint64),
        ("slots_at_producers", ctypes.c_uint32),
        ("slots_ready", ctypes.c_uint32),
        ("slots_with_user", ctypes.c_uint32),
        ("slots_free", ctypes.c_uint32),
        ("respawns", ctypes.c_uint64),
        ("batches_per_epoch", ctypes.c_uint64),
        ("dataset_samples", ctypes.c_uint64),
        ("rank", ctypes.c_uint32),
        ("world_size", ctypes.c_uint32),
        ("listing_digest", ctypes.c_uint64),
    ]


class ParamInfo(ctypes.Structure):
    """struct rf_param_info."""

    _fields_ = [
        ("param", ctypes.c_int),
        ("kind", ctypes.c_int),
        ("name", ctypes.c_char_p),
        ("doc", ctypes.c_char_p),
        ("choices", ctypes.c_char_p),
        ("default_value", ctypes.c_int64),
        ("min", ctypes.c_int64),
        ("max", ctypes.c_int64),
        ("reserved_", ctypes.c_uint64 * 4),
    ]


class SampleError(ctypes.Structure):
    """struct rf_sample_error."""

    _fields_ = [
        ("index", ctypes.c_uint64),
        ("epoch", ctypes.c_uint64),
        ("message", ctypes.c_char * 496),
    ]


class FailedSample(ctypes.Structure):
    """struct rf_failed_sample."""

    _fields_ = [
        ("index", ctypes.c_uint64),
        ("epoch", ctypes.c_uint64),
        ("path", ctypes.c_char * 4096),
        ("name", ctypes.c_char * 4096),
        ("reason", ctypes.c_char * 512),
    ]


class DatasetInfo(ctypes.Structure):
    """struct rf_dataset_info."""

    _fields_ = [
        ("format", ctypes.c_int),
        ("classes", ctypes.c_uint32),
        ("samples", ctypes.c_uint64),
        ("jpeg_samples", ctypes.c_uint64),
        ("zstd_samples", ctypes.c_uint64),
        ("height", ctypes.c_uint32),
        ("width", ctypes.c_uint32),
        ("channels", ctypes.c_uint32),
        ("layout", ctypes.c_int),
        ("dict_size", ctypes.c_uint64),
        ("listing_digest", ctypes.c_uint64),
        ("reserved", ctypes.c_uint64 * 7),
    ]


# void (*rf_message_fn)(void *user, const char *message)
MESSAGE_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p)

_vp = ctypes.c_void_p
_PROTOTYPES = [
    ("rf_version", ctypes.c_uint, []),
    ("rf_strerror", ctypes.c_char_p, [ctypes.c_int]),
    ("rf_param_at", ctypes.c_int, [ctypes.c_uint, ctypes.POINTER(ParamInfo)]),
    ("rf_config_create", _vp, []),
    ("rf_config_free", None, [_vp]),
    ("rf_config_set", ctypes.c_int, [_vp, ctypes.c_int, ctypes.c_int64]),
    ("rf_config_get", ctypes.c_int,
     [_vp, ctypes.c_int, ctypes.POINTER(ctypes.c_int64)]),
    ("rf_config_error", ctypes.c_char_p, [_vp]),
    ("rf_config_set_path", ctypes.c_int, [_vp, ctypes.c_char_p]),
    ("rf_config_continue", ctypes.c_int, [_vp, _vp]),
    ("rf_config_set_message_handler", ctypes.c_int, [_vp, MESSAGE_FN, _vp]),
    ("rf_loader_open", ctypes.c_int,
     [ctypes.POINTER(_vp), _vp, ctypes.POINTER(ctypes.c_void_p)]),
    ("rf_loader_next", ctypes.c_int, [_vp, ctypes.POINTER(Batch)]),
    ("rf_loader_release", ctypes.c_int, [_vp, ctypes.POINTER(Batch)]),
    ("rf_loader_interrupt", ctypes.c_int, [_vp]),
    ("rf_loader_close", None, [_vp]),
    ("rf_loader_arena", ctypes.c_int,
     [_vp, ctypes.POINTER(_vp), ctypes.POINTER(ctypes.c_size_t)]),
    ("rf_loader_keep_arena", ctypes.c_int, [_vp]),
    ("rf_loader_error", ctypes.c_char_p, [_vp]),
    ("rf_loader_stats", ctypes.c_int, [_vp, ctypes.POINTER(Stats)]),
    ("rf_loader_cpu_budget", ctypes.c_int,
     [_vp, ctypes.c_char_p, ctypes.c_size_t]),
    ("rf_loader_class_name", ctypes.c_int,
     [_vp, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]),
    ("rf_loader_sample_errors", ctypes.c_uint64,
     [_vp, ctypes.POINTER(SampleError), ctypes.c_size_t]),
    ("rf_loader_failed_sample", ctypes.c_int,
     [_vp, ctypes.POINTER(FailedSample)]),
    ("rf_dataset_open", ctypes.c_int,
     [ctypes.POINTER(_vp), ctypes.c_char_p, ctypes.POINTER(ctypes.c_void_p)]),
    ("rf_dataset_get_info", ctypes.c_int, [_vp, ctypes.POINTER(DatasetInfo)]),
    ("rf_dataset_class_name", ctypes.c_int,
     [_vp, ctypes.c_uint32, ctypes.c_char_p, ctypes.c_size_t]),
    ("rf_dataset_decode", ctypes.c_int,
     [_vp, _vp, ctypes.c_uint64, ctypes.c_uint64, _vp]),
    ("rf_dataset_error", ctypes.c_char_p, [_vp]),
    ("rf_dataset_close", None, [_vp]),
]

_lock = threading.Lock()
_lib: Optional[ctypes.CDLL] = None
_path: Optional[str] = None
_libc = ctypes.CDLL(None, use_errno=True)
_libc.free.argtypes = [ctypes.c_void_p]
_libc.free.restype = None
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.munmap.restype = ctypes.c_int


def _candidates() -> List[str]:
    """Where libringfeed may be, in the order tried: $RINGFEED_LIBRARY
    (a build tree, a test), the copy inside this package (a wheel), then
    the system's (an installed ringfeed)."""
    found = []
    env = os.environ.get("RINGFEED_LIBRARY")
    if env:
        return [env]
    bundled = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                           "_native", "libringfeed.so.0")
    if os.path.exists(bundled):
        found.append(bundled)
    system = ctypes.util.find_library("ringfeed")
    if system:
        found.append(system)
    return found


def _missing_library_hint(error: OSError, path: str) -> str:
    """What to do when a library libringfeed links is not on this machine:
    the wheel carries none of them (docs/python.md, "What the wheel
    holds")."""
    if not os.path.exists(path):
        return ("; give RINGFEED_LIBRARY the path of a libringfeed.so that "
                "exists, or unset it to use the package's own")
    if "cannot open shared object file" not in str(error):
        return ""
    return ("; ringfeed uses the system's libjpeg-turbo, TurboJPEG, zstd, "
            "libpng and libwebp: install the package that holds the missing "
            "file (on Debian 12: apt-get install libjpeg62-turbo "
            "libturbojpeg0 libzstd1 libpng16-16 libwebp7 libwebpdemux2), "
            "or build ringfeed on this machine (pip install . in its "
            "checkout)")


def _shadowed() -> str:
    """Where pip installed ringfeed when that is not this package (a
    checkout's python/ringfeed/ imported first, from the current folder
    or PYTHONPATH, which holds no library), else ""."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        from importlib.metadata import distribution
        dist = distribution("ringfeed")
        init = os.path.abspath(str(dist.locate_file("ringfeed/__init__.py")))
    except Exception:  # none installed, or no importlib.metadata: no hint
        return ""
    if not os.path.exists(init) or os.path.samefile(os.path.dirname(init),
                                                    here):
        return ""
    return os.path.dirname(os.path.dirname(init))


def _not_found() -> ImportError:
    site = _shadowed()
    if site:
        return ImportError(
            "libringfeed was not found: the ringfeed imported is "
            f"{os.path.dirname(os.path.abspath(__file__))}, "
            "a source tree's, which holds no library (Python took it "
            "first: it is in the current folder or on PYTHONPATH), "
            f"not the one installed in {site}: run from another folder "
            "or take its folder off PYTHONPATH, or set RINGFEED_LIBRARY to "
            "the path of a libringfeed.so (a build's _build/.libs/"
            "libringfeed.so)")
    return ImportError(
        "libringfeed was not found: install ringfeed with pip "
        "(pip install . in a ringfeed checkout builds it into the "
        "package), or set RINGFEED_LIBRARY to the path of "
        "libringfeed.so")


def _load() -> ctypes.CDLL:
    global _lib, _path
    candidates = _candidates()
    if not candidates:
        raise _not_found()
    path = candidates[0]
    try:
        cdll = ctypes.CDLL(path)
    except OSError as e:
        where = ("$RINGFEED_LIBRARY" if os.environ.get("RINGFEED_LIBRARY")
                 else "the package")
        hint = _missing_library_hint(e, path)
        raise ImportError(f"libringfeed at {path} (from {where}) cannot be "
                          f"loaded: {e}{hint}") from e
    for name, restype, argtypes in _PROTOTYPES:
        try:
            fn = getattr(cdll, name)
        except AttributeError as e:
            raise ImportError(
                f"libringfeed at {path} lacks {name}(): it is older than "
                "this package; install both from one ringfeed checkout") from e
        fn.restype = restype
        fn.argtypes = argtypes
    if cdll.rf_version() < MIN_VERSION:
        raise ImportError(f"libringfeed at {path} is version "
                          f"{cdll.rf_version()}, this package needs "
                          f"{MIN_VERSION} or later")
    _lib, _path = cdll, path
    return cdll


def lib() -> ctypes.CDLL:
    """The loaded library, loaded on first use."""
    if _lib is None:
        with _lock:
            if _lib is None:
                return _load()
    return _lib


def library_path() -> str:
    """The file the library was loaded from."""
    lib()
    return _path or ""


def strerror(code: int) -> str:
    """rf_strerror(): the message of a return code."""
    message: bytes = lib().rf_strerror(code)
    return message.decode(errors="replace")


def take_message(ptr: ctypes.c_void_p) -> bytes:
    """A malloc'd message the library handed over (errp), freed here: its
    bytes, which errors.from_code() decodes (a file name in it may not be
    UTF-8)."""
    if not ptr.value:
        return b""
    text = ctypes.string_at(ptr.value)
    _libc.free(ptr.value)
    return text


def munmap(base: int, size: int) -> None:
    """Unmaps memory the library handed over (rf_loader_keep_arena)."""
    if _libc.munmap(base, size) != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err or errno.EINVAL))
