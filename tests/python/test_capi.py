"""The ctypes structures of ringfeed._capi match the C header byte for
byte: each field's offset and size, and each structure's size, as the C
compiler lays them out (tests/python-reference structs prints them)."""

from __future__ import annotations

import ctypes
import subprocess

import pytest

from ringfeed import _capi
from helpers import REFERENCE, needs_reference

# The C structure each ctypes class stands for; rf_batch's lines carry no
# "rf_batch." prefix (the older `layout` form).
STRUCTS = {
    "rf_batch": _capi.Batch,
    "rf_stats": _capi.Stats,
    "rf_param_info": _capi.ParamInfo,
    "rf_sample_error": _capi.SampleError,
    "rf_dataset_info": _capi.DatasetInfo,
}


def c_layout():
    """{struct: ({field: (offset, size)}, sizeof)} from the C compiler."""
    out = subprocess.run([REFERENCE, "structs"], capture_output=True,
                         text=True, check=True, timeout=30).stdout
    layout = {name: ({}, None) for name in STRUCTS}
    for line in out.splitlines():
        words = line.split()
        if words[0] == "sizeof":  # rf_batch's size
            layout["rf_batch"] = (layout["rf_batch"][0], int(words[1]))
        elif words[1] == "sizeof":
            layout[words[0]] = (layout[words[0]][0], int(words[2]))
        else:
            struct, _, field = words[0].rpartition(".")
            layout[struct or "rf_batch"][0][field] = (int(words[1]),
                                                      int(words[2]))
    return layout


@needs_reference
@pytest.mark.parametrize("struct", sorted(STRUCTS))
def test_structure_matches_c(struct):
    fields, size = c_layout()[struct]
    cls = STRUCTS[struct]
    assert fields, f"python-reference printed no field of {struct}"
    assert size is not None, f"python-reference printed no size of {struct}"
    mine = {name: (getattr(cls, name).offset, getattr(cls, name).size)
            for name, *_ in cls._fields_}
    assert mine == fields, f"{cls.__name__} differs from struct {struct}"
    assert ctypes.sizeof(cls) == size, \
        f"sizeof {cls.__name__} {ctypes.sizeof(cls)}, C {size}"


@needs_reference
def test_reference_lists_every_structure():
    """python-reference covers each structure _capi declares (a structure
    added to _capi without a line there would go unchecked)."""
    declared = {name for name, value in vars(_capi).items()
                if isinstance(value, type)
                and issubclass(value, ctypes.Structure)}
    assert declared == {cls.__name__ for cls in STRUCTS.values()}
    layout = c_layout()
    assert all(layout[s][0] and layout[s][1] for s in STRUCTS)
