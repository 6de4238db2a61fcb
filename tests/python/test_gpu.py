"""device="cuda": the batch on the GPU holds the CPU path's bytes; every
dtype and normalisation equals a CPU reference; the tensor is ordered on
the caller's current stream and its memory is reused only after that
stream has passed its use; the ring is registered with CUDA and a slot
goes back to the producers only after its copy has finished.

Skipped without a GPU (torch.cuda.is_available()). On a GPU machine also
run under compute-sanitizer:
  compute-sanitizer --tool memcheck python3 -m pytest tests/python/test_gpu.py
"""

from __future__ import annotations

import ctypes

import pytest

import ringfeed
from helpers import dataset

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.skipif(not torch.cuda.is_available(),
                                reason="no CUDA GPU visible to torch")

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
TOLERANCE = {torch.float32: (2e-6, 2e-6), torch.float16: (1e-3, 1e-3),
             torch.bfloat16: (8e-3, 8e-3)}
LONG = 50_000_000  # GPU clock cycles of torch.cuda._sleep: tens of ms


def pairs(root, batch, **args):
    """(CPU uint8 batch, GPU batch) of two loaders with the same args."""
    device = args.pop("device", "cuda")
    dtype, mean, std = (args.pop(k, None) for k in ("dtype", "mean", "std"))
    cpu = ringfeed.Loader(root, batch, **args)
    gpu = ringfeed.Loader(root, batch, device=device, dtype=dtype, mean=mean,
                          std=std, **args)
    with cpu, gpu:
        for (c, cl), (g, gl) in zip(cpu, gpu):
            yield c.clone(), cl, g, gl


def reference(uint8, layout, mean, std, dtype):
    x = uint8.to(torch.float64) / 255.0
    if mean is not None:
        shape = [1, -1, 1, 1] if layout == "nchw" else [1, 1, 1, -1]
        x = (x - torch.tensor(mean, dtype=torch.float64).view(shape)) / \
            torch.tensor(std, dtype=torch.float64).view(shape)
    return x.to(dtype)


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
@pytest.mark.parametrize("device", ["cuda", "cuda:0"])
def test_bytes_equal_the_cpu_path(tmp_path_factory, layout, device):
    root = dataset(tmp_path_factory)
    count = 0
    for c, cl, g, gl in pairs(root, 16, size=32, layout=layout, seed=4,
                              device=device):
        assert g.is_cuda and g.device == torch.device("cuda", 0)
        assert g.dtype == torch.uint8 and g.shape == c.shape
        assert torch.equal(g.cpu(), c)
        assert torch.equal(gl, cl)
        count += 1
    assert count == 10


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16,
                                   torch.bfloat16],
                         ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("normalise", [False, True],
                         ids=["scaled", "normalised"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_dtypes_equal_the_cpu_reference(tmp_path_factory, dtype, normalise,
                                        layout):
    root = dataset(tmp_path_factory)
    mean, std = (MEAN, STD) if normalise else (None, None)
    rtol, atol = TOLERANCE[dtype]
    count = 0
    for c, _, g, _ in pairs(root, 32, size=24, layout=layout, dtype=dtype,
                            mean=mean, std=std):
        assert g.is_cuda and g.dtype == dtype
        torch.testing.assert_close(g.cpu(), reference(c, layout, mean, std,
                                                      dtype),
                                   rtol=rtol, atol=atol)
        count += 1
    assert count == 5


def test_ordered_on_the_callers_stream(tmp_path_factory):
    """The loop runs on a side stream of its own, each step queued behind
    a long kernel and never waited for on the host: every result is still
    right (the stream waits for the batch), and a batch's memory is not
    handed to a later batch while the stream may still read it."""
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, seed=6, shuffle=False) as cpu:
        want = [int(images.to(torch.int64).sum()) for images, _ in cpu]
    stream = torch.cuda.Stream()
    sums = []
    with torch.cuda.stream(stream):
        with ringfeed.Loader(root, 16, size=32, seed=6, shuffle=False,
                             device="cuda") as gpu:
            for images, _ in gpu:
                assert images.is_cuda
                torch.cuda._sleep(LONG)  # the step before reading
                sums.append(images.to(torch.int64).sum())
                del images  # only the stream's pending work holds it
    stream.synchronize()
    assert [int(s) for s in sums] == want


def test_default_stream_consumer(tmp_path_factory):
    """The same with the default stream busy when each batch is taken."""
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, seed=6, shuffle=False) as cpu:
        want = [images.clone() for images, _ in cpu]
    got = []
    with ringfeed.Loader(root, 16, size=32, seed=6, shuffle=False,
                         device="cuda") as gpu:
        for images, _ in gpu:
            torch.cuda._sleep(LONG)
            got.append(images.clone())  # on the current stream
    torch.cuda.synchronize()
    assert len(got) == len(want)
    assert all(torch.equal(g.cpu(), w) for g, w in zip(got, want))


