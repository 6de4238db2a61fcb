"""Lifetimes: what the package hands out raises once its batch went back
to the producers, keep_batches= keeps more batches valid, and a tensor
kept past close() stays readable (the ring stays mapped until the last
view is gone, then is unmapped)."""

from __future__ import annotations

import copy
import gc
import os
import textwrap

import numpy as np
import pytest

import ringfeed
from helpers import (as_numpy, dataset, producers_of, run_python,
                     wait_gone)

ATTRIBUTES = ("images", "labels", "indices", "epoch", "number", "sequence",
              "skipped")


def assert_released(batch):
    assert batch.released
    for name in ATTRIBUTES:
        with pytest.raises(ringfeed.BatchReleased):
            getattr(batch, name)
    with pytest.raises(ringfeed.BatchReleased):
        images, labels = batch


def test_batch_raises_after_the_next_one(tmp_path_factory):
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, num_workers=2) as loader:
        previous = None
        for batch in loader.batches():
            assert not batch.released
            for name in ATTRIBUTES:
                getattr(batch, name)  # current: fine
            if previous is not None:
                assert_released(previous)
            previous = batch
        # the last one stays valid past the loop's end, until the loader
        # takes another batch or closes
        assert not previous.released
        previous.images
    assert_released(previous)


def test_break_and_close_release(tmp_path_factory):
    root = dataset(tmp_path_factory)
    loader = ringfeed.Loader(root, 16, size=32, num_workers=1)
    for batch in loader.batches():
        kept = batch
        break
    assert not kept.released  # leaving the loop does not release it
    it = loader.batches()
    batch = next(it)  # taking the next batch does
    assert_released(kept)
    assert batch.images.shape[0] == 16
    loader.close()
    assert_released(batch)
    with pytest.raises(ringfeed.LoaderClosed):
        next(iter(loader))


def test_a_peeked_batch_stays_as_it_is(tmp_path_factory):
    """images, labels = next(iter(loader)): the loop is gone at once, but
    the batch stays valid (its slot held) until the loader takes another
    batch: producers going on meanwhile do not overwrite it."""
    import time
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=32, shuffle=False,
                         num_workers=1) as loader:
        images, labels = next(iter(loader))
        snap = as_numpy(images).copy()
        time.sleep(0.5)  # the producer fills every other slot
        assert np.array_equal(as_numpy(images), snap)
        batch = next(loader.batches())
        assert not batch.released
        assert batch.images.shape[0] == 16


def test_keep_batches_keeps_the_previous_batch(tmp_path_factory):
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 8, size=32, keep_batches=2, num_workers=2,
                         slots=4) as loader:
        history = []  # (batch, copy of its pixels when it came)
        for batch in loader.batches():
            history.append((batch, as_numpy(batch.images)))
            if len(history) >= 2:
                older, pixels = history[-2]
                assert not older.released
                assert np.array_equal(as_numpy(older.images), pixels), \
                    f"batch {older.number} changed while kept"
                older.labels, older.indices, older.epoch
            if len(history) >= 3:
                assert_released(history[-3][0])
        assert len(history) > 4  # more batches than slots went round


def test_keep_batches_one_lets_the_slot_be_rewritten(tmp_path_factory):
    """The counterpart: with the default keep_batches=1 and few slots, an
    old view (taken out of its Batch, not checked) does get other pixels,
    which is why Batch raises. Shows the check above can fail."""
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 8, size=32, num_workers=1, slots=2,
                         shuffle=False) as loader:
        views, copies = [], []
        for images, _ in loader:
            views.append(images)
            copies.append(as_numpy(images))
        changed = sum(not np.array_equal(as_numpy(v), c)
                      for v, c in zip(views, copies))
    assert changed > 0


