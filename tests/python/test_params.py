"""ringfeed.params() is the library's own parameter table, and every
parameter is reachable from Loader: by a keyword of its own name (or
PyTorch's word for it), checked against the table's range, with the
table's default."""

from __future__ import annotations

import contextlib
import ctypes
import inspect
import io
import os
import re

import pytest

import ringfeed
from ringfeed import _capi
from ringfeed.params import user_terms
from helpers import child_env, dataset, run_python

HEADER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                      "include", "ringfeed.h")
GUIDE = os.path.join(os.path.dirname(HEADER), "..", "docs", "python.md")
KINDS = {0: "integer", 1: "boolean", 2: "choice"}

# Parameters the Loader sets from an argument of another name.
SET_BY_LOADER = {"height": "size", "width": "size", "source": "source",
                 "samples": "source", "classes": "source",
                 "start_epoch": "load_state_dict", "start_batch":
                 "load_state_dict", "epochs": "epochs"}
# Loader defaults that differ from the library's on purpose, and why.
LOADER_DEFAULTS = {
    "layout": "nchw",      # PyTorch's layout; the library's is NHWC
    "num_workers": None,   # the CPU budget, as the library's 0
    "rank": None,          # torch.distributed, then the environment
    "world_size": None,
}


def c_table():
    """The table read straight from the library, through a handle of
    this test's own: [(number, kind, name, doc, choices, default, min,
    max)]."""
    cdll = ctypes.CDLL(ringfeed.library_path())
    cdll.rf_param_at.argtypes = [ctypes.c_uint,
                                 ctypes.POINTER(_capi.ParamInfo)]
    rows, info, i = [], _capi.ParamInfo(), 0
    while cdll.rf_param_at(i, ctypes.byref(info)) == 0:
        rows.append((info.param, KINDS[info.kind], info.name.decode(),
                     info.doc.decode(),
                     info.choices.decode() if info.choices else None,
                     info.default_value, info.min, info.max))
        i += 1
    assert cdll.rf_param_at(i, ctypes.byref(info)) < 0
    return rows


def test_params_are_the_librarys_table():
    table = c_table()
    mine = ringfeed.params()
    assert len(mine) == len(table) > 30
    for p, (number, kind, name, doc, choices, default, lo, hi) in zip(
            mine, table):
        assert (p.number, p.kind, p.name, p.doc) == (number, kind, name, doc)
        assert (p.minimum, p.maximum) == (lo, hi)
        if kind == "choice":
            assert " ".join(p.choices) == choices
            assert len(p.choices) == hi - lo + 1
            assert p.default == p.choices[default - lo]
        elif kind == "boolean":
            assert p.default is bool(default)
        else:
            assert p.default == default
        assert ringfeed.param(name) == p
    with pytest.raises(KeyError):
        ringfeed.param("no_such_parameter")


def test_defaults_are_what_a_new_config_holds():
    """The table's defaults are those rf_config_create() fills in."""
    cdll = ctypes.CDLL(ringfeed.library_path())
    cdll.rf_config_create.restype = ctypes.c_void_p
    cdll.rf_config_get.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                   ctypes.POINTER(ctypes.c_int64)]
    cdll.rf_config_free.argtypes = [ctypes.c_void_p]
    cfg = cdll.rf_config_create()
    try:
        for p in ringfeed.params():
            value = ctypes.c_int64()
            assert cdll.rf_config_get(cfg, p.number, ctypes.byref(value)) == 0
            if p.kind == "choice":
                assert p.choices[value.value - p.minimum] == p.default
            else:
                assert value.value == int(p.default), p.name
    finally:
        cdll.rf_config_free(cfg)


@pytest.mark.parametrize("name, value, says", [
    ("batch_size", 0, "batch_size=0 is out of range; use 1..65536"),
    ("layout", 5, "layout=5 is out of range; use 'nhwc' (0) or 'nchw' (1)"),
    ("jpeg_warnings", 3, "use 'pil' (0), 'lenient' (1) or 'strict' (2)"),
    ("source", 9, "'synthetic' (0), 'empty' (1), 'path' (2) or "
                  "'synthetic-jpeg' (3)"),
])
def test_the_librarys_range_error_reads_in_keywords(name, value, says):
    """rf_config_set()'s refusal, which names the parameter and a choice's
    values in C (RF_PARAM_LAYOUT, RF_LAYOUT_NHWC), reads in Python's
    terms: the keyword and the values' names."""
    cdll = ctypes.CDLL(ringfeed.library_path())
    cdll.rf_config_create.restype = ctypes.c_void_p
    cdll.rf_config_set.argtypes = [ctypes.c_void_p, ctypes.c_int,
                                   ctypes.c_int64]
    cdll.rf_config_error.argtypes = [ctypes.c_void_p]
    cdll.rf_config_error.restype = ctypes.c_char_p
    cdll.rf_config_free.argtypes = [ctypes.c_void_p]
    cfg = cdll.rf_config_create()
    try:
        assert cdll.rf_config_set(cfg, ringfeed.param(name).number,
                                  value) < 0
        text = cdll.rf_config_error(cfg).decode()
    finally:
        cdll.rf_config_free(cfg)
    assert f"RF_PARAM_{name.upper()} {value} is out of range" in text, text
    terms = user_terms(text)
    assert says in terms, terms
    assert "RF_" not in terms, terms


