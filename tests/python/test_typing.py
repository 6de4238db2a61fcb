"""The package's type hints hold: mypy --strict finds nothing in
python/ringfeed/. Users' type checkers read them (the package ships
py.typed), so a hint that lies is a bug they see in their own code.

numpy and torch are taken as untyped here (--follow-imports=skip): the
check is of the package's own annotations, the same with any version of
either. Skips without mypy (Debian's python3-mypy).
"""

from __future__ import annotations

import os
import tempfile

import pytest

import ringfeed

FLAGS = ["--strict", "--follow-imports=skip", "--ignore-missing-imports",
         # `torch = None  # type: ignore` is needed only where torch is
         "--no-warn-unused-ignores"]


def test_the_package_passes_mypy_strict():
    api = pytest.importorskip("mypy.api", reason="no mypy "
                              "(apt-get install python3-mypy)")
    package = os.path.dirname(os.path.abspath(ringfeed.__file__))
    with tempfile.TemporaryDirectory() as cache:
        out, err, status = api.run(FLAGS + ["--cache-dir", cache, package])
    assert status == 0, f"mypy {' '.join(FLAGS)} {package}:\n{out}{err}"
    assert "no issues found" in out
