#!/usr/bin/env python3
"""python-loop.py - a training loop in Python fed by ringfeed through ctypes,
reading every batch where the producers wrote it (zero-copy). Standard
library only; numpy and torch, when they can be imported, get views of
the same memory too.

    python3 examples/python-loop.py DATASET [--batch N] [--size S]
                                    [--epochs E] [--layout nhwc|nchw]
                                    [--library PATH]

DATASET is a folder of class folders (torchvision ImageFolder's labels) or
a packed file written by ringfeed-pack. libringfeed is --library PATH,
else $RINGFEED_LIBRARY, else the one ctypes.util.find_library("ringfeed")
finds (an installed ringfeed). In a build tree, where neither the library
nor the producer helper is installed:

    RINGFEED_PRODUCER=_build/tools/ringfeed-producer \\
    RINGFEED_LIBRARY=_build/.libs/libringfeed.so \\
        python3 examples/python-loop.py /tmp/synth --batch 64 --epochs 2

The lifetime rule, the same as in C: a batch's pixels, labels and indices
lie in the shared ring and are valid only until the batch is released
(rf_loader_release), after which producers write the next batch there.
Loader below releases each batch when the loop asks for the next one, or
leaves the loop; so a view from one step must not be used in the next.
Copy what you keep: bytes(view), numpy's array.copy(), torch's
tensor.clone(), or the .to("cuda") that a GPU step does anyway.

Prints the batches and samples of each epoch and two checksums over every
sample; tests/test-python.sh compares them with the same sums computed in
C (tests/python-reference.c). Exits 1 when the run fails, with ringfeed's
message and detail, and 2 on bad usage.
"""

import argparse
import ctypes
import ctypes.util
import errno
import os
import sys
import time
import zlib

try:
    import numpy as np
except ImportError:
    np = None
try:
    import torch
except ImportError:
    torch = None

# ---- the C API: the numbers and types of include/ringfeed.h ------------

# The parameters and values used here: their banded numbers since 0.2
# (the header fixes them forever; 0.1's numbers 1..42 are still accepted).
RF_PARAM_BATCH_SIZE = 64
RF_PARAM_HEIGHT = 65
RF_PARAM_WIDTH = 66
RF_PARAM_LAYOUT = 68
RF_PARAM_EPOCHS = 81
RF_LAYOUT_NHWC = 0
RF_LAYOUT_NCHW = 1

# The header this file mirrors: RF_VERSION_NUMBER of ringfeed 0.2.0.
RF_VERSION_NUMBER = 200


class RfBatch(ctypes.Structure):
    """rf_batch, field for field, in the header's order and with its types.

    ctypes lays a Structure out by the C compiler's rules for the platform,
    so the fields only need the right types in the right order: size_t is
    c_size_t, an enum (rf_layout) is an int, and a pointer is c_void_p or
    POINTER(type). The library writes sizeof(rf_batch) bytes into it at
    every rf_loader_next(), so a field missing here would be an overflow,
    and one of the wrong size would shift every field after it.
    """

    _fields_ = [
        ("data", ctypes.c_void_p),  # samples * sample_bytes bytes
        ("bytes", ctypes.c_size_t),  # samples * sample_bytes
        ("sample_bytes", ctypes.c_size_t),  # height * width * channels
        ("samples", ctypes.c_uint32),  # the last batch may be short
        ("height", ctypes.c_uint32),
        ("width", ctypes.c_uint32),
        ("channels", ctypes.c_uint32),
        ("layout", ctypes.c_int),  # rf_layout
        ("slot", ctypes.c_uint32),
        ("labels", ctypes.POINTER(ctypes.c_int64)),  # samples entries
        ("indices", ctypes.POINTER(ctypes.c_uint64)),  # dataset indices
        ("epoch", ctypes.c_uint64),
        ("number", ctypes.c_uint64),  # batch number within the epoch
        ("sequence", ctypes.c_uint64),  # batch number across epochs
        ("handle", ctypes.c_uint64),
        ("skipped", ctypes.c_uint32),
        ("reserved32_", ctypes.c_uint32),
        ("reserved_", ctypes.c_uint64 * 5),
    ]


