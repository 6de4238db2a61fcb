"""Each failure as its own exception, carrying the library's detail in
Python's terms (keywords, never a C constant)."""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import threading

import pytest

import ringfeed
from helpers import assert_user_terms, dataset, producers_of, write_folder


def test_an_epoch_past_the_end_of_a_run_names_set_epoch():
    """set_epoch() past the 2**40 - 1 batches a run counts: the message
    says what to lower in the Loader's terms (it named "start_epoch=",
    no keyword of the Loader's, and "epochs", which was not given)."""
    loader = ringfeed.Loader(ringfeed.Synthetic(5000, 4), 1, size=8,
                             num_workers=1)
    loader.set_epoch(2**29)
    with pytest.raises(ringfeed.ConfigError,
                       match=r"past the end of a run, which counts 2\^40 - 1 "
                             r"batches .*; lower set_epoch\(\)'s epoch or "
                             r"raise batch_size="):
        next(iter(loader))
    loader.close()


def test_unknown_keyword_is_a_type_error(tmp_path_factory):
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(TypeError) as caught:
        ringfeed.Loader(root, 8, batch_sise=3)
    assert "batch_sise" in str(caught.value)
    with pytest.raises(TypeError):
        ringfeed.Loader(root, 8, on_error=1)  # a choice takes its name
    with pytest.raises(TypeError):
        ringfeed.Loader(root, 8, slots="many")


@pytest.mark.parametrize("kwargs, keyword", [
    (dict(batch_size=0), "batch_size="),
    (dict(batch_size=70000), "batch_size="),
    (dict(size=0), "size="),
    (dict(num_workers=-1), "num_workers="),
    (dict(num_workers=0), "num_workers="),
    (dict(dtype="float32x", mean=(0.5,), std=(0.5,)), "dtype="),
    (dict(dtype="float32", mean=(0.5, 0.5), std=(0.5, 0.5)), "channels"),
    (dict(slots=1 << 20), "slots="),
    (dict(max_error_ppm=2_000_000), "max_error_ppm="),
    (dict(on_error="ignore"), "on_error="),
    (dict(transform="random"), "transform="),
    (dict(layout="hwc"), "layout="),
])
def test_out_of_range_names_the_keyword(tmp_path_factory, kwargs, keyword):
    root = dataset(tmp_path_factory, "tiny")
    args = dict(batch_size=8, size=32)
    args.update(kwargs)
    if isinstance(args.get("dtype"), str):  # a torch dtype, by name
        torch = pytest.importorskip("torch")
        if not hasattr(torch, args["dtype"]):
            args["dtype"] = torch.int32  # not a float dtype
        else:
            args["dtype"] = getattr(torch, args["dtype"])
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, args.pop("batch_size"), **args)
    assert isinstance(caught.value, ValueError)
    assert keyword in str(caught.value)
    assert_user_terms(str(caught.value))


def test_keep_batches_needs_more_slots(tmp_path_factory):
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 8, size=32, slots=4, keep_batches=4)
    assert str(caught.value) == (
        "keep_batches=4 holds 4 slots, one a batch, and the ring has 4 "
        "slots; the producers need one more: pass slots=5 or more")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 8, size=32, slots=1)
    assert str(caught.value) == (
        "the loop holds 1 slot, the batch it is on, and the ring has 1 "
        "slot; the producers need one more: pass slots=2 or more")
    # one fewer fits
    with ringfeed.Loader(root, 8, size=32, slots=4, keep_batches=3) as ok:
        assert sum(len(labels) for _, labels in ok) == 30


def test_killed_producer_is_producer_died(tmp_path_factory):
    root = dataset(tmp_path_factory)
    loader = ringfeed.Loader(root, 8, size=32, on_producer_death="fail",
                             num_workers=2, epochs=3)
    batches = loader.batches()
    next(batches)
    producers = producers_of(os.getpid())
    assert len(producers) == 2
    os.kill(producers[0], signal.SIGKILL)
    with pytest.raises(ringfeed.ProducerDied) as caught:
        for _ in batches:
            pass
    assert isinstance(caught.value, RuntimeError)  # as DataLoader's
    text = str(caught.value)
    assert str(producers[0]) in text and "signal 9" in text
    assert "on_producer_death=" in text
    assert_user_terms(text)
    assert loader.closed


