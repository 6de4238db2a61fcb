"""Shutdown leaves nothing behind: no producer process, file descriptor or
shared-memory mapping after close(), after leaving a loop early, after
garbage collection, at interpreter exit, or after Ctrl-C; and a Loader
used in a child of fork() raises ForkError without harming the parent's."""

from __future__ import annotations

import gc
import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

import ringfeed
from helpers import (alive, arena_maps, child_env, children, dataset,
                     open_fds, producers_of, run_python, wait_gone)


def ringfeed_maps():
    with open("/proc/self/maps") as f:
        return [line for line in f if "/memfd:ringfeed-" in line]


def snapshot():
    gc.collect()
    return {"fds": sorted(open_fds()), "children": children(os.getpid()),
            "maps": ringfeed_maps()}


def one_cycle(root, **kwargs):
    loader = ringfeed.Loader(root, 8, size=16, num_workers=1, **kwargs)
    for images, labels in loader:
        assert len(labels) == 8
        break
    del images, labels
    loader.close()


def test_no_leak_after_200_cycles(tmp_path_factory):
    root = dataset(tmp_path_factory, "tiny")
    one_cycle(root)  # whatever is opened once per process (the library)
    before = snapshot()
    assert not before["maps"], "a ring is mapped before the cycles"
    for i in range(200):
        one_cycle(root, seed=i)
    after = snapshot()
    assert after["fds"] == before["fds"], "file descriptors leaked"
    assert after["maps"] == before["maps"], "shared memory left mapped"
    left = [p for p in after["children"] if p not in before["children"]
            and alive(p)]
    assert not left, f"processes left: {left}"


def test_leaving_a_loop_early_keeps_one_slot(tmp_path_factory):
    """After a break the batch in hand stays valid (keep_batches=1: one
    slot) and nothing more stays with the loop; the next loop's first
    batch releases it."""
    root = dataset(tmp_path_factory)
    with ringfeed.Loader(root, 8, size=16, num_workers=2) as loader:
        for i, (images, labels) in enumerate(loader):
            if i == 3:
                break
        del images, labels
        gc.collect()
        stats = loader.stats()
        assert stats["slots_with_user"] == 1, "more than the batch in hand"
        # and the loader goes on: the next loop yields batches
        rest = sum(len(labels) for _, labels in loader)
        assert rest == 160  # the next epoch, whole
        assert loader.stats()["slots_with_user"] == 1  # its last batch


def test_garbage_collection_stops_the_producers(tmp_path_factory):
    root = dataset(tmp_path_factory)
    before = set(producers_of(os.getpid()))
    loader = ringfeed.Loader(root, 8, size=16, num_workers=2)
    for images, labels in loader:
        break
    mine = [p for p in producers_of(os.getpid()) if p not in before]
    assert len(mine) == 2
    del loader, images, labels
    gc.collect()
    assert not wait_gone(mine), "producers outlived their loader"
    assert not arena_maps()


EXIT_OPEN = textwrap.dedent("""
    import os, sys
    import ringfeed
    loader = ringfeed.Loader(sys.argv[1], 8, size=16, num_workers=2)
    for images, labels in loader:
        break
    pids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids += f.read().split()
    print(" ".join(pids), flush=True)
    if sys.argv[2] == "raise":
        raise SystemExit("leaving with an error")
    # normal exit, loader open, a view of the ring still referenced
""")


@pytest.mark.parametrize("how", ["normal", "raise"])
def test_interpreter_exit_leaves_no_producer(tmp_path_factory, how):
    root = dataset(tmp_path_factory)
    done = run_python(EXIT_OPEN, root, how)
    assert done.returncode == (0 if how == "normal" else 1), done.stderr
    assert "Exception ignored" not in done.stderr, done.stderr
    assert "Traceback" not in done.stderr, done.stderr
    pids = [int(p) for p in done.stdout.split()]
    assert len(pids) >= 2, f"no producers recorded: {done.stdout!r}"
    assert not wait_gone(pids), f"producers {pids} outlived the program"