# Where each field of rf_batch lies on 64-bit Linux (LP64: pointers and
# size_t 8 bytes, uint32_t and enums 4), worked out from the header: every
# field starts at a multiple of its own size, so C adds no padding, and
# the size is 104 + 5 * 8 = 144 bytes. The library has no call that gives
# sizeof(rf_batch) or an offset at run time, so check_batch_layout() holds
# RfBatch to this table, and tests/test-python.sh compares RfBatch with
# offsetof() and sizeof compiled from the header, on any platform.
RF_BATCH_LP64 = {
    "data": 0, "bytes": 8, "sample_bytes": 16, "samples": 24,
    "height": 28, "width": 32, "channels": 36, "layout": 40, "slot": 44,
    "labels": 48, "indices": 56, "epoch": 64, "number": 72,
    "sequence": 80, "handle": 88, "skipped": 96, "reserved32_": 100,
    "reserved_": 104,
}
RF_BATCH_LP64_SIZE = 144


def check_batch_layout():
    """Fails unless RfBatch matches the table above (on LP64 platforms)."""
    if ctypes.sizeof(ctypes.c_void_p) != 8:
        return  # another ABI: the test's offsetof() comparison covers it
    offsets = {name: getattr(RfBatch, name).offset
               for name, _ in RfBatch._fields_}
    if (offsets != RF_BATCH_LP64
            or ctypes.sizeof(RfBatch) != RF_BATCH_LP64_SIZE):
        raise RuntimeError(
            f"RfBatch does not match rf_batch: offsets {offsets}, "
            f"sizeof {ctypes.sizeof(RfBatch)}, expected {RF_BATCH_LP64} "
            f"and {RF_BATCH_LP64_SIZE}")


# Every call used here: (name, result type, argument types), with its C
# prototype above it. Without them ctypes would pass each Python int as a
# C int and read each result as one, cutting 64-bit pointers in half.
# rf_config and rf_loader are opaque: a c_void_p holds either.
_PROTOTYPES = [
    # unsigned rf_version(void);
    ("rf_version", ctypes.c_uint, []),
    # const char *rf_strerror(int code);
    ("rf_strerror", ctypes.c_char_p, [ctypes.c_int]),
    # rf_config *rf_config_create(void);
    ("rf_config_create", ctypes.c_void_p, []),
    # void rf_config_free(rf_config *cfg);
    ("rf_config_free", None, [ctypes.c_void_p]),
    # int rf_config_set(rf_config *cfg, rf_param param, int64_t value);
    ("rf_config_set", ctypes.c_int,
     [ctypes.c_void_p, ctypes.c_int, ctypes.c_int64]),
    # int rf_config_set_path(rf_config *cfg, const char *path);
    ("rf_config_set_path", ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]),
    # const char *rf_config_error(const rf_config *cfg);
    ("rf_config_error", ctypes.c_char_p, [ctypes.c_void_p]),
    # int rf_loader_open(rf_loader **out, const rf_config *cfg,
    #                    char **errp);
    ("rf_loader_open", ctypes.c_int,
     [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
      ctypes.POINTER(ctypes.c_void_p)]),
    # int rf_loader_next(rf_loader *loader, rf_batch *batch);
    ("rf_loader_next", ctypes.c_int,
     [ctypes.c_void_p, ctypes.POINTER(RfBatch)]),
    # int rf_loader_release(rf_loader *loader, const rf_batch *batch);
    ("rf_loader_release", ctypes.c_int,
     [ctypes.c_void_p, ctypes.POINTER(RfBatch)]),
    # const char *rf_loader_error(const rf_loader *loader);
    ("rf_loader_error", ctypes.c_char_p, [ctypes.c_void_p]),
    # void rf_loader_close(rf_loader *loader);
    ("rf_loader_close", None, [ctypes.c_void_p]),
]

# rf_loader_open()'s detail message is malloc'd for the caller to free(),
# with the C library's free(): that of this process, which libringfeed
# uses too.
_libc = ctypes.CDLL(None)
_libc.free.restype = None
_libc.free.argtypes = [ctypes.c_void_p]


