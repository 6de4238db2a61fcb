"""dtype=, mean= and std= on the CPU: each batch equals the uint8 batch
converted in float64 (x / 255, then (x - mean) / std) and cast to the
dtype, within that dtype's rounding."""

from __future__ import annotations

import inspect

import numpy as np
import pytest

import ringfeed
from helpers import dataset

torch = pytest.importorskip("torch")

MEAN = (0.485, 0.456, 0.406)
STD = (0.229, 0.224, 0.225)
# rtol: one rounding of the dtype (float32's with room for its own
# arithmetic); atol for values near 0 after normalisation.
TOLERANCE = {torch.float32: (2e-6, 2e-6), torch.float16: (1e-3, 1e-3),
             torch.bfloat16: (8e-3, 8e-3)}


def reference(uint8, layout, mean, std, dtype):
    x = uint8.to(torch.float64) / 255.0
    if mean is not None:
        shape = [1, -1, 1, 1] if layout == "nchw" else [1, 1, 1, -1]
        m = torch.tensor(mean, dtype=torch.float64).view(shape)
        s = torch.tensor(std, dtype=torch.float64).view(shape)
        x = (x - m) / s
    return x.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16,
                                   torch.bfloat16],
                         ids=["float32", "float16", "bfloat16"])
@pytest.mark.parametrize("normalise", [False, True], ids=["scaled",
                                                          "normalised"])
@pytest.mark.parametrize("layout", ["nchw", "nhwc"])
def test_float_batches_match_the_reference(tmp_path_factory, dtype,
                                           normalise, layout):
    root = dataset(tmp_path_factory)
    args = dict(size=24, seed=9, layout=layout, num_workers=1)
    mean, std = (MEAN, STD) if normalise else (None, None)
    rtol, atol = TOLERANCE[dtype]
    with ringfeed.Loader(root, 32, **args) as plain, \
            ringfeed.Loader(root, 32, dtype=dtype, mean=mean, std=std,
                            **args) as converted:
        batches = 0
        for (u8, labels), (images, labels2) in zip(plain, converted):
            assert images.dtype == dtype and u8.dtype == torch.uint8
            assert images.shape == u8.shape
            assert torch.equal(labels, labels2)
            want = reference(u8, layout, mean, std, dtype)
            torch.testing.assert_close(images, want, rtol=rtol, atol=atol)
            batches += 1
        assert batches == 5


def test_uint8_dtype_is_the_zero_copy_view(tmp_path_factory):
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=24, dtype=torch.uint8) as loader:
        base, size = loader._run.base, loader._run.size
        images, _ = next(iter(loader))
        assert images.dtype == torch.uint8
        assert base <= images.data_ptr() < base + size


def test_float_batches_are_the_callers(tmp_path_factory):
    """A converted batch is a new tensor, not in the ring: safe to keep."""
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 16, size=24, dtype=torch.float32) as loader:
        base, size = loader._run.base, loader._run.size
        kept = []
        for images, _ in loader:
            assert not base <= images.data_ptr() < base + size
            kept.append((images, images.clone()))
        assert all(torch.equal(a, b) for a, b in kept)


@pytest.mark.parametrize("kwargs", [
    dict(mean=MEAN, std=STD),                             # uint8
    dict(dtype=torch.float32, mean=MEAN),                 # no std
    dict(dtype=torch.float32, std=STD),                   # no mean
    dict(dtype=torch.int32),
    dict(dtype=torch.float32, mean=MEAN, std=(0.2, 0.0, 0.2)),
    dict(dtype="int32"),
    dict(dtype="float32x"),
    dict(dtype=np.int32),
    dict(dtype=float),
], ids=["uint8-mean", "no-std", "no-mean", "int32", "std-zero", "int32-name",
        "no-name", "numpy-int32", "python-float"])
def test_bad_conversions_fail_at_construction(tmp_path_factory, kwargs):
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, **kwargs)
    assert "RF_" not in str(caught.value)


@pytest.mark.parametrize("given", [torch.int32, "int32", np.int32,
                                   torch.bool],
                         ids=["torch", "name", "numpy", "torch-bool"])
