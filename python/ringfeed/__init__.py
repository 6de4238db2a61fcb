"""ringfeed: batches of decoded images for PyTorch training loops, made by
producer processes straight into shared memory.

    import ringfeed
    loader = ringfeed.Loader("/data/imagenet/train", 256, size=224,
                             device="cuda", dtype=torch.float16,
                             mean=(0.485, 0.456, 0.406),
                             std=(0.229, 0.224, 0.225))
    for epoch in range(90):
        loader.set_epoch(epoch)
        for images, labels in loader:
            ...

See help(ringfeed.Loader) and docs/python.md.
"""

from __future__ import annotations

from ._capi import library_path
from .errors import (BatchReleased, ConfigError, ConfigTypeError,
                     CorruptSample, DatasetError,
                     DatasetNotFound, DatasetUnreadable, ForkError,
                     LoaderClosed, ProducerDied, ProducerFailed,
                     ProducerNotFound, RingCorrupted, RingfeedError)
from .loader import Batch, Loader, Synthetic
from .params import Param, param, params



def _version() -> str:
    """The installed distribution's version (pyproject.toml takes it from
    configure.ac); from a source tree, the loaded library's."""
    try:
        from importlib.metadata import PackageNotFoundError, version
        try:
            return version("ringfeed")
        except PackageNotFoundError:
            pass
        from . import _capi
        v = _capi.lib().rf_version()
        return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    except Exception:  # no library either: say so, do not fail the import
        return "unknown"


__version__ = _version()

__all__ = [
    "Loader", "Batch", "Synthetic", "Param", "params", "param",
    "library_path", "RingfeedError", "ConfigError", "ConfigTypeError",
    "DatasetError", "DatasetNotFound",
    "DatasetUnreadable", "CorruptSample", "ProducerDied", "ProducerFailed",
    "ProducerNotFound", "ForkError", "RingCorrupted", "BatchReleased",
    "LoaderClosed",
    "__version__",
]