CTRL_C = textwrap.dedent("""
    import os, signal, sys, time
    import ringfeed
    raised = []
    def on_sigint(signum, frame):  # Python's own handler, timed
        raised.append(time.monotonic())
        raise KeyboardInterrupt
    signal.signal(signal.SIGINT, on_sigint)
    # a slow loader: real JPEG decodes at 224, one producer, big batches
    loader = ringfeed.Loader(ringfeed.Synthetic(100000, 10), 64, size=224,
                             num_workers=1)
    pids = []
    try:
        for i, (images, labels) in enumerate(loader):
            if i == 0:
                for task in os.listdir("/proc/self/task"):
                    with open(f"/proc/self/task/{task}/children") as f:
                        pids += f.read().split()
                print("pids", " ".join(pids), flush=True)
        print("finished?!", flush=True)
    except KeyboardInterrupt:
        print("interrupted", raised[0], time.monotonic(), loader.closed,
              flush=True)
""")


def test_ctrl_c_raises_keyboard_interrupt_promptly():
    """SIGINT while next() waits for a batch that will not come (its
    producer is stopped) raises KeyboardInterrupt at once, and closes the
    loader: the stopped producers are gone too."""
    proc = subprocess.Popen([sys.executable, "-c", CTRL_C], env=child_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    try:
        first = proc.stdout.readline().split()
        assert first and first[0] == "pids", proc.stderr.read()
        pids = [int(p) for p in first[1:]]
        assert pids
        # Stop the producers, so that no batch comes again: a loop that
        # saw SIGINT only when its next batch came would never raise.
        for pid in pids:
            os.kill(pid, signal.SIGSTOP)
        time.sleep(0.5)  # the loop takes the batches ready, then waits
        assert proc.poll() is None
        sent = time.monotonic()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    words = out.split()
    assert words[:1] == ["interrupted"], out + err
    delay = float(words[1]) - sent
    assert delay < 1.0, f"KeyboardInterrupt came {delay:.2f} s after SIGINT"
    closed = float(words[2]) - sent
    assert closed < 2.0, f"the loader took {closed:.2f} s to close"
    assert words[3] == "True", "the loader did not close on Ctrl-C"
    assert proc.returncode == 0, err
    assert not wait_gone(pids), f"producers {pids} outlived Ctrl-C"


FORK = textwrap.dedent("""
    import os, sys
    import ringfeed
    loader = ringfeed.Loader(sys.argv[1], 8, size=16, num_workers=2,
                             shuffle=False)
    it = loader.batches()
    first = next(it).indices.tolist()
    producers = sorted(int(p) for t in os.listdir("/proc/self/task")
                       for p in open(f"/proc/self/task/{t}/children")
                       .read().split())
    pid = os.fork()
    if pid == 0:
        # the child: every use raises ForkError; a normal exit follows
        # (atexit and __del__ run and must leave the parent's run alone)
        code = 0
        for use in (lambda: next(iter(loader)), lambda: len(loader),
                    loader.state_dict, loader.stats):
            try:
                use()
                code = 10
            except ringfeed.ForkError as e:
                if "fork" not in str(e):
                    code = 11
            except BaseException:
                code = 12
        try:
            next(it)  # the parent's generator, in the child
            code = 13
        except ringfeed.ForkError:
            pass
        except BaseException:
            code = 14
        # the child's copy of the run, dropped unclosed, frees only itself
        run, loader._run = loader._run, None
        del run
        sys.exit(code)
    _, status = os.waitpid(pid, 0)
    child = os.waitstatus_to_exitcode(status)
    # the parent goes on where it was, with the same producers
    rest = [i for b in it for i in b.indices.tolist()]
    alive = all(os.path.exists(f"/proc/{p}") for p in producers)
    print(child, sorted(first + rest) == list(range(len(first + rest))),
          len(first + rest), alive)
    loader.close()
""")


def test_loader_in_a_fork_child_raises(tmp_path_factory):
    root = dataset(tmp_path_factory)
    done = run_python(FORK, root)
    assert done.returncode == 0, done.stderr
    child, complete, count, alive_after = done.stdout.split()
    assert child == "0", f"the child's check failed with code {child}"
    assert complete == "True" and count == "160", done.stdout
    assert alive_after == "True", \
        "the child's exit stopped the parent's producers"


def test_close_unmaps_the_ring_without_the_garbage_collector(
        tmp_path_factory):
    """close(), and a loop that starts the producers again, give the ring
    back at once: nothing in the package refers to itself in a cycle that
    only Python's cyclic collector would free (a week-long job could hold
    a ring per validation pass until a full collection ran)."""
    root = dataset(tmp_path_factory, "tiny")
    gc.collect()
    gc.disable()
    try:
        for _ in range(3):
            loader = ringfeed.Loader(root, 8, size=16, num_workers=1,
                                     on_message=lambda text: None)
            for images, labels in loader:
                break
            del images, labels
            loader.set_epoch(1)  # the next loop starts the producers again
            for images, labels in loader:
                break
            del images, labels
            assert len(arena_maps()) == 1, \
                "the first loop's ring is still mapped"
            loader.close()
            assert not ringfeed_maps(), "close() left the ring mapped"
            del loader
    finally:
        gc.enable()


# ---- threads: close() from another thread, the exit hook, callbacks ----

def new_producers(before, count):
    """This process's producers not in `before`, once `count` have
    started (a producer shows its name once the helper has started)."""
    deadline = time.monotonic() + 10
    while True:
        pids = [p for p in producers_of(os.getpid()) if p not in before]
        if len(pids) >= count or time.monotonic() > deadline:
            assert len(pids) == count, pids
            return pids
        time.sleep(0.02)


DAEMON_THREAD_AT_EXIT = textwrap.dedent("""
    import sys, threading
    # numpy batches: torch's own teardown with a daemon thread still in
    # its code at exit is torch's matter (CI saw 'terminate called without
    # an active exception' once), not the exit hook's
    sys.modules["torch"] = None
    import ringfeed
    loader = ringfeed.Loader(sys.argv[1], 4, size=16, num_workers=1)
    taken = threading.Semaphore(0)
    def iterate():  # a background prefetcher, as prefetch_generator's
        while True:
            for images, labels in loader:
                taken.release()
    threading.Thread(target=iterate, daemon=True).start()
    for _ in range(3):
        taken.acquire()
    import os
    pids = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            pids += f.read().split()
    print("exiting", *pids, flush=True)
""")


def test_a_daemon_thread_iterating_at_exit(tmp_path_factory):
    """At exit, with a daemon thread iterating a loader, the interpreter
    ends cleanly and leaves no producer (it crashed in the library, or
    reported a corrupted ring, when the exit hook closed the loader under
    that thread's next())."""
    root = dataset(tmp_path_factory, "tiny")
    for _ in range(8):  # the crash came in about half the runs
        done = run_python(DAEMON_THREAD_AT_EXIT, root)
        assert done.returncode == 0, done.stderr
        words = done.stdout.split()
        assert words[:1] == ["exiting"] and len(words) > 1, \
            done.stdout + done.stderr
        assert "Error" not in done.stderr, done.stderr
        pids = [int(p) for p in words[1:]]
        assert not wait_gone(pids), f"producers {pids} outlived the program"


def test_close_from_another_thread_ends_a_waiting_loop(tmp_path_factory):
    """close() from a watchdog thread while the loop waits for a batch that
    will not come (its producer stopped): the loop raises LoaderClosed at
    once, and the producers are gone."""
    import threading
    root = dataset(tmp_path_factory, "small")
    before = set(producers_of(os.getpid()))  # other tests' loaders
    loader = ringfeed.Loader(root, 8, size=16, num_workers=1)
    pids = new_producers(before, 1)
    raised: list = []

    def loop() -> None:
        try:
            for _ in loader:
                pass
        except BaseException as e:  # what the loop raised, to look at
            raised.append(e)

    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    thread = threading.Thread(target=loop)
    thread.start()
    time.sleep(0.5)  # the loop takes the batches ready, then waits
    assert thread.is_alive() and not raised
    started = time.monotonic()
    loader.close()
    thread.join(10)
    took = time.monotonic() - started
    assert not thread.is_alive(), "the loop still waits after close()"
    assert took < 5, f"close() took {took:.1f} s"
    assert len(raised) == 1 and isinstance(raised[0], ringfeed.LoaderClosed), \
        raised
    assert loader.closed
    assert not wait_gone(pids), f"producers {pids} outlived close()"


def test_close_inside_the_loop_then_next_raises_loader_closed(
        tmp_path_factory):
    """close() in the loop's body (a preemption handler that saves and
    closes): the loop's next step raises LoaderClosed, not a library
    error."""
    root = dataset(tmp_path_factory, "tiny")
    loader = ringfeed.Loader(root, 4, size=16, num_workers=1)
    steps = 0
    with pytest.raises(ringfeed.LoaderClosed):
        for images, labels in loader:
            steps += 1
            loader.close()
    assert steps == 1


def test_close_from_on_message_closes_after_the_call(tmp_path_factory):
    """A message callback that closes the loader (at a producer's
    replacement, say) runs inside the library's next(): the loader closes
    when that call has returned, and the loop raises LoaderClosed."""
    root = dataset(tmp_path_factory, "small")
    said: list = []

    def on_message(text: str) -> None:
        said.append(text)
        loader.close()

    before = set(producers_of(os.getpid()))  # other tests' loaders
    loader = ringfeed.Loader(root, 8, size=16, num_workers=1,
                             on_message=on_message)
    pids = new_producers(before, 1)
    with pytest.raises(ringfeed.LoaderClosed):
        for i, _ in enumerate(loader):
            if i == 0:
                os.kill(pids[0], signal.SIGKILL)
    assert said and "replaced" in said[0], said
    assert loader.closed
    assert not (set(producers_of(os.getpid())) - before)


CTRL_C_WHILE_MAKING = textwrap.dedent("""
    import os, random, signal, sys, time
    import ringfeed
    signal.signal(signal.SIGALRM, signal.default_int_handler)
    random.seed(int(sys.argv[2]))
    made = interrupted = 0
    for i in range(40):
        signal.setitimer(signal.ITIMER_REAL, random.uniform(0.0005, 0.03))
        try:
            loader = ringfeed.Loader(sys.argv[1], 4, size=16, num_workers=2)
            signal.setitimer(signal.ITIMER_REAL, 0)
            made += 1
            loader.close()
        except KeyboardInterrupt:
            interrupted += 1
        signal.setitimer(signal.ITIMER_REAL, 0)
    # A Ctrl-C that landed just after Loader() returned leaves the made
    # loader in `loader`, alive and open, as any object a program still
    # names: that one is this script's to let go of.
    loader = None
    import gc; gc.collect()
    time.sleep(0.2)
    children = []
    for task in os.listdir("/proc/self/task"):
        with open(f"/proc/self/task/{task}/children") as f:
            children += f.read().split()
    rings = [l for l in open("/proc/self/maps") if "memfd:ringfeed-" in l]
    print(made, interrupted, len(children), len(rings))
""")


def test_ctrl_c_while_a_loader_is_made_leaves_nothing(tmp_path_factory):
    """Ctrl-C (here SIGALRM raising KeyboardInterrupt) at random moments
    of Loader(): its producers and ring go with the exception (they were
    left running when it landed just after the library's open)."""
    root = dataset(tmp_path_factory, "tiny")
    done = run_python(CTRL_C_WHILE_MAKING, root, "1", timeout=120)
    assert done.returncode == 0, done.stderr
    made, interrupted, producers, rings = map(int, done.stdout.split())
    assert interrupted > 0, "no Loader() was interrupted: nothing tested"
    assert (producers, rings) == (0, 0), done.stdout


def test_a_run_dropped_unclosed_stops_its_producers(tmp_path_factory):
    """A Ctrl-C that lands as the producers' run is made, after it is
    built and before the Loader holds it, drops the run unclosed: it
    stops its producers itself (they ran on until the process ended:
    test_ctrl_c_while_a_loader_is_made_leaves_nothing caught it once in
    CI). Here the Loader lets go of its run by hand."""
    root = dataset(tmp_path_factory, "tiny")
    loader = ringfeed.Loader(root, 4, size=16, num_workers=2)
    producers = producers_of(os.getpid())
    assert len(producers) == 2
    run, loader._run = loader._run, None
    del run
    assert wait_gone(producers) == []
    loader.close()


def test_close_from_a_signal_handler_in_the_loop(tmp_path_factory):
    """close() from a signal handler (a preemption handler) that runs in
    the loop's own thread, at any moment of taking a batch: the loop ends
    with LoaderClosed, never with an error from a loader closed under it,
    and no producer is left."""
    import random
    root = dataset(tmp_path_factory, "small")
    before = set(producers_of(os.getpid()))
    rng = random.Random(5)
    old = signal.getsignal(signal.SIGALRM)
    try:
        for _ in range(80):  # the old fault came about once in 80
            loader = ringfeed.Loader(root, 8, size=16, num_workers=1)
            signal.signal(signal.SIGALRM, lambda *_: loader.close())
            signal.setitimer(signal.ITIMER_REAL, rng.uniform(0.001, 0.05))
            with pytest.raises(ringfeed.LoaderClosed):
                while True:  # epoch after epoch, until the handler closes
                    for images, labels in loader:
                        assert len(labels) == 8
            signal.setitimer(signal.ITIMER_REAL, 0)
            assert loader.closed
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    gc.collect()
    assert not wait_gone(set(producers_of(os.getpid())) - before)


def test_close_from_another_thread_while_producers_restart(
        tmp_path_factory):
    """close() from another thread while the loop moves to another epoch
    (set_epoch() restarts the producers there): the loader ends closed,
    with no producer of a restarted run left behind."""
    import random
    import threading
    root = dataset(tmp_path_factory, "small")
    before = set(producers_of(os.getpid()))
    rng = random.Random(7)
    for _ in range(8):
        loader = ringfeed.Loader(root, 8, size=16, num_workers=1)
        raised: list = []

        def hop() -> None:
            try:
                for epoch in range(1000):
                    loader.set_epoch(epoch * 7 % 5)  # a restart each time
                    next(iter(loader))
            except BaseException as e:
                raised.append(e)

        thread = threading.Thread(target=hop)
        thread.start()
        time.sleep(rng.uniform(0.0, 0.2))
        loader.close()
        thread.join(30)
        assert not thread.is_alive()
        assert raised and isinstance(raised[0], ringfeed.LoaderClosed), raised
        assert loader.closed
    gc.collect()
    assert not wait_gone(set(producers_of(os.getpid())) - before)


def test_ctrl_c_in_a_finalizer_is_raised_at_the_next_batch(tmp_path_factory,
                                                            monkeypatch):
    """A Ctrl-C that lands while a finalizer of ours runs (here a ring
    freed as its last view goes, after the producers started again; it
    takes ~0.1 s for a few hundred MiB) was dropped by Python ("Exception
    ignored in"), and the job went on: the next batch the loop takes
    raises it now, and the loader closes as for any Ctrl-C."""
    from ringfeed import _capi, _lifetime
    root = dataset(tmp_path_factory)
    real_munmap = _capi.munmap
    freed = []

    def interrupted(base, size):
        real_munmap(base, size)
        freed.append(size)
        raise KeyboardInterrupt  # as a signal landing right after the call

    loader = ringfeed.Loader(root, 4, size=16, num_workers=1)
    images, _ = next(iter(loader))  # a view of the first run's ring
    loader.set_epoch(3)  # the next loop starts the producers again
    batches = iter(loader)
    next(batches)
    monkeypatch.setattr(_capi, "munmap", interrupted)
    del images  # the first ring's last view: its finalizer frees it
    monkeypatch.undo()
    assert freed, "the first ring was not freed"
    with pytest.raises(KeyboardInterrupt):
        next(batches)
    assert loader.closed
    assert not _lifetime._interrupt_kept  # raised once, not again


def test_what_must_precede_the_unmap_runs_first(tmp_path_factory,
                                                monkeypatch):
    """The ring's finalizer first runs what the run put in before_unmap
    (with device=, the uploader's close: wait for the copies, unregister
    the ring from CUDA), then unmaps: a Loader collected in a reference
    cycle (loader -> on_message=self.log -> trainer -> loader) has its
    ring finalized before its __del__ runs, and the ring was unmapped
    while CUDA still had it registered. Recorded here without a GPU."""
    from ringfeed import _capi
    order = []
    real_munmap = _capi.munmap

    def munmap(base, size):
        order.append("munmap")
        real_munmap(base, size)

    monkeypatch.setattr(_capi, "munmap", munmap)
    loader = ringfeed.Loader(dataset(tmp_path_factory), 4, size=16,
                             num_workers=1)
    loader._run.before_unmap[0] = lambda: order.append("unregister")
    images, _ = next(iter(loader))
    loader.close()  # the ring stays mapped: `images` is a view of it
    assert order == []
    del images
    gc.collect()
    assert order == ["unregister", "munmap"]
