"""Every image a Loader yields is, byte for byte, what the library's
rf_dataset_decode() makes of that sample for that epoch, in both layouts
and under each transform; every label is the sample's class folder."""

from __future__ import annotations

import os
import pathlib
import shutil
import numpy as np
import pytest

import ringfeed
from helpers import Reference, as_numpy, class_of, dataset, write_folder

SIZE = 40


@pytest.mark.parametrize("layout", ["nhwc", "nchw"])
@pytest.mark.parametrize("transform", ["train", "eval", "none"])
def test_pixels_equal_the_librarys_decode(tmp_path_factory, layout,
                                          transform):
    root = dataset(tmp_path_factory)
    args = dict(transform=transform, layout=layout, seed=7, shuffle=True,
                batch_size=24)
    seen = set()
    epochs = 2
    with ringfeed.Loader(root, size=SIZE, epochs=epochs, num_workers=2,
                         **args) as loader, \
            Reference(root, dict(args, height=SIZE, width=SIZE)) as ref:
        for batch in loader.batches():
            images = as_numpy(batch.images)
            labels = as_numpy(batch.labels)
            indices = as_numpy(batch.indices)
            n = len(indices)
            if layout == "nchw":
                assert images.shape == (n, 3, SIZE, SIZE)
            else:
                assert images.shape == (n, SIZE, SIZE, 3)
            assert images.dtype == np.uint8
            assert labels.shape == (n,) and str(labels.dtype) == "int64"
            for i, index in enumerate(indices.tolist()):
                want = ref.decode(batch.epoch, index)
                assert np.array_equal(images[i].reshape(-1), want), (
                    f"sample {index} of epoch {batch.epoch} (batch "
                    f"{batch.number}, position {i}) differs from "
                    "rf_dataset_decode()")
                assert labels[i] == class_of(root, ref.name(index)), \
                    f"label of sample {index} ({ref.name(index)})"
                seen.add((batch.epoch, index))
        size = ref.size
    assert seen == {(e, i) for e in range(epochs) for i in range(size)}


def test_train_crops_change_with_the_epoch(tmp_path_factory):
    """The reference is sensitive to the epoch (else the test above would
    not tell one epoch's crops from another's)."""
    root = dataset(tmp_path_factory)
    with Reference(root, dict(transform="train", height=SIZE, width=SIZE,
                              seed=7)) as ref:
        differ = sum(not np.array_equal(ref.decode(0, i), ref.decode(1, i))
                     for i in range(20))
    assert differ >= 15


def test_layouts_hold_the_same_pixels(tmp_path_factory):
    """NCHW is NHWC's planes: the same sample in both layouts."""
    root = dataset(tmp_path_factory)
    common = dict(transform="eval", size=SIZE, shuffle=False, batch_size=32)
    with ringfeed.Loader(root, layout="nhwc", **common) as a, \
            ringfeed.Loader(root, layout="nchw", **common) as b:
        pairs = 0
        for (ia, la), (ib, lb) in zip(a, b):
            assert np.array_equal(as_numpy(la), as_numpy(lb))
            assert np.array_equal(as_numpy(ia).transpose(0, 3, 1, 2),
                                  as_numpy(ib))
            pairs += 1
        assert pairs == len(a) == len(b) > 1


def test_classes_are_image_folders(tmp_path_factory):
    """loader.classes is torchvision ImageFolder's classes: the class
    folders' names, sorted, by label."""
    root = dataset(tmp_path_factory, "tiny")
    want = sorted(p.name for p in pathlib.Path(root).iterdir() if p.is_dir())
    with ringfeed.Loader(root, 4, size=16) as loader:
        assert loader.classes == want
    assert ringfeed.Loader(ringfeed.Synthetic(8, 3), 2, size=8,
                           num_workers=1).classes == ["0", "1", "2"]


def test_classes_are_those_of_the_loaders_listing(tmp_path):
    """A class folder added after the Loader was made (a sync still
    copying), sorting first: loader.classes stays the names of the labels
    its batches carry (it listed the folder again, and every name moved
    one label on). Closed, with the folder changed, it raises rather than
    give names of other labels."""
    root = str(tmp_path / "data")
    write_folder(root, 2, 3, seed=4)
    with ringfeed.Loader(root, 2, size=16, num_workers=1) as loader:
        before = sorted(os.listdir(root))
        shutil.copytree(os.path.join(root, before[0]),
                        os.path.join(root, "aaa_new"))
        assert loader.classes == before
    closed = ringfeed.Loader(root, 2, size=16, num_workers=1)
    closed.close()
    assert closed.classes == ["aaa_new"] + before  # the listing it read
    shutil.rmtree(os.path.join(root, "aaa_new"))
    late = ringfeed.Loader(root, 2, size=16, num_workers=1)
    late.close()
    shutil.copytree(os.path.join(root, before[0]),
                    os.path.join(root, "aaa_new"))
    with pytest.raises(ringfeed.RingfeedError, match="have changed since"):
        late.classes