def load_library(path=None):
    """Opens libringfeed (path, else $RINGFEED_LIBRARY, else an installed
    one) and declares every call used here."""
    check_batch_layout()
    path = (path or os.environ.get("RINGFEED_LIBRARY")
            or ctypes.util.find_library("ringfeed"))
    if not path:
        raise OSError("libringfeed not found: pass --library PATH or set "
                      "RINGFEED_LIBRARY (or install ringfeed)")
    lib = ctypes.CDLL(path)
    for name, restype, argtypes in _PROTOTYPES:
        function = getattr(lib, name)
        function.restype = restype
        function.argtypes = argtypes
    # rf_batch is part of the ABI of one minor version (0.2 here).
    if lib.rf_version() // 100 != RF_VERSION_NUMBER // 100:
        raise OSError(f"{path} is ringfeed {version_text(lib)}; this file "
                      f"mirrors the 0.2 header")
    return lib


def version_text(lib):
    """The loaded library's version as "MAJOR.MINOR.PATCH"."""
    v = lib.rf_version()
    return f"{v // 10000}.{v // 100 % 100}.{v % 100}"


class RingfeedError(Exception):
    """A ringfeed call returned a negative code (-errno or RF_E_*).

    code: the number; name: rf_strerror(code); detail: what the library
    kept about this failure (the path, the producer, the sample), from
    rf_config_error(), rf_loader_error() or rf_loader_open()'s message.
    """

    def __init__(self, lib, call, code, detail):
        self.call = call
        self.code = code
        self.name = lib.rf_strerror(code).decode()
        self.detail = detail.decode(errors="replace") if detail else ""
        text = f"{call}: {self.name}"
        super().__init__(f"{text}: {self.detail}" if self.detail else text)


# ---- the loader ---------------------------------------------------------


class Loader:
    """A ringfeed loader over a dataset; iterating it yields its batches.

        with Loader(lib, "/data/train", batch_size=64, epochs=2) as loader:
            for pixels, labels, batch in loader:
                train_step(pixels, labels)

    Each step gives (pixels, labels, batch): pixels, a read-only memoryview
    of the batch's uint8 pixels shaped (N, H, W, C), or (N, C, H, W) for
    RF_LAYOUT_NCHW; labels, a read-only memoryview of its N int64 labels;
    batch, the RfBatch itself (indices, epoch, number, ...). All three read
    the shared ring in place: no copy is made.

    The batch of a step is released when the loop asks for the next one,
    and when the loop ends early (break, return, an exception): after
    that its memory is the producers' again. Views from one step must
    not be used in the next; copy what you keep. close() (or the end of
    the with block) stops the producers and unmaps the ring: a view used
    after it would crash the process.
    """

    def __init__(self, lib, path, *, batch_size=32, size=224, epochs=1,
                 layout=RF_LAYOUT_NHWC):
        self._lib = lib
        self._handle = None
        cfg = lib.rf_config_create()
        if not cfg:
            raise MemoryError("rf_config_create")
        try:
            for param, value in ((RF_PARAM_BATCH_SIZE, batch_size),
                                 (RF_PARAM_HEIGHT, size),
                                 (RF_PARAM_WIDTH, size),
                                 (RF_PARAM_EPOCHS, epochs),
                                 (RF_PARAM_LAYOUT, layout)):
                self._check_config(cfg, "rf_config_set",
                                   lib.rf_config_set(cfg, param, value))
            self._check_config(
                cfg, "rf_config_set_path",
                lib.rf_config_set_path(cfg, os.fsencode(path)))
            handle = ctypes.c_void_p()
            why = ctypes.c_void_p()
            rc = lib.rf_loader_open(ctypes.byref(handle), cfg,
                                    ctypes.byref(why))
            if rc < 0:
                detail = ctypes.string_at(why.value) if why.value else None
                _libc.free(why)  # malloc'd by the library; ours to free
                raise RingfeedError(lib, "rf_loader_open", rc, detail)
            self._handle = handle.value
        finally:
            lib.rf_config_free(cfg)  # the loader keeps its own copy

    def _check_config(self, cfg, call, rc):
        if rc < 0:
            raise RingfeedError(self._lib, call, rc,
                                self._lib.rf_config_error(cfg))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def close(self):
        """Stops the producers and frees the ring (rf_loader_close); a
        second call does nothing."""
        handle, self._handle = self._handle, None
        if handle:
            self._lib.rf_loader_close(handle)

    def __iter__(self):
        while self._handle:
            batch = RfBatch()
            rc = self._lib.rf_loader_next(self._handle, ctypes.byref(batch))
            if rc == -errno.EINTR:
                continue  # a signal; after Ctrl-C Python raises here
            if rc == 0:
                return  # the end of the last epoch
            if rc < 0:  # the loader can only be closed now
                raise RingfeedError(self._lib, "rf_loader_next", rc,
                                    self._lib.rf_loader_error(self._handle))
            check_batch(batch)
            try:
                yield pixels_view(batch), labels_view(batch), batch
            finally:
                # Here when the loop asks for the next batch, and when it
                # leaves early (Python then closes this generator).
                self._release(batch)

    def _release(self, batch):
        if not self._handle:
            return  # closed: rf_loader_close() took every batch back
        rc = self._lib.rf_loader_release(self._handle, ctypes.byref(batch))
        if rc < 0:
            raise RingfeedError(self._lib, "rf_loader_release", rc,
                                self._lib.rf_loader_error(self._handle))