def test_respawn_limit_is_said_with_its_values(tmp_path_factory):
    """max_respawns=0: a killed producer ends the run saying so, with the
    keyword's value (it said "the most max_respawns= allows
    (respawn_window_s=; 0 in the run)", keywords without values)."""
    root = dataset(tmp_path_factory)
    loader = ringfeed.Loader(root, 8, size=32, num_workers=2, epochs=3,
                             max_respawns=0)
    batches = loader.batches()
    next(batches)
    os.kill(producers_of(os.getpid())[0], signal.SIGKILL)
    with pytest.raises(ringfeed.ProducerDied,
                       match=r"max_respawns=0 replaces none: raise it"):
        for _ in batches:
            pass
    assert loader.closed


def test_killed_producer_is_replaced_under_respawn(tmp_path_factory):
    """The default, on_producer_death="respawn": the epoch completes, and
    on_message hears of the replacement."""
    root = dataset(tmp_path_factory)
    messages = []
    with ringfeed.Loader(root, 8, size=32, num_workers=2,
                         on_message=messages.append) as loader:
        batches = loader.batches()
        seen = next(batches).indices.tolist()
        os.kill(producers_of(os.getpid())[0], signal.SIGKILL)
        for batch in batches:
            seen += batch.indices.tolist()
        assert sorted(seen) == list(range(160))
        assert loader.stats()["respawns"] == 1
    assert messages and all("RF_" not in m for m in messages)


def test_a_long_wait_names_the_file_in_hand(tmp_path):
    """A loop left waiting (here: its one producer stopped, as a read from
    a hung file system would leave it) hears, through on_message and in
    keyword terms, which producer holds the batch up and the file it is
    on. The producer is stopped while the loop runs, until it is caught
    in the middle of a sample (large images: nearly always)."""
    import threading
    import time
    root = str(tmp_path)
    files = set(write_folder(root, 2, 6, sides=(500, 700)))

    def stop_for_a_while(pid, delay):
        time.sleep(delay)
        os.kill(pid, signal.SIGSTOP)
        time.sleep(0.6)
        os.kill(pid, signal.SIGCONT)

    for attempt in range(10):
        messages = []
        with ringfeed.Loader(root, 4, size=64, num_workers=1, epochs=20,
                             dct_scaling=False, stall_warning_ms=200,
                             on_message=messages.append) as loader:
            batches = loader.batches()
            next(batches)
            pid = producers_of(os.getpid())[0]
            stopper = threading.Thread(target=stop_for_a_while,
                                       args=(pid, 0.05 + 0.01 * attempt))
            stopper.start()
            assert sum(1 for _ in batches) == len(loader) - 1
            stopper.join()
        assert messages, "a 0.6 s wait was not reported"
        assert all("RF_" not in m for m in messages), messages
        first = messages[0]
        # ", stopped" where the report came while it was stopped
        assert f"producer 0 (pid {pid}" in first, first
        assert "batch_timeout_ms=" in first and "stall_warning_ms=" in first
        assert any(f"(pid {pid}, stopped)" in m and "sent SIGCONT" in m
                   for m in messages), messages
        if " is on sample " in first:
            named = first.split(" is on sample ")[1].split(" (", 1)[1]
            assert named.split(") and ")[0] in files, first
            return
    pytest.fail(f"never caught on a sample: {messages}")


def test_fork_mode_refused_in_user_terms(tmp_path_factory):
    """start_mode="fork" in a process with a second thread is refused (a
    child of fork() could inherit a held lock); the message says what to
    pass instead as a keyword, not as a C constant."""
    import threading
    root = dataset(tmp_path_factory, "tiny")
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        with pytest.raises(ringfeed.RingfeedError) as caught:
            ringfeed.Loader(root, 4, size=16, start_mode="fork")
    finally:
        stop.set()
        thread.join()
    text = str(caught.value)
    assert "thread" in text
    assert "start_mode=" in text
    assert_user_terms(text)