@pytest.mark.skipif(not os.path.exists(HEADER),
                    reason="include/ringfeed.h is not beside the tests")
def test_every_enumerator_of_the_header_is_listed():
    with open(HEADER) as f:
        text = f.read()
    body = text[text.index("typedef enum rf_param {"):]
    body = body[:body.index("} rf_param;")]
    body = re.sub(r"/\*.*?\*/", "", body, flags=re.S)
    header = {m.group(1).lower(): int(m.group(2)) for m in
              re.finditer(r"RF_PARAM_([A-Z0-9_]+)\s*=\s*(\d+)", body)}
    assert header == {p.name: p.number for p in ringfeed.params()}


def test_every_parameter_is_reachable():
    signature = inspect.signature(ringfeed.Loader)
    explicit = set(signature.parameters)
    for p in ringfeed.params():
        if p.keyword is None:
            assert p.name in SET_BY_LOADER, \
                f"{p.name} has no Loader keyword and no argument sets it"
            assert SET_BY_LOADER[p.name] in explicit | {"load_state_dict"}
        else:
            assert p.keyword == ("num_workers" if p.name == "producers"
                                 else p.name)
            assert p.keyword.isidentifier()


def test_explicit_keywords_default_to_the_table():
    signature = inspect.signature(ringfeed.Loader)
    for p in ringfeed.params():
        if p.keyword not in signature.parameters:
            continue
        default = signature.parameters[p.keyword].default
        if default is inspect.Parameter.empty:
            continue  # batch_size: required
        if p.keyword in LOADER_DEFAULTS:
            assert default == LOADER_DEFAULTS[p.keyword], p.keyword
        else:
            assert default == p.default, p.keyword


def _out_of_range(p):
    """A value of the right type that the table refuses, or None for a
    boolean (checked by type instead). A range of the whole int64 (seed=)
    is refused below it: no 64-bit value lies there."""
    if p.kind == "choice":
        return "no-such-choice"
    if p.kind == "boolean":
        return None
    if p.maximum < (1 << 63) - 1:
        return p.maximum + 1
    return p.minimum - 1


def _keywords():
    return [p for p in ringfeed.params() if p.keyword is not None]


@pytest.mark.parametrize("p", _keywords(), ids=lambda p: p.keyword)
def test_keyword_is_checked_against_the_table(tmp_path_factory, p):
    root = dataset(tmp_path_factory, "tiny")
    bad = _out_of_range(p)
    assert bad is not None or p.kind == "boolean", p.keyword
    if bad is not None:
        batch, args = 4, {"size": 16}
        if p.keyword == "batch_size":
            batch = bad
        else:
            args[p.keyword] = bad
        with pytest.raises(ringfeed.ConfigError) as caught:
            ringfeed.Loader(root, batch, **args)
        assert f"{p.keyword}=" in str(caught.value)
        assert "RF_PARAM_" not in str(caught.value)
    if p.kind == "boolean":
        with pytest.raises(TypeError):
            ringfeed.Loader(root, 4, size=16, **{p.keyword: "yes"})


FORK_MODE = """
import sys
sys.modules["torch"] = None
import ringfeed
with ringfeed.Loader(sys.argv[1], 4, size=16, num_workers=1,
                     start_mode="fork") as loader:
    images, labels = next(iter(loader))
    assert len(labels) == 4
print("ok")
"""


@pytest.mark.parametrize("p", [p for p in ringfeed.params()
                               if p.kind == "choice" and p.keyword],
                         ids=lambda p: p.keyword)