def check_batch(batch):
    """A cheap check on every batch: its sizes must agree with each other,
    as they cannot if RfBatch reads the wrong bytes."""
    if not (batch.bytes == batch.samples * batch.sample_bytes
            and batch.sample_bytes
            == batch.height * batch.width * batch.channels
            and batch.layout in (RF_LAYOUT_NHWC, RF_LAYOUT_NCHW)):
        raise RuntimeError("rf_batch does not add up: is RfBatch the "
                           "header's rf_batch?")


# ---- zero-copy views of a batch ----------------------------------------


def ring_bytes(batch):
    """The batch's pixel bytes as a ctypes array at batch.data: a view of
    the ring, not a copy."""
    return (ctypes.c_uint8 * batch.bytes).from_address(batch.data)


def pixels_view(batch):
    """The pixels as a read-only memoryview shaped like the batch."""
    if batch.layout == RF_LAYOUT_NCHW:
        shape = (batch.samples, batch.channels, batch.height, batch.width)
    else:
        shape = (batch.samples, batch.height, batch.width, batch.channels)
    return memoryview(ring_bytes(batch)).toreadonly().cast("B", shape)


def _array_at(pointer, ctype, count, fmt):
    """count items of ctype at a POINTER's address, as a read-only
    memoryview of format fmt ('q': int64, 'Q': uint64). No copy."""
    address = ctypes.cast(pointer, ctypes.c_void_p).value
    items = (ctype * count).from_address(address)
    return memoryview(items).toreadonly().cast("B").cast(fmt)


def labels_view(batch):
    """The batch's labels (int64, in the ring too)."""
    return _array_at(batch.labels, ctypes.c_int64, batch.samples, "q")


def indices_view(batch):
    """The dataset index of each sample of the batch (uint64)."""
    return _array_at(batch.indices, ctypes.c_uint64, batch.samples, "Q")


def numpy_views(pixels, labels):
    """numpy arrays over the same memory: np.asarray() takes the
    memoryview's shape and type (uint8, int64) and copies nothing. Read
    only, as the memoryviews are."""
    return np.asarray(pixels), np.asarray(labels)


def torch_views(batch, shape):
    """torch tensors over the same memory. torch.frombuffer() copies
    nothing; it warns about read-only buffers (torch has no read-only
    tensors), so it gets the ctypes arrays themselves. They are read-only
    all the same: never write into the ring."""
    images = torch.frombuffer(ring_bytes(batch), dtype=torch.uint8)
    address = ctypes.cast(batch.labels, ctypes.c_void_p).value
    labels = (ctypes.c_int64 * batch.samples).from_address(address)
    return (images.view(shape),
            torch.frombuffer(labels, dtype=torch.int64))


def train_step(pixels, labels, batch):
    """Stands in for forward + backward + optimiser step: gives numpy and
    torch, when importable, the batch without a copy, and checks that they
    read the ring itself."""
    if np is not None:
        images, targets = numpy_views(pixels, labels)
        assert images.ctypes.data == batch.data  # the ring, not a copy
        assert images.shape == pixels.shape and targets.dtype == np.int64
        # A real step computes here: images.mean(), a model's forward...
    if torch is not None:
        images, targets = torch_views(batch, pixels.shape)
        assert images.data_ptr() == batch.data  # the ring, not a copy
        # On a GPU: images.to("cuda", non_blocking=False) copies the batch
        # to the device; that copy may outlive the step, the view may not.