class PointerAttributes(ctypes.Structure):
    """struct cudaPointerAttributes (CUDA 11 and later), with room to
    spare."""

    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int),
                ("devicePointer", ctypes.c_void_p),
                ("hostPointer", ctypes.c_void_p),
                ("spare", ctypes.c_byte * 64)]


MEMORY_TYPE_HOST = 1  # cudaMemoryTypeHost: page-locked, registered


def torchs_cudart():
    """The CUDA runtime torch loaded (the same library, so the same
    state), or None when it is linked in statically."""
    torch.cuda.init()
    with open("/proc/self/maps") as f:
        paths = {line.split()[-1] for line in f if "libcudart" in line}
    if not paths:
        return None
    cudart = ctypes.CDLL(sorted(paths)[0])
    cudart.cudaPointerGetAttributes.argtypes = [
        ctypes.POINTER(PointerAttributes), ctypes.c_void_p]
    return cudart


def memory_type(cudart, address):
    attributes = PointerAttributes()
    rc = cudart.cudaPointerGetAttributes(ctypes.byref(attributes), address)
    cudart.cudaGetLastError()  # leave no error behind for torch
    return attributes.type if rc == 0 else -rc


def test_ring_is_registered(tmp_path_factory):
    """The ring is page-locked for DMA with torch's runtime
    (cudaHostRegister) while the loader is open, and unregistered by
    close()."""
    cudart = torchs_cudart()
    if cudart is None:
        pytest.skip("torch's CUDA runtime is not a shared library here")
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, device="cuda") as loader:
        next(iter(loader))
        base, size = loader._run.base, loader._run.size
        for address in (base, base + size // 2, base + size - 1):
            assert memory_type(cudart, address) == MEMORY_TYPE_HOST, \
                f"ring byte {address - base} is not registered with CUDA"
    assert memory_type(cudart, base) != MEMORY_TYPE_HOST, \
        "the ring is still registered after close()"


def test_slot_released_only_after_its_copy(tmp_path_factory):
    """The copies are held back behind a long kernel on the loader's own
    stream while the loop moves on with few slots: were a slot given back
    before its copy finished, producers would overwrite it first and the
    GPU batch would differ from the CPU path's."""
    root = dataset(tmp_path_factory)
    args = dict(size=32, seed=8, shuffle=False, slots=3, num_workers=2)
    with ringfeed.Loader(root, 8, **args) as cpu:
        want = [images.clone() for images, _ in cpu]
    got = []
    with ringfeed.Loader(root, 8, device="cuda", **args) as gpu:
        side = gpu._uploader.stream
        for images, _ in gpu:
            with torch.cuda.stream(side):
                torch.cuda._sleep(LONG)  # delays the next batch's copy
            got.append(images.clone())
    torch.cuda.synchronize()
    assert len(got) == len(want) == 20
    for n, (g, w) in enumerate(zip(got, want)):
        assert torch.equal(g.cpu(), w), f"batch {n} differs from the CPU path"


def test_gpu_batches_are_the_callers(tmp_path_factory):
    """A GPU tensor is torch's: kept past later batches and close(), it
    does not change."""
    root = dataset(tmp_path_factory)
    kept = []
    with ringfeed.Loader(root, 16, size=32, device="cuda") as loader:
        for images, _ in loader:
            kept.append((images, images.clone()))
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in kept)


def test_missing_device_index_fails_at_construction(tmp_path_factory):
    root = dataset(tmp_path_factory, "tiny")
    index = torch.cuda.device_count()
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, device=f"cuda:{index}")
    assert "device=" in str(caught.value)