KEPT_PAST_CLOSE = textwrap.dedent("""
    import gc, sys
    import ringfeed
    def arena():
        with open("/proc/self/maps") as f:
            return [l for l in f if "/memfd:ringfeed-arena" in l]
    loader = ringfeed.Loader(sys.argv[1], 8, size=32, num_workers=1)
    kept = []
    for i, (images, labels) in enumerate(loader):
        kept.append(images)
        if i == 2:
            break
    base = loader._run.base
    loader.close()
    del loader
    gc.collect()
    assert arena(), "the ring was unmapped while views of it live"
    total = sum(int(v.sum()) for v in kept)  # reads every kept byte
    first = kept[0][0, 0, 0, :4].tolist()
    print("read", total, first, flush=True)
    assert all(v.data_ptr() >= base for v in kept)
    del kept, images
    gc.collect()
    left = arena()
    print("mapped after del:", left, flush=True)
    sys.exit(3 if left else 0)
""")


def test_tensor_kept_past_close_stays_readable(tmp_path_factory):
    root = dataset(tmp_path_factory)
    done = run_python(KEPT_PAST_CLOSE, root)
    assert done.returncode != -11, "reading a kept tensor segfaulted"
    assert done.returncode != 3, (
        "the ring is still mapped after every view was deleted:\n"
        + done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "read " in done.stdout


def test_a_copied_batch_has_pixels_of_its_own(tmp_path_factory):
    """copy.copy() of a Batch shared the slot's tensor and outlived the
    slot (it read what producers wrote next, without BatchReleased); it
    now copies the pixels, as copy.deepcopy() does, and a released
    batch's copy raises as the batch does."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 4, size=32, num_workers=1, slots=4) as loader:
        batches = loader.batches()
        first = next(batches)
        shallow, deep = copy.copy(first), copy.deepcopy(first)
        pixels = as_numpy(first.images).copy()
        for _ in range(5):  # the ring's 4 slots over again
            next(batches)
        assert first.released
        for twin in (shallow, deep):
            assert not twin.released
            assert np.array_equal(as_numpy(twin.images), pixels)
        with pytest.raises(ringfeed.BatchReleased):
            copy.copy(first).images


def test_a_dropped_loader_stops_without_the_cycle_collector(
        tmp_path_factory):
    """`del loader` with no other reference stops its producers at once:
    the run's message callback held the Loader, a cycle that kept the
    producers, the ring and their CPUs until the cyclic collector ran
    (here switched off)."""
    root = dataset(tmp_path_factory, "tiny")
    before = set(producers_of(os.getpid()))
    gc.disable()
    try:
        loader = ringfeed.Loader(root, 8, size=16, num_workers=1)
        next(iter(loader))
        mine = set(producers_of(os.getpid())) - before
        assert mine
        del loader
        assert not wait_gone(mine)
    finally:
        gc.enable()


RELEASED_PAST_CLOSE = textwrap.dedent("""
    import gc, sys
    import ringfeed
    def arena():
        with open("/proc/self/maps") as f:
            return [l for l in f if "/memfd:ringfeed-arena" in l]
    loader = ringfeed.Loader(sys.argv[1], 8, size=32, num_workers=1)
    for batch in loader.batches():
        pass
    loader.close()
    del loader
    gc.collect()
    assert batch.released
    left = arena()
    print("mapped with a released Batch held:", left, flush=True)
    sys.exit(3 if left else 0)
""")


def test_a_released_batch_lets_the_ring_go(tmp_path_factory):
    """A loop's last `batch`, still held after close(), could no longer
    be read (BatchReleased) but held the slot's view, which kept the
    whole ring mapped and its shared memory in use (hundreds of MiB to
    GiB for ImageNet batches) until the Batch itself went."""
    root = dataset(tmp_path_factory)
    done = run_python(RELEASED_PAST_CLOSE, root)
    assert done.returncode != 3, (
        "a released Batch keeps the ring mapped after close():\n"
        + done.stdout)
    assert done.returncode == 0, done.stdout + done.stderr