# ---- what the run saw ---------------------------------------------------


class Totals:
    """Batches and samples per epoch, and two checksums of every sample
    that do not depend on the order batches arrive in, so that C can
    compute the same sums sample by sample (tests/python-reference.c):

        pixels = sum of (index + 1) * crc32(the sample's pixel bytes)
        labels = sum of (index + 1) * (label + 1)^2

    over every sample of every epoch, modulo 2^64, where index is the
    sample's dataset index. Weighting by it catches an image or a label
    delivered under the wrong index, and squaring the label catches
    indices and labels read one for the other (as a formula symmetric in
    the two would not)."""

    def __init__(self):
        self.epochs = {}  # epoch: [batches, samples]
        self.pixels = 0
        self.labels = 0

    def add(self, pixels, labels, batch):
        counts = self.epochs.setdefault(batch.epoch, [0, 0])
        counts[0] += 1
        counts[1] += batch.samples
        flat = pixels.cast("B")  # the same bytes, in one dimension
        size = batch.sample_bytes
        for i, index in enumerate(indices_view(batch)):
            weight = index + 1
            sample = flat[i * size:(i + 1) * size]  # a slice: no copy
            self.pixels = (self.pixels + weight * zlib.crc32(sample)) % 2**64
            label = labels[i] + 1
            self.labels = (self.labels + weight * label * label) % 2**64

    def print(self):
        for epoch, (batches, samples) in sorted(self.epochs.items()):
            print(f"epoch {epoch}: {batches} batches, {samples} samples")
        print(f"checksums: pixels {self.pixels:#018x}, "
              f"labels {self.labels:#018x}")


# ---- the program --------------------------------------------------------


def parse_args(argv):
    p = argparse.ArgumentParser(
        description="A training loop in Python fed by ringfeed (ctypes, "
                    "zero-copy).")
    p.add_argument("dataset", help="folder of class folders, or a pack")
    p.add_argument("--batch", type=int, default=32, help="default 32")
    p.add_argument("--size", type=int, default=224,
                   help="output height and width; default 224")
    p.add_argument("--epochs", type=int, default=1, help="default 1")
    p.add_argument("--layout", choices=("nhwc", "nchw"), default="nhwc")
    p.add_argument("--library", help="path of libringfeed.so")
    return p.parse_args(argv)


def main(argv):
    args = parse_args(argv)
    try:
        lib = load_library(args.library)
    except (OSError, RuntimeError) as e:
        print(f"python-loop: {e}", file=sys.stderr)
        return 1
    views = ["memoryview"]
    views += [f"numpy {np.__version__}"] if np is not None else []
    views += [f"torch {torch.__version__}"] if torch is not None else []
    print(f"ringfeed {version_text(lib)}; views: {', '.join(views)}")

    layout = RF_LAYOUT_NCHW if args.layout == "nchw" else RF_LAYOUT_NHWC
    totals = Totals()
    kept = None
    started = time.monotonic()
    try:
        with Loader(lib, args.dataset, batch_size=args.batch,
                    size=args.size, epochs=args.epochs,
                    layout=layout) as loader:
            for pixels, labels, batch in loader:
                train_step(pixels, labels, batch)
                totals.add(pixels, labels, batch)
                if kept is None:
                    # Kept past this step, so copied: after the release
                    # the view would read whatever the producers write
                    # next into this slot.
                    first = pixels.cast("B")[:batch.sample_bytes]
                    kept = (labels[0], bytes(first))
    except RingfeedError as e:
        print(f"python-loop: {e}", file=sys.stderr)
        return 1
    seconds = time.monotonic() - started

    totals.print()
    samples = sum(s for _, s in totals.epochs.values())
    print(f"{samples} samples in {seconds:.2f} s "
          f"({samples / seconds:.0f} samples/s)")
    if kept is not None:  # the copy outlives the loader
        label, image = kept
        print(f"first sample: label {label}, mean pixel "
              f"{sum(image) / len(image):.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