def test_an_unsupported_dtype_is_said_alike_in_any_form(tmp_path_factory,
                                                        given):
    """A dtype the Loader does not convert to is refused in the same words
    whether a torch dtype, a name or numpy's: one list decides (a torch
    dtype went through a second check of its own, is_floating_point, with
    its own words)."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, dtype=given)
    assert str(caught.value) == (
        f"dtype={given!r} is not supported: use torch.uint8 or a float "
        "dtype (torch.float32, float16, bfloat16, float64), by name too "
        "('float32') or numpy's (np.float32)")


@pytest.mark.parametrize("given, dtype", [
    ("float32", torch.float32), ("float", torch.float32),
    ("torch.float32", torch.float32), ("float16", torch.float16),
    ("half", torch.float16), ("bfloat16", torch.bfloat16),
    ("float64", torch.float64), ("double", torch.float64),
    ("uint8", torch.uint8), (np.float32, torch.float32),
    (np.dtype("float16"), torch.float16), (np.float64, torch.float64),
    (np.uint8, torch.uint8),
], ids=["float32", "float", "torch.float32", "float16", "half", "bfloat16",
        "float64", "double", "uint8", "np.float32", "np.dtype-float16",
        "np.float64", "np.uint8"])
def test_dtype_by_name_or_numpys_is_the_torch_dtype(tmp_path_factory, given,
                                                    dtype):
    """dtype= as torch names it ('float16', as a config file has it, or
    'half') or as a numpy dtype (np.float32) gives the batches of that
    torch dtype; both were refused ("not a torch dtype")."""
    root = dataset(tmp_path_factory, "tiny")
    args = dict(size=16, seed=3, num_workers=1)
    with ringfeed.Loader(root, 4, dtype=given, **args) as named, \
            ringfeed.Loader(root, 4, dtype=dtype, **args) as torchs:
        (a, _), (b, _) = next(iter(named)), next(iter(torchs))
        assert a.dtype == dtype and torch.equal(a, b)


def test_mean_of_the_wrong_length(tmp_path_factory):
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError, match="give 2 value"):
        with ringfeed.Loader(root, 4, size=16, dtype=torch.float32,
                             mean=(0.5, 0.5), std=(0.2, 0.2)) as loader:
            next(iter(loader))


@pytest.mark.parametrize("mean, std, said", [
    ((0.5,), (0.2, 0.2, 0.2), "mean= gives 1 value(s) and std= 3"),
    (MEAN, (0.2, 0.2), "mean= gives 3 value(s) and std= 2"),
    (((0.5, 0.5),), STD, "give flat sequences"),
])
def test_mean_and_std_that_disagree_say_how(tmp_path_factory, mean, std,
                                            said):
    """The message says what differs (it said "must be sequences of one
    float per channel" to sequences of different lengths)."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, dtype=torch.float32, mean=mean,
                        std=std)
    assert said in str(caught.value)


@pytest.mark.parametrize("mean, std, said", [
    ((0.5, float("nan"), 0.5), STD, "mean= holds nan for channel 1"),
    (MEAN, (0.2, 0.2, float("inf")), "std= holds inf for channel 2"),
    ((float("-inf"), 0.5, 0.5), STD, "mean= holds -inf for channel 0"),
    (MEAN, np.array([0.2, np.nan, 0.2]), "std= holds nan for channel 1"),
    ((1e300, 0.5, 0.5), STD, "mean= holds 1e+300 for channel 0"),
    (MEAN, (1e-41, 0.2, 0.2), "std= 1e-41 for channel 0: (x - mean) / std "
                              "overflows float32"),
], ids=["mean-nan", "std-inf", "mean-minus-inf", "std-numpy-nan",
        "mean-beyond-float32", "std-overflows"])
