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


def test_uint8_dtype_on_the_gpu_is_the_cpu_bytes(tmp_path_factory):
    root = dataset(tmp_path_factory)
    for c, _, g, _ in pairs(root, 16, size=32, dtype=torch.uint8):
        assert g.is_cuda and g.dtype == torch.uint8
        assert torch.equal(g.cpu(), c)


def test_ordered_on_the_callers_stream(tmp_path_factory):
    """The loop runs on a side stream of its own, each step queued behind
    a long kernel and never waited for on the host: every result is still
    right, and a batch's memory is not handed to a later batch while the
    stream may still read it (record_stream). The kernel comes before the
    read, so the copy is done by then anyway: the caller's wait on the
    copy is test_caller_waits_for_the_copy's."""
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


def test_caller_waits_for_the_copy(tmp_path_factory):
    """The copies are held back behind a long kernel on the loader's own
    stream, and the caller reads each batch at once on its stream: only
    the stream's wait on the batch's event (wait_event) makes it read the
    copied bytes rather than a buffer not yet written."""
    root = dataset(tmp_path_factory)
    args = dict(size=32, seed=9, shuffle=False)
    with ringfeed.Loader(root, 16, **args) as cpu:
        want = [int(images.to(torch.int64).sum()) for images, _ in cpu]
    sums = []
    with ringfeed.Loader(root, 16, device="cuda", **args) as gpu:
        side = gpu._uploader.stream
        with torch.cuda.stream(side):
            torch.cuda._sleep(LONG)  # the first batch's copy waits too
        for images, _ in gpu:
            sums.append(images.to(torch.int64).sum())  # no host wait
            with torch.cuda.stream(side):
                torch.cuda._sleep(LONG)  # the next batch's copy waits
    assert [int(s) for s in sums] == want


def test_one_dma_per_batch_from_pinned_memory(tmp_path_factory):
    """Each batch reaches the GPU in one host-to-device copy from pinned
    (registered) memory: no staging copy through pageable memory."""
    from torch.profiler import ProfilerActivity, profile
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, device="cuda") as loader:
        batches = len(loader)
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in loader:
                pass
            torch.cuda.synchronize()
    copies = [e.name for e in prof.events() if "Memcpy HtoD" in e.name]
    assert len(copies) == batches, copies
    assert all("Pinned" in name for name in copies), copies


def test_ring_is_registered(tmp_path_factory):
    """The ring is page-locked for DMA with torch's runtime
    (cudaHostRegister) while the loader is open, and unregistered by
    close(). Tensor.is_pinned() asks torch's runtime
    (cudaPointerGetAttributes), so it sees the registration."""
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, device="cuda") as loader:
        next(iter(loader))
        arena = loader._run.arena  # the whole ring, kept mapped by this
        size = arena.numel()
        for offset in (0, size // 2, size - 1):
            assert arena[offset:offset + 1].is_pinned(), \
                f"ring byte {offset} is not registered with CUDA"
    assert not arena.is_pinned(), "the ring is still registered after close()"


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
    equals the CPU path's batch, and its Batch never reports it released
    (its slot went back to the producers once copied, which the tensor
    does not need)."""
    root = dataset(tmp_path_factory)
    args = dict(size=32, seed=5, shuffle=False, slots=4)
    with ringfeed.Loader(root, 16, **args) as cpu:
        want = [images.clone() for images, _ in cpu]
    with ringfeed.Loader(root, 16, device="cuda", **args) as loader:
        kept = list(loader.batches())
    assert len(kept) == len(want)
    for n, (batch, w) in enumerate(zip(kept, want)):
        assert torch.equal(batch.images.cpu(), w), f"batch {n} changed"


def test_missing_device_index_fails_at_construction(tmp_path_factory):
    root = dataset(tmp_path_factory, "tiny")
    index = torch.cuda.device_count()
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, device=f"cuda:{index}")
    assert "device=" in str(caught.value)
