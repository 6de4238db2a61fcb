"""A CPU batch is a view of its slot in the shared ring: no copy. Its
data_ptr() lies inside the ring the loader mapped, consecutive batches sit
in different slots, and the labels and indices are copies."""

from __future__ import annotations

import pytest

import ringfeed
from helpers import dataset

torch = pytest.importorskip("torch")


def ring_of(loader):
    run = loader._run
    return run.base, run.size


@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_images_view_the_ring(tmp_path_factory, layout):
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, layout=layout,
                         num_workers=2) as loader:
        base, size = ring_of(loader)
        assert base and size > 0
        slot_bytes = 16 * 32 * 32 * 3
        starts = []
        for batch in loader.batches():
            images = batch.images
            start = images.data_ptr()
            end = start + images.numel() * images.element_size()
            assert base <= start and end <= base + size, (
                f"batch {batch.number}'s pixels at {start:#x}..{end:#x} are "
                f"not inside the ring {base:#x}..{base + size:#x}")
            assert images.is_contiguous()
            # labels and indices are the package's own memory
            for copy in (batch.labels, batch.indices):
                p = copy.data_ptr()
                assert not base <= p < base + size
            if starts:
                assert start != starts[-1], \
                    "two consecutive batches share one slot"
            starts.append(start)
        # the slots cycle: more batches than slots, fewer distinct places
        slots = loader.stats()["slots"]
        assert len(starts) > slots
        assert 2 <= len(set(starts)) <= slots
        # each slot is at least one batch long apart
        distinct = sorted(set(starts))
        assert all(b - a >= slot_bytes for a, b in zip(distinct, distinct[1:]))


def test_writing_the_view_writes_the_ring(tmp_path_factory):
    """The tensor is the slot's memory itself: a byte written through it is
    there when read through a view of the whole ring (the loader's own
    mapping) at that offset."""
    import ctypes
    import numpy as np
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 8, size=32, num_workers=1) as loader:
        base, size = ring_of(loader)
        ring = np.ctypeslib.as_array(
            (ctypes.c_uint8 * size).from_address(base))
        for images, labels in loader:
            offset = images.data_ptr() - base
            assert 0 <= offset and offset + images.numel() <= size
            was = ring[offset + 5:offset + 7].copy()
            new = (was + 101) % 256
            images.view(-1)[5] = int(new[0])
            images.view(-1)[6] = int(new[1])
            assert ring[offset + 5] == new[0] and ring[offset + 6] == new[1]
            break


def test_saving_a_batch_copies_that_batch_alone(tmp_path_factory):
    """A batch's tensor owns a storage of its own bytes, not a view of the
    whole ring: torch.save() and pickle (and so torch.multiprocessing)
    write that batch, not the ring and the other batches in it, and read
    back equal."""
    import io
    import pickle
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 8, size=32, num_workers=1) as loader:
        ring_bytes = loader._run.size
        for n, (images, labels) in enumerate(loader):
            own = images.numel() * images.element_size()
            assert ring_bytes >= 4 * own  # so that a view would show
            storage = images.storage()
            assert storage.nbytes() == own
            saved = io.BytesIO()
            torch.save(images, saved)
            pickled = pickle.dumps(images)
            for written in (len(saved.getvalue()), len(pickled)):
                assert own <= written < own + 4096, (
                    f"{written} bytes written for a {own}-byte batch "
                    f"(the ring: {ring_bytes})")
            saved.seek(0)
            assert torch.equal(torch.load(saved), images)
            assert torch.equal(pickle.loads(pickled), images)
            if n == 2:
                break