def test_mean_or_std_that_is_not_finite_is_refused(tmp_path_factory, mean,
                                                   std, said):
    """A NaN or an infinity in mean= or std= (or a value float32 cannot
    hold) is refused naming the keyword and the channel; it was taken,
    and every pixel of every batch came out NaN (or infinite)."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, dtype=torch.float32, mean=mean,
                        std=std)
    assert said in str(caught.value)


def test_a_negative_std_is_taken(tmp_path_factory):
    """torchvision's Normalize takes a negative std (it flips the sign):
    so does the Loader."""
    root = dataset(tmp_path_factory, "tiny")
    std = (-0.2, 0.2, 0.2)
    with ringfeed.Loader(root, 4, size=16, num_workers=1) as plain, \
            ringfeed.Loader(root, 4, size=16, num_workers=1,
                            dtype=torch.float32, mean=MEAN,
                            std=std) as loader:
        (u8, _), (images, _) = next(iter(plain)), next(iter(loader))
        want = reference(u8, "nchw", MEAN, std, torch.float32)
        torch.testing.assert_close(images, want, rtol=2e-6, atol=2e-6)


@pytest.mark.parametrize("mean, std", [
    (0.5, 0.25),
    (np.float32(0.5), torch.tensor(0.25)),
    (np.array(0.5), (0.25, 0.25, 0.25)),
    ((0.5, 0.5, 0.5), 0.25),
], ids=["floats", "numpy-and-0d-tensor", "0d-array-and-tuple",
        "tuple-and-float"])
def test_a_number_is_every_channels_value(tmp_path_factory, mean, std):
    """mean=0.5, std=0.25 (a Python, numpy or 0-d tensor number) is that
    value for every channel, as torchvision's Normalize(0.5, 0.25) takes
    it; it was refused ("give flat sequences")."""
    root = dataset(tmp_path_factory, "tiny")
    args = dict(size=16, seed=3, num_workers=1, dtype=torch.float32)
    with ringfeed.Loader(root, 4, mean=mean, std=std, **args) as numbers, \
            ringfeed.Loader(root, 4, mean=(0.5,) * 3, std=(0.25,) * 3,
                            **args) as tuples:
        (a, _), (b, _) = next(iter(numbers)), next(iter(tuples))
        assert torch.equal(a, b)


def test_a_number_beside_a_sequence_of_another_length(tmp_path_factory):
    """A number for every channel beside a sequence of the wrong length:
    the message names the sequence's keyword, not the number's."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, dtype=torch.float32, mean=0.5,
                        std=(0.2, 0.2))
    assert str(caught.value).startswith(
        "std= gives 2 value(s) but the images have 3 channel(s)")


def test_mean_in_0_255_units_warns(tmp_path_factory):
    """mean=(123.7, ...) is a common slip (OpenCV's units): the images are
    scaled to [0, 1] first, so the result would be far off; a warning
    says so, naming the keywords."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.warns(UserWarning, match="mean="):
        with ringfeed.Loader(root, 8, size=16, dtype=torch.float32,
                             mean=(123.7, 116.3, 103.5),
                             std=(58.4, 57.1, 57.4)):
            pass


def test_the_0_255_warning_points_at_the_loader_call(tmp_path_factory):
    """The warning is the caller's line, where Loader() is made, as
    warnings.warn's stacklevel is for (it was the line that called the
    caller: 'sys:1' for a Loader made at a script's top level)."""
    root = dataset(tmp_path_factory, "tiny")
    args = dict(size=16, dtype=torch.float32, mean=(123.7, 116.3, 103.5),
                std=(58.4, 57.1, 57.4))
    with pytest.warns(UserWarning, match="mean=") as said:
        line = inspect.currentframe().f_lineno + 1
        ringfeed.Loader(root, 8, **args).close()
    assert [(w.filename, w.lineno) for w in said] == [(__file__, line)]


@pytest.mark.parametrize("mean, std, said", [
    ("abc", STD, "mean='abc': give a sequence of numbers"),
    (MEAN, {"a": 1}, "std={'a': 1}: give a sequence of numbers"),
    ((0.5, 10**400, 0.5), STD, "mean= holds a number beyond float32's"),
    (MEAN, 10**400, "std= holds a number beyond float32's"),
], ids=["mean-text", "std-dict", "mean-huge-int", "std-huge-int"])
def test_mean_or_std_that_is_no_number_names_its_keyword(tmp_path_factory,
                                                         mean, std, said):
    """mean= or std= that torch cannot make a number of is a ConfigError
    naming that keyword alone (the message named both); an int beyond
    float64 (10**400) too, which escaped as torch's bare OverflowError."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 8, size=16, dtype=torch.float32, mean=mean,
                        std=std)
    assert str(caught.value).startswith(said), str(caught.value)


def test_mean_and_std_as_tensors(tmp_path_factory):
    """mean= and std= given as tensors (as a model's config often keeps
    them) give the batches the tuples give, and no torch warning about
    copying a tensor."""
    import warnings
    root = dataset(tmp_path_factory)
    args = dict(size=24, seed=9, num_workers=1, dtype=torch.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with ringfeed.Loader(root, 32, mean=torch.tensor(MEAN),
                             std=torch.tensor(STD), **args) as tensors, \
                ringfeed.Loader(root, 32, mean=MEAN, std=STD,
                                **args) as tuples:
            for (a, _), (b, _) in zip(tensors, tuples):
                assert torch.equal(a, b)