def test_cuda_without_a_gpu_fails_at_construction(tmp_path_factory):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 8, size=32, device="cuda")
    assert "device=" in str(caught.value)
    with pytest.raises(ringfeed.ConfigError):
        ringfeed.Loader(root, 8, size=32, device="cpu")


@pytest.mark.parametrize("device", ["gpu", "cuda:x", 3.5])
def test_a_device_that_is_no_device_is_a_config_error(tmp_path_factory,
                                                      device):
    """What torch.device() refuses is a ConfigError naming device=, with
    or without a GPU."""
    pytest.importorskip("torch")
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 8, size=32, device=device)
    assert "device=" in str(caught.value)


def test_half_a_launcher_pair_is_a_config_error(tmp_path_factory,
                                                monkeypatch):
    """RANK without WORLD_SIZE: a ConfigError (so a RingfeedError) that
    names both variables and the keywords that settle it."""
    root = dataset(tmp_path_factory, "tiny")
    for name in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                 "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("RANK", "1")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16)
    text = str(caught.value)
    assert "WORLD_SIZE" in text and "world_size=" in text


def test_a_loop_ended_by_a_later_one_raises_if_resumed(tmp_path_factory):
    """A loop paused in this thread (an iterator kept after a peek) is
    ended by the next loop, which runs whole; the first, resumed, raises
    instead of splitting the batches with it. A loop nested in another's
    body is such a later loop: the outer one raises when it goes on."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 4, size=16, num_workers=1) as loader:
        first = iter(loader)
        next(first)
        assert sum(1 for _ in loader) == len(loader)
        with pytest.raises(ringfeed.RingfeedError,
                           match="ended by a later loop over it") as caught:
            next(first)
        assert "open a second Loader" in str(caught.value)
        with pytest.raises(ringfeed.RingfeedError,
                           match=r"iter\(\)\), called in this loop's body"):
            for _ in loader:
                assert sum(1 for _ in loader) == len(loader)
        assert sum(1 for _ in loader) == len(loader)  # still usable


def second_loop_while_first_restarts(loader, held_restart, first_loop):
    """Starts first_loop() in a thread with loader._restart_if_elsewhere
    replaced by held_restart(inside, go_on) (which sets `inside`, then
    waits for `go_on`), and starts a second loop in this thread while the
    first is held there; the second must raise "one loop at a time".
    first_loop(second_done) should hold its first batch until
    second_done is set. Returns the first thread, joined."""
    inside, go_on = threading.Event(), threading.Event()
    second_done = threading.Event()
    restart = loader._restart_if_elsewhere
    loader._restart_if_elsewhere = lambda: held_restart(inside, go_on)
    first = threading.Thread(target=first_loop, args=(second_done,))
    first.start()
    assert inside.wait(timeout=30)
    loader._restart_if_elsewhere = restart
    threading.Timer(0.5, go_on.set).start()
    try:
        with pytest.raises(ringfeed.RingfeedError,
                           match="one loop at a time"):
            next(iter(loader))
    finally:
        second_done.set()
        first.join(timeout=60)
    return first


def test_one_loop_at_a_time_across_threads(tmp_path_factory):
    """Two threads starting loops at once: the second raises, however the
    two interleave. The first thread is held where a loop starts its
    producers again (the step between the check and the loop's start,
    where another thread ran past the check too and both loops split the
    epoch between them)."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 4, size=16, num_workers=1) as loader:
        restart = loader._restart_if_elsewhere
        counted = []

        def held_restart(inside, go_on):
            inside.set()
            go_on.wait(timeout=30)
            restart()

        def first_loop(second_done):
            n = 0
            for _ in loader:  # holds its first batch until the second ends
                n += 1
                second_done.wait(timeout=30)
            counted.append(n)

        second_loop_while_first_restarts(loader, held_restart, first_loop)
        assert counted == [len(loader)]


