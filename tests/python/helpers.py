"""Shared helpers of the ringfeed package's tests (tests/python/test_*.py).

What the tests need beside the package: small image folders written with
PIL, the C library's own decode of a sample (rf_dataset_decode(), the
reference every batch is compared with), the layout program
tests/python-reference, and /proc readers for leaks (file descriptors,
child processes, the ring's memfd mapping).

Environment:
  RINGFEED_LIBRARY    the libringfeed.so under test (else the package's own)
  RINGFEED_REFERENCE  the tests/python-reference program of the same build;
                      tests that need it skip when it is not set
"""

from __future__ import annotations

import ctypes
import os
import socket
import subprocess
import sys
import time
from typing import Dict, Iterable, List, Optional, Sequence, Tuple

import numpy as np
import pytest

import ringfeed
from ringfeed import _capi

REFERENCE = os.environ.get("RINGFEED_REFERENCE") or None

needs_reference = pytest.mark.skipif(
    REFERENCE is None or not os.access(REFERENCE or "", os.X_OK),
    reason="set RINGFEED_REFERENCE to the build's tests/python-reference")

# ---- datasets ------------------------------------------------------------

_datasets: Dict[str, str] = {}


def assert_user_terms(text: str) -> None:
    """A message in the user's terms: no C constant (RF_PARAM_..., RF_E_...)
    where a Python keyword stands for it."""
    assert "RF_" not in text, f"a C constant in {text!r}"


def write_folder(root: str, classes: int, per_class: int, *,
                 seed: int = 1, png_every: int = 0,
                 sides: Tuple[int, int] = (40, 96)) -> List[str]:
    """Writes an ImageFolder: root/class_NN/img_MMMM.jpg, `per_class`
    images of random sizes (sides) in each of `classes` folders; with
    png_every=k every k-th image is a PNG instead. The pictures are smooth
    gradients with noise, so that crops and flips change the pixels.
    Returns the files written, in no particular order."""
    Image = pytest.importorskip("PIL.Image")
    rng = np.random.default_rng(seed)
    written = []
    n = 0
    for c in range(classes):
        folder = os.path.join(root, f"class_{c:02d}")
        os.makedirs(folder, exist_ok=True)
        for i in range(per_class):
            h, w = (int(v) for v in rng.integers(sides[0], sides[1] + 1, 2))
            y = np.linspace(0, 255, h)[:, None, None]
            x = np.linspace(0, 255, w)[None, :, None]
            base = np.concatenate([y + 0 * x, x + 0 * y,
                                   (x + y) / 2 + rng.integers(0, 60)], axis=2)
            noise = rng.integers(-25, 26, (h, w, 3))
            pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
            image = Image.fromarray(pixels, "RGB")
            n += 1
            if png_every and n % png_every == 0:
                path = os.path.join(folder, f"img_{i:04d}.png")
                image.save(path, format="PNG")
            else:
                path = os.path.join(folder, f"img_{i:04d}.jpg")
                image.save(path, format="JPEG", quality=90)
            written.append(path)
    return written


def dataset(tmp_path_factory, name: str = "small") -> str:
    """A folder made once per test session (shared by every test file):
    "small": 4 classes of 40 (160 images, a PNG every 7th);
    "tiny": 3 classes of 10 (30 images);
    "odd": 3 classes of 11 (33 images, which no world size of 2 or 4
    divides)."""
    if name not in _datasets:
        root = str(tmp_path_factory.mktemp(f"ds-{name}"))
        if name == "small":
            write_folder(root, 4, 40, seed=11, png_every=7)
        elif name == "tiny":
            write_folder(root, 3, 10, seed=12)
        elif name == "odd":
            write_folder(root, 3, 11, seed=13, sides=(24, 48))
        else:
            raise KeyError(name)
        _datasets[name] = root
    return _datasets[name]


def class_of(root: str, relative_name: str) -> int:
    """The label torchvision's ImageFolder gives a file: the index of its
    class folder among the sorted class folders."""
    classes = sorted(e for e in os.listdir(root)
                     if os.path.isdir(os.path.join(root, e)))
    return classes.index(relative_name.split("/")[0])


# ---- the library's own decode (the reference) ----------------------------