@pytest.mark.parametrize("size,resize", [(40, 46), (24, 28), (40, 64)])
def test_eval_is_torchvisions_resize_then_centre_crop(tmp_path_factory, size,
                                                      resize):
    """transform="eval" with dct_scaling=False gives, byte for byte, what
    torchvision's ImageFolder gives with Resize(resize), CenterCrop(size)
    and PILToTensor(): the validation pixels of a torchvision recipe, with
    pillow= the installed Pillow's release. The folder's images (40 to 96
    pixels a side, JPEG and PNG) are shrunk by up to 3.4 times and
    enlarged, with odd and even sides."""
    torchvision = pytest.importorskip("torchvision")
    import PIL
    from torchvision import transforms as T
    root = dataset(tmp_path_factory)
    # the installed Pillow's pass order (pillow=)
    pillow = int(PIL.__version__.split(".")[0])
    folder = torchvision.datasets.ImageFolder(root, T.Compose(
        [T.Resize(resize), T.CenterCrop(size), T.PILToTensor()]))
    differ = []
    with ringfeed.Loader(root, 32, transform="eval", size=size, resize=resize,
                         dct_scaling=False, pillow=pillow, shuffle=False,
                         layout="nchw") as loader:
        for batch in loader.batches():
            images, labels = as_numpy(batch.images), as_numpy(batch.labels)
            for i, index in enumerate(as_numpy(batch.indices).tolist()):
                path, label = folder.samples[index]
                want = as_numpy(folder[index][0])
                assert labels[i] == label, path
                if not np.array_equal(images[i], want):
                    worst = np.abs(images[i].astype(int) - want).max()
                    differ.append((os.path.basename(path), int(worst)))
    assert len(folder) == 160
    assert differ == [], f"{len(differ)} images differ (name, most)"


@pytest.mark.parametrize("pillow", [12, 13])
def test_eval_pass_order_of_the_pillow_release(tmp_path, pillow):
    """pillow= picks the order of PIL's two passes, which round to 8 bits
    in between: Pillow 13 resizes the height first where it loses more
    than twice as many pixels as the width, 12 and older always the width
    first. The reference is each order done as two one-axis resizes,
    which every Pillow computes alike; images over twice as tall as wide,
    JPEG and PNG, and two that are not (x first for both releases)."""
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(5)
    root = tmp_path / "tall"
    sides = [(40, 97), (41, 130), (33, 100), (60, 121), (90, 70), (50, 90)]
    for i, (w, h) in enumerate(sides):
        (root / f"c{i}").mkdir(parents=True)
        pixels = rng.integers(0, 256, (h, w, 3)).astype(np.uint8)
        ext = "png" if i % 2 else "jpg"
        Image.fromarray(pixels, "RGB").save(root / f"c{i}" / f"a.{ext}",
                                            quality=95)
    size, resize = 24, 30
    y_first_seen = 0
    with ringfeed.Loader(str(root), 1, transform="eval", size=size,
                         resize=resize, dct_scaling=False, pillow=pillow,
                         shuffle=False, layout="nhwc") as loader:
        for batch in loader.batches():
            path = next((root / f"c{int(batch.labels[0])}").iterdir())
            with Image.open(path) as im:
                im = im.convert("RGB")
            w, h = im.size
            rw, rh = (resize, resize * h // w) if w <= h else \
                (resize * w // h, resize)
            y_first = pillow >= 13 and h - rh > 0 and h - rh > 2 * (w - rw)
            y_first_seen += y_first
            between = (w, rh) if y_first else (rw, h)
            want = im.resize(between, Image.BILINEAR).resize(
                (rw, rh), Image.BILINEAR)
            left, top = round((rw - size) / 2.0), round((rh - size) / 2.0)
            want = np.asarray(want.crop((left, top, left + size, top + size)))
            got = as_numpy(batch.images)[0]
            assert np.array_equal(got, want), (path.name, w, h, y_first)
    assert y_first_seen == (4 if pillow >= 13 else 0)


def test_eval_of_a_sliver_enlarged_past_32_bits(tmp_path):
    """Resize(65536) of a 1 x 70000 PNG is 65536 x 4,587,520,000 pixels,
    which no one can make; its centre crop is still planned exactly (a
    window of that resize) and is the middle of the image: a ramp 0..255
    top to bottom gives 127 and 128 there."""
    Image = pytest.importorskip("PIL.Image")
    os.makedirs(tmp_path / "c")
    for h in (65000, 70000):
        ramp = (np.arange(h) * 256 // h).astype(np.uint8)
        Image.fromarray(np.repeat(ramp[:, None, None], 3, axis=2)).save(
            tmp_path / "c" / f"h{h}.png")
    with ringfeed.Loader(str(tmp_path), 2, transform="eval", size=4,
                         resize=65536, shuffle=False, layout="nhwc",
                         num_workers=1) as loader:
        images, _ = next(iter(loader))
        for image in as_numpy(images):
            assert image[:, :, 0].tolist() == [[127] * 4, [127] * 4,
                                               [128] * 4, [128] * 4]