def test_a_second_loop_opens_nothing_while_the_first_restarts(
        tmp_path_factory):
    """A loop started while another thread's loop restarts its producers
    waits for that restart, then raises: it opens no producers of its own
    (it looked for the run outside the lock, found none between the first
    loop's close and open, and opened one that the first loop's open then
    closed, or took over)."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 4, size=16, num_workers=1) as loader:
        open_run = loader._open_run
        opened_by = []

        def recorded_open():
            opened_by.append(threading.get_ident())
            return open_run()

        def held_restart(inside, go_on):  # between the close and the open
            loader._close_run()
            inside.set()
            go_on.wait(timeout=30)
            loader._open_run()

        def first_loop(second_done):
            for _ in loader:  # holds its first batch until the second ends
                second_done.wait(timeout=30)
                break

        loader._open_run = recorded_open
        first = second_loop_while_first_restarts(loader, held_restart,
                                                 first_loop)
        assert opened_by == [first.ident]


@pytest.mark.parametrize("kwargs, keyword", [
    (dict(size="224"), "size="),
    (dict(size=[64]), "size="),
    (dict(size=(1, 2, 3)), "size="),
    (dict(size=32.0), "size="),
    (dict(epochs=2.5), "epochs="),
    (dict(epochs="3"), "epochs="),
    (dict(keep_batches=2.0), "keep_batches="),
    (dict(on_message="log"), "on_message="),
    (dict(rank=-1, world_size=2), "rank"),
    (dict(rank=2, world_size=2), "rank"),
    (dict(rank=0, world_size=0), "world_size"),
    (dict(world_size=2), "rank="),
    (dict(rank=1), "world_size="),
    (dict(rank=True, world_size=2), "rank="),
    (dict(num_workers=-1), "num_workers="),
], ids=lambda v: repr(v) if not isinstance(v, dict) else
    ",".join(f"{k}={w!r}" for k, w in v.items()))
def test_arguments_of_the_wrong_kind_name_the_keyword(tmp_path_factory,
                                                      monkeypatch, kwargs,
                                                      keyword):
    """A value of the wrong type or a rank outside its world is a
    ConfigError naming the keyword, at construction; never a raw
    unpacking, ctypes or comparison error."""
    for name in ("RANK", "WORLD_SIZE", "OMPI_COMM_WORLD_RANK",
                 "OMPI_COMM_WORLD_SIZE", "PMI_RANK", "PMI_SIZE",
                 "SLURM_PROCID", "SLURM_NTASKS"):
        monkeypatch.delenv(name, raising=False)
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 8, **kwargs)
    assert keyword in str(caught.value)
    assert_user_terms(str(caught.value))


def test_numpy_whole_numbers_are_taken(tmp_path_factory):
    np = pytest.importorskip("numpy")
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 8, size=np.int64(16), epochs=np.int32(1),
                         keep_batches=np.int64(1)) as loader:
        assert sum(len(labels) for _, labels in loader) == 30


def test_a_loader_is_not_pickled_or_copied(tmp_path_factory):
    import copy
    import pickle
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 8, size=16) as loader:
        for attempt in (pickle.dumps, copy.copy, copy.deepcopy):
            with pytest.raises(TypeError) as caught:
                attempt(loader)
            assert "Loader" in str(caught.value)
        assert sum(len(labels) for _, labels in loader) == 30


def test_an_on_message_that_raises_stops_the_loop(tmp_path_factory):
    """What on_message raises (here at a producer's respawn) comes out of
    the loop instead of being printed and dropped by ctypes."""
    root = dataset(tmp_path_factory)

    class Stop(Exception):
        pass

    def on_message(text):
        raise Stop(text)

    with ringfeed.Loader(root, 8, size=32, num_workers=2,
                         on_message=on_message) as loader:
        batches = loader.batches()
        next(batches)
        os.kill(producers_of(os.getpid())[0], signal.SIGKILL)
        with pytest.raises(Stop):
            for _ in batches:
                pass


def test_a_loader_inside_a_dataloader_says_what_to_do(tmp_path_factory):
    torch = pytest.importorskip("torch")
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 8, size=16) as loader:
        wrapped = torch.utils.data.DataLoader(loader, batch_size=None)
        with pytest.raises(TypeError) as caught:
            next(iter(wrapped))
        assert "in place of the DataLoader" in str(caught.value)
        assert sum(len(labels) for _, labels in loader) == 30


@pytest.fixture(scope="module")
def raw_pack(tmp_path_factory):
    """A pack of raw 32x32x3 samples (ringfeed-pack --raw, layout nhwc)
    of a folder of 2 classes of 4 images."""
    tools = os.environ.get("RINGFEED_TOOLS")
    pack = os.path.join(tools or "", "ringfeed-pack")
    if not tools or not os.access(pack, os.X_OK):
        pytest.skip("set RINGFEED_TOOLS to the build's tools (ringfeed-pack)")
    root = str(tmp_path_factory.mktemp("raw"))
    write_folder(os.path.join(root, "source"), 2, 4, seed=31)
    path = os.path.join(root, "raw.pack")
    subprocess.run([pack, os.path.join(root, "source"), path, "--raw",
                    "32x32", "--quiet"], check=True, capture_output=True)
    return path


def test_raw_pack_shape_names_each_keyword(raw_pack):
    """A raw pack read with the Loader's default layout (nchw; packs are
    nhwc): the message names every keyword to set, with its value, never a
    C name (it used to say "set size=, WIDTH, CHANNELS and LAYOUT")."""
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(raw_pack, 4, size=32)
    text = str(caught.value)
    assert_user_terms(text)
    for c_name in ("WIDTH", "CHANNELS", "LAYOUT"):
        assert c_name not in text, text
    assert "set size=32, channels=3 and layout='nhwc' to match" in text, text
    assert f"the packed file '{raw_pack}' holds" in text, text


def test_raw_pack_under_a_transform_is_said(raw_pack, caplog):
    """transform='train' (the default) does nothing to a pack's raw
    samples: a warning at construction says so, naming transform='none',
    which silences it."""
    with caplog.at_level(logging.WARNING, logger="ringfeed"):
        with ringfeed.Loader(raw_pack, 4, size=32, layout="nhwc") as loader:
            assert sum(len(labels) for _, labels in loader) == 8
    said = [r.getMessage() for r in caplog.records
            if r.name == "ringfeed" and "raw pixels" in r.getMessage()]
    assert len(said) == 1, said
    assert "all 8 samples of " in said[0]
    assert "no crop, resize or flip" in said[0]
    assert "flip=" in said[0]
    assert "set transform='none' to say so" in said[0]
    assert_user_terms(said[0])
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="ringfeed"):
        ringfeed.Loader(raw_pack, 4, size=32, layout="nhwc",
                        transform="none").close()
    assert not [r for r in caplog.records if "raw pixels" in r.getMessage()]


def test_no_batch_left_advises_what_would_leave_one(tmp_path_factory,
                                                    monkeypatch):
    """30 samples over 2 ranks are 15 each, fewer than a batch of 16 that
    drop_last drops: the message names the keywords with their values,
    and shard_pad=True only where it is not set and would give each rank
    a batch (it used to advise it even when set, the default)."""
    for name in ("RANK", "WORLD_SIZE"):
        monkeypatch.delenv(name, raising=False)
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 16, size=16, rank=0, world_size=2,
                        drop_last=True)
    text = str(caught.value)
    assert_user_terms(text)
    assert ("30 samples over 2 ranks (15 each) with batch size 16 and "
            "drop_last=True leave no batch; set batch_size=15 (or less) or "
            "drop_last=False") in text, text
    assert "shard_pad" not in text
    odd = dataset(tmp_path_factory, "odd")  # 33: 16 each, 17 padded
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(odd, 17, size=16, rank=0, world_size=2,
                        drop_last=True, shard_pad=False)
    text = str(caught.value)
    assert_user_terms(text)
    assert ("set batch_size=16 (or less), drop_last=False or "
            "shard_pad=True (17 each)") in text, text


def test_library_names_of_renamed_keywords_point_at_them(tmp_path_factory):
    """producers= (the library's name) names num_workers=, and
    num_workers= out of range gives the Loader's range, not the library's
    (whose 0 the Loader refuses)."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(TypeError, match="is the Loader's num_workers="):
        ringfeed.Loader(root, 8, producers=3)
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 8, num_workers=5000)
    assert "1..1024, or None" in str(caught.value)