class SampleInfo(ctypes.Structure):
    """struct rf_sample_info (include/ringfeed.h), for rf_dataset_read()."""

    _fields_ = [("data", ctypes.c_void_p), ("size", ctypes.c_size_t),
                ("label", ctypes.c_int64), ("kind", ctypes.c_int),
                ("name", ctypes.c_char_p)]


def _own_lib() -> ctypes.CDLL:
    """The library the package loaded, through a handle of our own (so
    the prototypes declared here do not touch the package's)."""
    cdll = ctypes.CDLL(ringfeed.library_path())
    vp = ctypes.c_void_p
    cdll.rf_config_create.restype = vp
    cdll.rf_config_free.argtypes = [vp]
    cdll.rf_config_set.argtypes = [vp, ctypes.c_int, ctypes.c_int64]
    cdll.rf_config_error.argtypes = [vp]
    cdll.rf_config_error.restype = ctypes.c_char_p
    cdll.rf_dataset_open.argtypes = [ctypes.POINTER(vp), ctypes.c_char_p,
                                     ctypes.POINTER(vp)]
    cdll.rf_dataset_size.argtypes = [vp]
    cdll.rf_dataset_size.restype = ctypes.c_uint64
    cdll.rf_dataset_read.argtypes = [vp, ctypes.c_uint64,
                                     ctypes.POINTER(SampleInfo)]
    cdll.rf_dataset_decode.argtypes = [vp, vp, ctypes.c_uint64,
                                       ctypes.c_uint64, vp]
    cdll.rf_dataset_error.argtypes = [vp]
    cdll.rf_dataset_error.restype = ctypes.c_char_p
    cdll.rf_dataset_close.argtypes = [vp]
    return cdll


class Reference:
    """rf_dataset_decode() of a folder under the parameters a Loader was
    given: `values` maps parameter names (ringfeed.params()) to Python
    values, as the Loader's keywords take them."""

    def __init__(self, path: str, values: Dict[str, object]) -> None:
        self.lib = _own_lib()
        self.path = path
        self.cfg = ctypes.c_void_p(self.lib.rf_config_create())
        assert self.cfg.value
        self.height = int(values["height"])
        self.width = int(values["width"])
        self.channels = int(values.get("channels", 3))
        for name, value in values.items():
            p = ringfeed.param(name)
            number = p.convert(value, name)
            rc = self.lib.rf_config_set(self.cfg, p.number, number)
            assert rc == 0, (name, value,
                             self.lib.rf_config_error(self.cfg))
        self.ds = ctypes.c_void_p()
        err = ctypes.c_void_p()
        rc = self.lib.rf_dataset_open(ctypes.byref(self.ds),
                                      os.fsencode(path), ctypes.byref(err))
        assert rc == 0, _capi.take_message(err)
        self.size = self.lib.rf_dataset_size(self.ds)

    def decode(self, epoch: int, index: int) -> np.ndarray:
        """The sample's bytes as a producer makes them for `epoch`."""
        out = np.zeros(self.height * self.width * self.channels, np.uint8)
        rc = self.lib.rf_dataset_decode(self.ds, self.cfg, epoch, index,
                                        out.ctypes.data)
        assert rc == 0, (epoch, index, rc,
                         self.lib.rf_dataset_error(self.ds))
        return out

    def name(self, index: int) -> str:
        """The sample's path below the folder (class/file)."""
        info = SampleInfo()
        rc = self.lib.rf_dataset_read(self.ds, index, ctypes.byref(info))
        assert rc == 0, (index, self.lib.rf_dataset_error(self.ds))
        return info.name.decode()

    def close(self) -> None:
        if self.ds:
            self.lib.rf_dataset_close(self.ds)
            self.ds = ctypes.c_void_p()
        if self.cfg:
            self.lib.rf_config_free(self.cfg)
            self.cfg = ctypes.c_void_p()

    def __enter__(self) -> "Reference":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


# ---- batches -------------------------------------------------------------


def as_numpy(x) -> np.ndarray:
    """A tensor or array as a numpy array (a copy)."""
    if hasattr(x, "numpy"):
        return x.detach().cpu().numpy().copy()
    return np.array(x, copy=True)


