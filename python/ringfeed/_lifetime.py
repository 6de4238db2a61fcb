"""Loaders as the process sees them: each open one is closed at
interpreter exit, each becomes its parent's in a child of fork(), and the
library's messages reach a Loader without keeping it alive. Nothing here
is public."""

from __future__ import annotations

import atexit
import os
import threading
import weakref
from typing import Any, Callable

_live: "weakref.WeakSet[Any]" = weakref.WeakSet()
_live_lock = threading.Lock()

# A Ctrl-C that lands while Python runs a finalizer of ours (a ring's
# unmapping, a dropped Loader's close, a loop's generator closed after a
# break) would be dropped: Python prints "Exception ignored in ..." and
# goes on, and the job with it. Freeing a ring of a few hundred MiB takes
# ~0.1 s, long enough to catch one. Those places keep it here instead,
# and the next batch a loop takes (or the next Loader made) raises it.
_interrupt_kept = False


def keep_interrupt() -> None:
    """In an `except KeyboardInterrupt` of code a finalizer runs."""
    global _interrupt_kept
    _interrupt_kept = True


def raise_kept_interrupt() -> None:
    """Raises the KeyboardInterrupt a finalizer kept, if any."""
    global _interrupt_kept
    if _interrupt_kept:
        _interrupt_kept = False
        raise KeyboardInterrupt


def track(loader: Any) -> None:
    """loader is open: closed at exit, marked in a child of fork()."""
    with _live_lock:
        _live.add(loader)


def untrack(loader: Any) -> None:
    """loader is closed."""
    with _live_lock:
        _live.discard(loader)


def _close_all() -> None:
    """At interpreter exit: every loader still open is closed, so no
    producer outlives the program's own cleanup; but not one that another
    thread is taking a batch from (a daemon thread waiting in the
    library): waking that thread would run it into the interpreter's
    finalization, and the producers end with the process anyway (the
    kernel signals them when their parent goes)."""
    for loader in list(_live):
        if loader._lock.acquire(blocking=False):
            try:
                loader.close()
            finally:
                loader._lock.release()


atexit.register(_close_all)


def _forked() -> None:
    """In a child of fork(): every loader is its parent's."""
    for loader in list(_live):
        loader._forked = True
        # a thread of the parent may have held it; none runs here
        loader._lock = threading.RLock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forked)


def weak_say(loader: Any) -> Callable[[str], None]:
    """The library's messages to loader._say(), holding the loader weakly:
    the run keeps its message callback, and a strong reference would make
    a cycle (loader -> run -> callback -> loader), so that a Loader
    dropped with `del` kept its producers, ring and CPUs until the cyclic
    collector ran."""
    ref = weakref.ref(loader)

    def say(text: str) -> None:
        alive = ref()
        if alive is not None:
            alive._say(text)

    return say