def test_what_the_open_says_is_said_once_per_loader(tmp_path_factory,
                                                   monkeypatch, caplog):
    """A local rank without its size (LOCAL_RANK alone, as some launchers
    set it) is said at the library's open; restarts of the producers
    (set_epoch() to another epoch, load_state_dict()) open again, and it
    was said each time. A second Loader says it again."""
    root = dataset(tmp_path_factory, "tiny")
    monkeypatch.setenv("LOCAL_RANK", "1")
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)

    def local_rank_messages():
        return [r for r in caplog.records
                if "LOCAL_WORLD_SIZE" in r.getMessage()]

    with caplog.at_level(logging.WARNING, logger="ringfeed"):
        with ringfeed.Loader(root, 8, size=32, num_workers=1) as loader:
            state = loader.state_dict()
            for epoch in (3, 1, 2):
                loader.set_epoch(epoch)
                assert sum(len(labels) for _, labels in loader) == 30
            loader.load_state_dict(state)
            assert sum(len(labels) for _, labels in loader) == 30
        assert len(local_rank_messages()) == 1
        ringfeed.Loader(root, 8, size=32, num_workers=1).close()
        assert len(local_rank_messages()) == 2


def test_a_pack_damaged_as_a_whole_names_the_file(raw_pack, tmp_path):
    """A packed file cut short (its header or index damaged): no sample is
    at fault, so .index and .name are None, but .path is the pack (it was
    None) and .reason the reason alone, and the message names the file
    once (it named it twice)."""
    import shutil
    cut = str(tmp_path / "cut.pack")
    shutil.copyfile(raw_pack, cut)
    os.truncate(cut, os.path.getsize(cut) - 1)
    with pytest.raises(ringfeed.CorruptSample) as caught:
        ringfeed.Loader(cut, 2, size=32, layout="nhwc", transform="none")
    e = caught.value
    assert (e.index, e.name, e.path) == (None, None, cut)
    assert e.reason.startswith("its header's file_size is "), e.reason
    assert str(e).count(cut) == 1, str(e)