def test_choices_accept_their_names(tmp_path_factory, p):
    root = dataset(tmp_path_factory, "tiny")
    for choice in p.choices:
        if (p.keyword, choice) == ("start_mode", "fork"):
            # fork mode needs a process of one thread: a fresh one
            done = run_python(FORK_MODE, root, env=child_env(
                OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1"))
            assert done.stdout.strip() == "ok", done.stderr
            continue
        with ringfeed.Loader(root, 4, size=16, num_workers=1,
                             **{p.keyword: choice}) as loader:
            images, labels = next(iter(loader))
            assert len(labels) == 4
            if p.keyword == "layout":
                assert tuple(images.shape[1:]) == (
                    (3, 16, 16) if choice == "nchw" else (16, 16, 3))


def test_keywords_reach_the_library(tmp_path_factory):
    """Values set by keyword are the loader's: what stats() reports."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 4, size=16, num_workers=2, slots=7) as loader:
        stats = loader.stats()
        assert (stats["producers"], stats["slots"]) == (2, 7)
        assert len(loader) == 8  # 30 samples in batches of 4
    with ringfeed.Loader(root, 4, size=16, drop_last=True) as loader:
        assert len(loader) == 7


def test_seed_takes_any_64_bit_pattern(tmp_path_factory):
    """seed= keys the order by its 64-bit pattern (the table's doc), as
    torch's seeds are: torch.initial_seed() may be anything in 0..2^64-1.
    seed=-1 and seed=2**64-1 are one pattern: the same batches."""
    root = dataset(tmp_path_factory, "tiny")

    def order(seed):
        with ringfeed.Loader(root, 10, size=16, seed=seed,
                             num_workers=1) as loader:
            return [i for b in loader.batches() for i in b.indices.tolist()]

    assert order(-1) == order(2**64 - 1)
    assert order(2**63) == order(-2**63)
    # and the seed is used, all 64 bits of it: the top bit alone moves
    # the order, as does -1 against 0
    assert order(-1) != order(0)
    assert order(2**63) != order(0)
    for bad in (2**64, -2**63 - 1):
        with pytest.raises(ringfeed.ConfigError) as caught:
            ringfeed.Loader(root, 10, seed=bad)
        assert "seed=" in str(caught.value)


def test_param_by_keyword_or_name():
    assert ringfeed.param("num_workers") is ringfeed.param("producers")
    with pytest.raises(KeyError) as caught:
        ringfeed.param("no_such_thing")
    assert "ringfeed.params()" in str(caught.value)


@pytest.mark.parametrize("keyword, says", [
    ("pin_memory", "device='cuda'"),       # DataLoader's: what does its job
    ("prefetch_factor", "slots="),
    ("num_workrs", "did you mean num_workers?"),  # a typo: the nearest name
    ("keep_batch", "did you mean keep_batches?"),  # the Loader's own too
    ("size_height", "help(ringfeed.Loader)"),  # once silently ignored
])
def test_an_unknown_keyword_says_what_to_use(tmp_path_factory, keyword, says):
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(TypeError) as caught:
        ringfeed.Loader(root, 4, size=16, **{keyword: 1})
    assert f"unexpected keyword argument {keyword!r}" in str(caught.value)
    assert says in str(caught.value)


@pytest.mark.parametrize("keyword, bad", [
    ("batch_size", 4.0), ("batch_size", "4"), ("seed", 1.5),
    ("shuffle", "yes"), ("drop_last", 2), ("pillow", 12.0),
    ("spin_ns", True), ("transform", 1), ("source", 3), ("size", 224.0),
    ("rank", 0.0), ("on_message", 3),
])
def test_a_wrong_type_is_a_config_error_and_a_type_error(tmp_path_factory,
                                                          keyword, bad):
    """As the docs say, a value of the wrong type is a ConfigError naming
    its keyword, as a value out of range is; it is a TypeError too (a
    batch_size=4.0 was a TypeError only, missed by `except ConfigError`)."""
    args = dict(source=dataset(tmp_path_factory, "tiny"), batch_size=4,
                size=16, rank=0, world_size=1)
    args[keyword] = bad
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(**args)
    assert isinstance(caught.value, TypeError)
    assert f"{keyword}" in str(caught.value)


def test_integer_scalars_of_any_kind_are_ints(tmp_path_factory):
    """A 0-d integer tensor is taken wherever an int is (seed= took one,
    batch_size= and rank= refused it); a float tensor, a bool of any kind
    and a tensor of one element are refused, as True is."""
    torch = pytest.importorskip("torch")
    np = pytest.importorskip("numpy")
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, torch.tensor(4), size=16, num_workers=1,
                         slots=torch.tensor(5), rank=torch.tensor(0),
                         world_size=np.int64(1)) as loader:
        assert loader.batch_size == 4
    for bad in (torch.tensor(4.0), np.bool_(True), torch.tensor(True),
                torch.tensor([4]), np.array([4])):
        with pytest.raises(ringfeed.ConfigTypeError, match="batch_size"):
            ringfeed.Loader(root, bad, size=16)
    with pytest.raises(ringfeed.ConfigTypeError, match="dtype=3"):
        ringfeed.Loader(root, 4, size=16, dtype=3)


def test_a_side_out_of_range_is_named_in_size(tmp_path_factory):
    """size= as given, then the side that is out of range (it said
    "size=: the height 0 ...")."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError,
                       match=r"^size=\(32, 70000\): a width of 70000 is out "
                             r"of range; use 1\.\.65536 pixels"):
        ringfeed.Loader(root, 4, size=(32, 70000))
    with pytest.raises(ringfeed.ConfigError,
                       match=r"^size=0: a height of 0 is out of range"):
        ringfeed.Loader(root, 4, size=0)


def test_numpy_integers_are_taken_as_ints(tmp_path_factory):
    """A seed from numpy (np.uint64 up to 2**64 - 1, as a numpy Generator
    gives) is the same 64-bit pattern as the int; Synthetic's counts take
    numpy integers and refuse fractions with ConfigError."""
    import numpy as np
    root = dataset(tmp_path_factory, "tiny")

    def order(seed):
        with ringfeed.Loader(root, 10, size=16, seed=seed,
                             num_workers=1) as loader:
            return [i for b in loader.batches() for i in b.indices.tolist()]

    assert order(np.uint64(2**64 - 1)) == order(-1)
    assert order(np.int64(5)) == order(5)
    assert ringfeed.Synthetic(np.int64(10), np.int32(3)).samples == 10
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Synthetic(10.5, 3)
    assert "samples=10.5" in str(caught.value)


def test_size_takes_any_sequence_of_two(tmp_path_factory):
    """size= as a numpy array or torch.Size, as a list or tuple is: the
    same batches (it said "is not a whole number")."""
    import numpy as np
    root = dataset(tmp_path_factory, "tiny")
    shapes = []
    for size in ((16, 24), np.array([16, 24]), [16, 24]):
        with ringfeed.Loader(root, 10, size=size, num_workers=1,
                             layout="nhwc") as loader:
            shapes.append(tuple(next(iter(loader))[0].shape))
    assert shapes == [(10, 16, 24, 3)] * 3
    with pytest.raises(ringfeed.ConfigError, match="size="):
        ringfeed.Loader(root, 10, size=np.array([16, 24, 3]))


def test_a_flag_of_several_values_is_refused_naming_it(tmp_path_factory):
    """An array or tensor of several values for a True/False keyword is a
    ConfigTypeError naming the keyword (shuffle=np.array([1, 0]) was a
    ConfigError in numpy's words, "The truth value of an array ...", and
    a torch tensor torch's bare RuntimeError)."""
    np = pytest.importorskip("numpy")
    root = dataset(tmp_path_factory, "tiny")
    bad = [np.array([1, 0])]
    try:
        import torch
        bad.append(torch.tensor([1, 0]))
    except ImportError:
        pass
    for value in bad:
        with pytest.raises(ringfeed.ConfigTypeError,
                           match=r"^shuffle takes True or False"):
            ringfeed.Loader(root, 10, size=16, shuffle=value)


def test_size_as_a_set_is_refused_naming_size(tmp_path_factory):
    """A set of two sides has no height and width (its order is not
    the one written): a ConfigTypeError naming size= (it was Python's bare
    "TypeError: 'set' object is not subscriptable")."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigTypeError,
                       match=r"^size=\{.*\}: give one side"):
        ringfeed.Loader(root, 10, size={16, 24})


def test_synthetic_is_an_immutable_value():
    """A Synthetic source is a value, as a path is: refused to change
    (a Loader made on it read the changed classes in loader.classes),
    equal to one of the same arguments, pickled and copied whole."""
    import copy
    import pickle
    s = ringfeed.Synthetic(10, 3, jpeg=False)
    with pytest.raises(AttributeError, match="immutable"):
        s.classes = 4
    assert s == ringfeed.Synthetic(10, 3, jpeg=False) != ringfeed.Synthetic(10)
    assert len({s, ringfeed.Synthetic(10, 3, jpeg=False)}) == 1
    assert pickle.loads(pickle.dumps(s)) == copy.copy(s) == s


def test_guides_parameter_table_is_its_scripts_output():
    """docs/python.md's "Every parameter" says its table was printed by
    the script above it: run the script, and the table must be what it
    prints today (a row edited by hand, index_cache='s, passed for the
    library's text; so would a parameter added to the library since)."""
    with open(GUIDE, encoding="utf-8") as f:
        guide = f.read()
    script = re.search(r"```python\n(import inspect\n.*?)```", guide,
                       re.S)
    assert script, "no script in docs/python.md's Every parameter"
    start = guide.index("| keyword | default | accepts | what it does |",
                        script.end())
    end = guide.index("\n", guide.index("Set by the Loader itself: ", start))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(script.group(1), GUIDE, "exec"), {})
    assert printed.getvalue().strip() == guide[start:end].strip()