def collect(loader, count: Optional[int] = None) -> List[Tuple]:
    """(epoch, number, images, labels, indices) of the batches one pass of
    loader.batches() yields (the first `count` only when given), copied."""
    out = []
    for batch in loader.batches():
        out.append((batch.epoch, batch.number, as_numpy(batch.images),
                    as_numpy(batch.labels), as_numpy(batch.indices)))
        if count is not None and len(out) == count:
            break
    return out


def assert_same_batches(got: Sequence[Tuple], want: Sequence[Tuple]) -> None:
    """Two lists from collect() hold the same batches, byte for byte."""
    assert len(got) == len(want), (len(got), len(want))
    for g, w in zip(got, want):
        assert (g[0], g[1]) == (w[0], w[1]), "batch (epoch, number) differs"
        assert np.array_equal(g[4], w[4]), f"indices of {g[:2]} differ"
        assert np.array_equal(g[3], w[3]), f"labels of {g[:2]} differ"
        assert g[2].shape == w[2].shape and np.array_equal(g[2], w[2]), \
            f"pixels of batch {g[:2]} differ"


# ---- processes -----------------------------------------------------------


def child_env(**changes: Optional[str]) -> Dict[str, str]:
    """This environment, with the package importable in a child, without
    any launcher variable (RANK, WORLD_SIZE, ...), and `changes` applied
    (None removes)."""
    env = dict(os.environ)
    for name in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
                 "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
                 "PMI_RANK", "PMI_SIZE", "SLURM_PROCID", "SLURM_NTASKS"):
        env.pop(name, None)
    package = os.path.dirname(os.path.dirname(os.path.abspath(
        ringfeed.__file__)))
    env["PYTHONPATH"] = os.pathsep.join(
        p for p in (package, env.get("PYTHONPATH")) if p)
    env["RINGFEED_LIBRARY"] = ringfeed.library_path()
    for name, value in changes.items():
        if value is None:
            env.pop(name, None)
        else:
            env[name] = value
    return env


def run_python(code: str, *args: str, timeout: float = 60,
               env: Optional[Dict[str, str]] = None
               ) -> subprocess.CompletedProcess:
    """Runs `code` in a new interpreter (this one's executable); returns
    the finished process with stdout and stderr as text."""
    return subprocess.run([sys.executable, "-c", code, *args],
                          env=env or child_env(), capture_output=True,
                          text=True, timeout=timeout)


def children(pid: int) -> List[int]:
    """The pids of pid's child processes (/proc/PID/task/*/children)."""
    found = []
    try:
        tasks = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return found
    for task in tasks:
        try:
            with open(f"/proc/{pid}/task/{task}/children") as f:
                found += [int(p) for p in f.read().split()]
        except (FileNotFoundError, ProcessLookupError):
            pass
    return sorted(set(found))


def alive(pid: int) -> bool:
    """Whether process pid exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            stat = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat[stat.rindex(")") + 2] != "Z"


def command_line(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return f.read().replace(b"\0", b" ").decode(errors="replace")
    except (FileNotFoundError, ProcessLookupError):
        return ""


def producers_of(pid: int) -> List[int]:
    """pid's children that are ringfeed producers, living."""
    return [c for c in children(pid)
            if "ringfeed-producer" in command_line(c) and alive(c)]


def wait_gone(pids: Iterable[int], timeout: float = 5.0) -> List[int]:
    """Waits up to `timeout` s for the processes to end; returns those
    still alive."""
    pids = list(pids)
    deadline = time.monotonic() + timeout
    while True:
        left = [p for p in pids if alive(p)]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


def open_fds(pid: str = "self") -> List[str]:
    """What each of the process's file descriptors points at."""
    out = []
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            out.append(os.readlink(f"/proc/{pid}/fd/{fd}"))
        except FileNotFoundError:  # the fd of the listing itself
            pass
    return out


def arena_maps(pid: str = "self") -> List[str]:
    """The lines of /proc/PID/maps that map a ring ("ringfeed-arena")."""
    with open(f"/proc/{pid}/maps") as f:
        return [line for line in f if "/memfd:ringfeed-arena" in line]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