def test_channels_images_cannot_have_says_what_to_set(tmp_path_factory):
    """channels=4 on a folder of images: the message names the images of
    every format (it said "JPEG samples" of a PNG folder too) and the
    values to set (it ended in a bare "set channels=")."""
    root = dataset(tmp_path_factory, "tiny")
    with pytest.raises(ringfeed.ConfigError) as caught:
        ringfeed.Loader(root, 4, size=16, channels=4)
    text = str(caught.value)
    assert "images (JPEG, PNG, WebP) decode to 1 or 3 channels, not 4; " \
        "set channels=1 or 3" in text, text
    assert_user_terms(text)


def test_dataloader_attributes_say_what_stands_for_them(tmp_path_factory):
    """Code moved from a DataLoader reads its attributes: batch_size and
    drop_last are there; dataset, sampler and the like raise an
    AttributeError saying what stands for them (it was a bare "no
    attribute"), and other names the usual one. A Batch indexes as the
    (images, labels) pair it unpacks to."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 8, size=16, drop_last=True) as loader:
        assert (loader.batch_size, loader.drop_last) == (8, True)
        with pytest.raises(AttributeError,
                           match="samples_in_dataset"):
            len(loader.dataset)
        with pytest.raises(AttributeError, match="set_epoch"):
            loader.sampler
        with pytest.raises(AttributeError,
                           match="^'Loader' object has no attribute 'nope'$"):
            loader.nope
        assert not hasattr(loader, "pin_memory")
        batch = next(loader.batches())
        images, labels = batch
        assert batch[0] is images and batch[1] is labels


