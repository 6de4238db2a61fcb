"""The library's parameters as Python sees them.

Every parameter comes from the library's own table (rf_param_at()): its
name, kind, default, range, choices and one line of documentation. None
is copied here; `Loader` takes each one as a keyword argument of the
same name (a few under PyTorch's word for it, see KEYWORDS), so a
parameter added to the library is reachable from Python at once.
"""

from __future__ import annotations

import ctypes
import operator
import re
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple, Union

from . import _capi

__all__ = ["Param", "params", "param", "KEYWORDS"]

# Loader keywords that take a parameter under PyTorch's name for it, and
# the parameters the Loader sets itself from its own arguments.
KEYWORDS: Dict[str, str] = {"num_workers": "producers"}
_OWN = {"height", "width", "source", "samples", "classes", "start_epoch",
        "start_batch", "epochs"}
# what stands for those of them that no keyword sets, in messages
_OWN_TERMS = {"start_epoch": "set_epoch()'s epoch",
              "start_batch": "the checkpoint's batch",
              "samples": "Synthetic's samples",
              "classes": "Synthetic's classes"}


@dataclass(frozen=True)
class Param:
    """One parameter of the library's table.

    name:    its name, a Python identifier (``on_error``)
    keyword: the `Loader` keyword that sets it (``num_workers`` for
             ``producers``), or None where the Loader sets it itself from
             another argument (``height`` from ``size``)
    kind:    "integer", "boolean" or "choice"
    default, minimum, maximum: what the library takes when it is not set,
             and the range it accepts (for a choice: the values' numbers).
             The library's default: where a Loader keyword has one of its
             own (layout="nchw", num_workers=None: the CPU budget), the
             Loader's signature shows it
    choices: a choice's names in number order (("fail", "skip")), else ()
    doc:     the table's one line
    number:  the C enumerator's value (RF_PARAM_...)
    """

    name: str
    keyword: Optional[str]
    kind: str
    default: Union[int, bool, str]
    minimum: int
    maximum: int
    choices: Tuple[str, ...]
    doc: str
    number: int

    def convert(self, value: object, keyword: str) -> int:
        """The int64 the library takes for a Python value; ValueError or
        TypeError naming `keyword` when the value is not one it accepts."""
        if self.kind == "choice":
            if isinstance(value, str):
                if value not in self.choices:
                    raise ValueError(
                        f"{keyword}={value!r} is not one of "
                        f"{', '.join(repr(c) for c in self.choices)}")
                return self.minimum + self.choices.index(value)
            raise TypeError(f"{keyword} takes one of "
                            f"{', '.join(repr(c) for c in self.choices)}, "
                            f"not {type(value).__name__}")
        if self.kind == "boolean":
            try:
                flag = isinstance(value, bool) or value in (0, 1)
            except (TypeError, ValueError, RuntimeError):
                flag = False  # an array or tensor of several: ambiguous
            if flag:
                return int(bool(value))
            raise TypeError(f"{keyword} takes True or False, not {value!r}")
        number = as_int(value)
        if number is None:
            raise TypeError(f"{keyword} takes an int, not "
                            f"{type(value).__name__}")
        if not self.minimum <= number <= self.maximum:
            raise ValueError(f"{keyword}={number} is out of range: "
                             f"{self.minimum}..{self.maximum} ({self.doc})")
        return number


def as_int(value: object) -> Optional[int]:
    """value as an int when it is a whole number of any kind: an int,
    numpy's, a 0-d integer tensor or array; None for anything else, a bool
    of any kind (True, np.bool_, a bool tensor) and a tensor or array of
    one element included."""
    if isinstance(value, bool):
        return None
    dtype = getattr(value, "dtype", None)
    if dtype is not None and (getattr(value, "ndim", 0) != 0 or
                              "bool" in str(dtype)):
        return None
    try:
        return operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        return None


_KINDS = {_capi.PARAM_KIND_INTEGER: "integer",
          _capi.PARAM_KIND_BOOLEAN: "boolean",
          _capi.PARAM_KIND_CHOICE: "choice"}
_table: Optional[List[Param]] = None
_by_name: Optional[Dict[str, Param]] = None


def _keyword_of(name: str) -> Optional[str]:
    for keyword, target in KEYWORDS.items():
        if target == name:
            return keyword
    return None if name in _OWN else name


def _from_info(info: _capi.ParamInfo) -> Param:
    kind = _KINDS.get(info.kind, "integer")
    choices = tuple(info.choices.decode().split()) if info.choices else ()
    default: Union[int, bool, str] = info.default_value
    if kind == "boolean":
        default = bool(info.default_value)
    elif kind == "choice":
        default = choices[info.default_value - info.min]
    name = info.name.decode()
    return Param(name=name, keyword=_keyword_of(name), kind=kind,
                 default=default, minimum=info.min, maximum=info.max,
                 choices=choices, doc=info.doc.decode(), number=info.param)


