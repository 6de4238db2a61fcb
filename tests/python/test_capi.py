"""The ctypes structures of ringfeed._capi match the C header byte for
byte: each field's offset and size, and each structure's size, as the C
compiler lays them out (tests/python-reference structs prints them)."""

from __future__ import annotations

import ctypes
import os
import subprocess
import sys

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
    "rf_failed_sample": _capi.FailedSample,
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


def test_a_missing_system_library_says_what_to_install(tmp_path):
    """A libringfeed whose own dependency is not on the machine (a wheel
    installed where libjpeg-turbo's runtime package is not): the
    ImportError names the missing file and what to install, instead of
    the dynamic loader's words alone. The library here is a real shared
    object that links one that is then removed."""
    gone = tmp_path / "libgone.so"
    lib = tmp_path / "libringfeed.so"
    for command in (["cc", "-shared", "-fPIC", "-x", "c", "-", "-o",
                     str(gone)],
                    ["cc", "-shared", "-fPIC", "-x", "c", "-", "-o", str(lib),
                     f"-L{tmp_path}", "-Wl,--no-as-needed", "-lgone"]):
        subprocess.run(command, input="int rf_x(void) { return 0; }\n",
                       text=True, check=True, timeout=60)
    gone.unlink()
    env = dict(os.environ, RINGFEED_LIBRARY=str(lib))
    done = subprocess.run(
        [sys.executable, "-c", "import ringfeed; ringfeed.params()"],
        env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "ImportError" in done.stderr, done.stderr
    assert "libgone.so: cannot open shared object file" in done.stderr
    assert "install the package that holds the missing file" in done.stderr


def test_a_library_path_that_names_nothing_says_so(tmp_path):
    """RINGFEED_LIBRARY naming no file: the ImportError says to give one
    that exists, not to install system packages."""
    env = dict(os.environ, RINGFEED_LIBRARY=str(tmp_path / "none.so"))
    done = subprocess.run(
        [sys.executable, "-c", "import ringfeed; ringfeed.params()"],
        env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "give RINGFEED_LIBRARY the path of a libringfeed.so that " \
        "exists" in done.stderr, done.stderr
    assert "apt-get" not in done.stderr


def test_a_source_tree_before_an_installed_package_is_said(tmp_path):
    """python/ringfeed/ of a checkout imported in place of a pip-installed
    ringfeed (Python imports the current folder's, or PYTHONPATH's,
    first): the ImportError names both folders and what to change, not
    "install ringfeed with pip", which the user did. The installed one
    here is a dist-info and a package with a _native/ library file."""
    import ctypes.util
    if ctypes.util.find_library("ringfeed"):
        pytest.skip("an installed libringfeed would be loaded")
    import ringfeed
    source = os.path.dirname(os.path.abspath(ringfeed.__file__))
    site = tmp_path / "site"
    (site / "ringfeed" / "_native").mkdir(parents=True)
    (site / "ringfeed" / "__init__.py").write_text("")
    (site / "ringfeed" / "_native" / "libringfeed.so.0").write_text("")
    info = site / "ringfeed-0.2.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: ringfeed\nVersion: 0.2.0\n")
    (info / "RECORD").write_text("")
    env = {k: v for k, v in os.environ.items() if k != "RINGFEED_LIBRARY"}
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(source), str(site)])
    done = subprocess.run(
        [sys.executable, "-c", "import ringfeed; ringfeed.params()"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60)
    assert done.returncode != 0
    assert "ImportError" in done.stderr, done.stderr
    assert f"the ringfeed imported is {source}" in done.stderr, done.stderr
    assert f"not the one installed in {site}" in done.stderr, done.stderr
    assert "install ringfeed with pip" not in done.stderr, done.stderr
