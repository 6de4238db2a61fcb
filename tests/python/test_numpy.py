"""Without torch the Loader yields numpy arrays: the same bytes as the
torch tensors, still views of the ring, still checked after release."""

from __future__ import annotations

import os
import textwrap

import numpy as np

import ringfeed
from helpers import as_numpy, dataset, run_python

ARGS = dict(size=24, transform="train", seed=3, layout="nchw")

NO_TORCH = textwrap.dedent("""
    import sys
    sys.modules["torch"] = None  # import torch now raises ImportError
    import numpy as np
    import ringfeed
    assert "torch" not in [m.split(".")[0] for m in sys.modules
                           if sys.modules[m] is not None]
    root, out = sys.argv[1], sys.argv[2]
    arrays = {}
    with ringfeed.Loader(root, 16, size=24, transform="train", seed=3,
                         layout="nchw", num_workers=2) as loader:
        base, size = loader._run.base, loader._run.size
        previous = None
        for batch in loader.batches():
            images, labels = batch
            assert type(images) is np.ndarray, type(images)
            assert type(labels) is np.ndarray and labels.dtype == np.int64
            assert images.dtype == np.uint8 and images.ndim == 4
            address = images.__array_interface__["data"][0]
            assert base <= address < base + size, "not a view of the ring"
            arrays[f"images{batch.number}"] = images.copy()
            try:  # the producers' slot: numpy refuses writes into it
                images[0, 0, 0, 0] = 1
                sys.exit("a view of the ring was writable")
            except ValueError:
                pass
            arrays[f"labels{batch.number}"] = labels.copy()
            arrays[f"indices{batch.number}"] = np.asarray(batch.indices)
            if previous is not None:
                try:
                    previous.images
                    sys.exit("a released batch's images were handed out")
                except ringfeed.BatchReleased:
                    pass
            previous = batch
        try:
            ringfeed.Loader(root, 16, dtype="float32")
            sys.exit("dtype= without torch did not raise")
        except ringfeed.ConfigError as e:
            assert "torch" in str(e).lower() or "PyTorch" in str(e), e
    np.savez(out, **arrays)
""")


def test_numpy_without_torch_gives_the_same_bytes(tmp_path_factory,
                                                   tmp_path):
    root = dataset(tmp_path_factory)
    out = os.path.join(tmp_path, "batches.npz")
    done = run_python(NO_TORCH, root, out)
    assert done.returncode == 0, done.stdout + done.stderr
    got = np.load(out)
    count = 0
    with ringfeed.Loader(root, 16, num_workers=2, **ARGS) as loader:
        for batch in loader.batches():
            n = batch.number
            assert np.array_equal(got[f"indices{n}"], as_numpy(batch.indices))
            assert np.array_equal(got[f"labels{n}"], as_numpy(batch.labels))
            assert np.array_equal(got[f"images{n}"], as_numpy(batch.images))
            count += 1
    assert count == 10 and len(got.files) == 3 * count