def params() -> List[Param]:
    """Every parameter of the library, in the table's order."""
    global _table
    if _table is None:
        table, info, i = [], _capi.ParamInfo(), 0
        while _capi.lib().rf_param_at(i, ctypes.byref(info)) == 0:
            table.append(_from_info(info))
            i += 1
        _table = table
    return list(_table)


def param(name: str) -> Param:
    """The parameter called `name`, by the library's name ("producers") or
    the Loader keyword that sets it ("num_workers"); KeyError, saying
    where the names are, when there is none."""
    global _by_name
    if _by_name is None:
        _by_name = {p.name: p for p in params()}
    found = _by_name.get(name) or by_keyword().get(name)
    if found is None:
        raise KeyError(f"no parameter {name!r}; ringfeed.params() lists "
                       "them, by name and Loader keyword")
    return found


def by_keyword() -> Dict[str, Param]:
    """The parameters a Loader keyword sets, by keyword."""
    return {p.keyword: p for p in params() if p.keyword}


_C_TERM = re.compile(r"\bRF_[A-Z0-9_]+")

# The C enums whose constants do not start with RF_ + the parameter's name
# (ringfeed.h: rf_start_mode's RF_START_SPAWN, rf_on_producer_death's
# RF_ON_DEATH_FAIL, rf_jpeg_verdict's RF_JPEG_AS_PIL).
_ENUM_PREFIXES = {"start_mode": "RF_START_",
                  "on_producer_death": "RF_ON_DEATH_",
                  "jpeg_warnings": "RF_JPEG_"}


def _number_value(match: "re.Match[str]") -> str:
    """"keyword= to 3" (or "keyword= 3", as the library writes a value
    after a parameter) as ``keyword=3``; a boolean's 0 and 1 as False and
    True."""
    keyword, number = match.group(1), match.group(2)
    p = by_keyword().get(keyword)
    if p is not None and p.kind == "boolean" and number in ("0", "1"):
        return f"{keyword}={number == '1'}"
    return f"{keyword}={number}"


def _one_size(match: "re.Match[str]") -> str:
    """Height's and width's ``size=`` side by side as the one size=: with
    their values, ``size=32`` for a square, else ``size=(32, 48)``."""
    height, width = match.group(1), match.group(3)
    if not height:
        return "size="
    return f"size={height}" if height == width else f"size=({height}, {width})"


def user_terms(text: str) -> str:
    """A library message in Python's terms: RF_PARAM_ON_ERROR becomes the
    keyword ``on_error=``, and a choice's constant after it (RF_ON_ERROR_SKIP)
    its name ('skip'); a number after it ("RF_PARAM_BATCH_SIZE to 8") its
    value (``batch_size=8``; ``drop_last=True`` for a flag's 1);
    RF_PARAM_HEIGHT and _WIDTH become ``size=``, one for the two."""
    last: List[Optional[Param]] = [None]

    def rewrite(match: "re.Match[str]") -> str:
        term = match.group(0)
        if term.startswith("RF_PARAM_"):
            name = term[len("RF_PARAM_"):].lower()
            if name in ("height", "width"):
                return "size="
            if name in _OWN_TERMS:
                last[0] = None
                return _OWN_TERMS[name]
            try:
                p = param(name)
            except KeyError:
                return term
            last[0] = p
            return f"{p.keyword or p.name}="
        before = last[0]
        if before is not None and before.kind == "choice":
            for choice in before.choices:
                if term.endswith("_" + choice.upper().replace("-", "_")):
                    return repr(choice)
        # a value's constant on its own (RF_START_SPAWN): its parameter is
        # the one whose constants share the prefix (see _ENUM_PREFIXES)
        for p in params():
            prefix = _ENUM_PREFIXES.get(p.name, "RF_" + p.name.upper() + "_")
            if p.kind == "choice" and term.startswith(prefix):
                for choice in p.choices:
                    if term.endswith("_" + choice.upper().replace("-", "_")):
                        return f"{p.keyword or p.name}={choice!r}"
        return term

    text = _C_TERM.sub(rewrite, text)
    # "set x= to 'v'", "(x= 'v')"
    text = re.sub(r"\b(\w+)= (?:to )?('[^']*')", r"\1=\2", text)
    text = re.sub(r"\b(\w+)= (?:to )?(\d+)\b", _number_value, text)
    text = re.sub(r"\bsize=(\d*)(, | and )size=(\d*)", _one_size, text)
    for c_name, python_name in _C_CALLS.items():
        text = text.replace(c_name, python_name)
    return text


# The library's calls and fields that messages name, as a Loader has them
_C_CALLS = {
    "rf_stats.failed_samples": "stats()['failed_samples']",
    "rf_stats.respawns": "stats()['respawns']",
    "rf_loader_sample_errors()": "sample_errors()",
    "rf_dataset_decode() of it": "`ringfeed-pack --verify` of the source",
}
