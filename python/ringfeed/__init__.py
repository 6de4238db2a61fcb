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
from .errors import (BatchReleased, ConfigError, CorruptSample,
                     DatasetNotFound, ForkError, LoaderClosed, ProducerDied,
                     ProducerFailed, ProducerNotFound, RingCorrupted,
                     RingfeedError)
from .loader import Batch, Loader, Synthetic
from .params import Param, param, params

__version__ = "0.2.0"

__all__ = [
    "Loader", "Batch", "Synthetic", "Param", "params", "param",
    "library_path", "RingfeedError", "ConfigError", "DatasetNotFound",
    "CorruptSample", "ProducerDied", "ProducerFailed", "ProducerNotFound",
    "ForkError", "RingCorrupted", "BatchReleased", "LoaderClosed",
    "__version__",
]
