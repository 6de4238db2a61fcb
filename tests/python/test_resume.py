"""state_dict() mid-epoch, then load_state_dict() in a new Loader with the
same arguments: the new loader yields exactly the batches the
uninterrupted run yields from there on (pixels, labels, indices), with
shuffle and the train transform's random crops and flips, across epoch
boundaries, and under the usual set_epoch() loop."""

from __future__ import annotations

import contextlib
import glob
import io
import os
import shutil
import threading

import pytest

import ringfeed
from helpers import (as_numpy, assert_same_batches, collect, dataset,
                     write_folder)

torch = pytest.importorskip("torch")

ARGS = dict(size=32, shuffle=True, transform="train", seed=1234,
            num_workers=2)
BATCH = 12  # 160 samples: 14 batches, the last of 4


def make(root, **changes):
    return ringfeed.Loader(root, changes.pop("batch_size", BATCH),
                           **dict(ARGS, **changes))


def uninterrupted(root, epochs):
    """The batches of `epochs` epochs, one for loop each."""
    with make(root) as loader:
        return [b for _ in range(epochs) for b in collect(loader)]


def partial_state(root, k, **changes):
    """The state after the first k batches of a run (one ``for`` per
    epoch), taken inside the loop as a training step would."""
    with make(root, **changes) as loader:
        taken = 0
        while True:
            for _ in loader.batches():
                taken += 1
                if taken == k:
                    return loader.state_dict()


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    root = dataset(tmp_path_factory)
    return root, uninterrupted(root, 3)


@pytest.mark.parametrize("k", [1, 5, 13, 14, 20])
def test_resume_gives_the_remaining_batches(reference, k):
    """k = 14 is the end of epoch 0, k = 20 is in epoch 1."""
    root, want = reference
    per_epoch = 14
    state = partial_state(root, k)
    assert (state["epoch"], state["batch"]) == divmod(k, per_epoch)
    with make(root) as loader:
        loader.load_state_dict(state)
        got = []
        while len(got) < len(want) - k:
            got += collect(loader)
    assert_same_batches(got, want[k:])


def test_resume_across_the_epoch_boundary_with_epochs(reference):
    """epochs=3: one for loop runs all three; resumed mid epoch 0, the
    loop goes on through epochs 1 and 2 as the whole run would."""
    root, want = reference
    with make(root, epochs=3) as loader:
        assert len(loader) == 42
        whole = collect(loader)
    assert_same_batches(whole, want)
    with make(root, epochs=3) as loader:
        for i, _ in enumerate(loader.batches()):
            if i == 8:
                state = loader.state_dict()
                break
    with make(root, epochs=3) as loader:
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[9:])


def test_set_epoch_loop_does_not_restart_the_epoch(reference):
    """``for epoch in range(start, n): loader.set_epoch(epoch)`` after a
    mid-epoch resume goes on where the checkpoint was."""
    root, want = reference
    state = partial_state(root, 17)  # epoch 1, batch 3
    with make(root) as loader:
        loader.load_state_dict(state)
        got = []
        for epoch in range(state["epoch"], 3):
            loader.set_epoch(epoch)
            got += collect(loader)
    assert_same_batches(got, want[17:])


def test_set_epoch_to_another_epoch_starts_it(reference):
    root, want = reference
    with make(root) as loader:
        loader.set_epoch(2)
        assert_same_batches(collect(loader), want[28:42])
        loader.set_epoch(1)
        assert_same_batches(collect(loader), want[14:28])


def test_set_epoch_inside_a_loop_applies_when_it_ends(reference):
    """set_epoch() during a loop (as a per-epoch hook may call it) leaves
    that loop's batches and a checkpoint taken in it alone, and sets the
    epoch the next loop runs, whether the loop ends or is left."""
    root, want = reference
    with make(root) as loader:
        seen = []
        for batch in loader.batches():
            seen.append((batch.epoch, batch.number))
            if batch.number == 3:
                loader.set_epoch(2)
                state = loader.state_dict()
                assert (state["epoch"], state["batch"]) == (0, 4)
        assert seen == [(0, n) for n in range(14)]
        after = loader.state_dict()
        assert (after["epoch"], after["batch"]) == (2, 0)
        assert_same_batches(collect(loader), want[28:42])
    with make(root) as loader:  # the checkpoint taken in the loop
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[4:14])
    with make(root) as loader:  # a loop left right after set_epoch()
        for _ in loader.batches():
            loader.set_epoch(2)
            break
        assert_same_batches(collect(loader), want[28:42])


def test_load_state_dict_inside_a_loop_ends_it(reference):
    """load_state_dict() in a loop's body (a trainer reloading its last
    checkpoint): the loop raises at its next batch, saying what ended it,
    instead of going on from where it was; the next loop resumes at the
    state loaded."""
    root, want = reference
    state = partial_state(root, 5)
    with make(root) as loader:
        with pytest.raises(ringfeed.RingfeedError,
                           match=r"ended by load_state_dict\(\), called in "
                                 r"this loop's body"):
            for _ in loader.batches():
                loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[5:14])


@pytest.mark.parametrize("epoch", [True, -1, 2 ** 30 + 1, 1.0, "1"])
def test_set_epoch_refuses_what_is_not_an_epoch(reference, epoch):
    """A ConfigError naming set_epoch at the call, not a C range error at
    the next loop or a state_dict() that load_state_dict() refuses."""
    root, _ = reference
    with make(root) as loader:
        with pytest.raises(ringfeed.ConfigError, match="set_epoch"):
            loader.set_epoch(epoch)
        assert loader.state_dict()["epoch"] == 0


def test_set_epoch_takes_numpy_integers_and_refuses_after_close(reference):
    np = pytest.importorskip("numpy")
    root, want = reference
    loader = make(root)
    loader.set_epoch(np.int64(1))
    assert type(loader.state_dict()["epoch"]) is int
    assert_same_batches(collect(loader), want[14:28])
    loader.close()
    with pytest.raises(ringfeed.LoaderClosed) as closed:
        loader.set_epoch(2)
    assert isinstance(closed.value, ValueError)  # as a closed file's use
    assert loader.state_dict()["epoch"] == 2
    for wrong in ("2", 1.0):  # a wrong type, as the constructor says it
        with pytest.raises(ringfeed.ConfigTypeError, match="set_epoch"):
            loader.set_epoch(wrong)


def test_load_state_dict_by_the_protocols_keyword(reference):
    """load_state_dict(state_dict=...), torchdata's and nn.Module's name
    for it (it was `state`), and a state whose numbers came back as numpy
    integers (a round trip through numpy or a tensor's .tolist())."""
    np = pytest.importorskip("numpy")
    root, want = reference
    state = partial_state(root, 6)
    numpyish = dict(state, epoch=np.int64(state["epoch"]),
                    batch=np.int64(state["batch"]))
    with make(root) as loader:
        loader.load_state_dict(state_dict=numpyish)
        assert_same_batches(collect(loader), want[6:14])


def test_state_round_trips_through_torch_save(reference):
    root, want = reference
    state = partial_state(root, 6)
    buffer = io.BytesIO()
    torch.save({"loader": state}, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)["loader"]
    assert loaded == state
    with make(root) as loader:
        loader.load_state_dict(loaded)
        assert_same_batches(collect(loader), want[6:14])


def test_resume_keeps_the_crops(reference):
    """The train transform is random: another seed gives other pixels, so
    byte equality above means the crops were resumed, not re-drawn."""
    import numpy as np
    root, want = reference
    with make(root, seed=99) as loader:
        other = collect(loader, 3)
    assert not all(np.array_equal(o[2], w[2]) for o, w in zip(other, want))


@pytest.mark.parametrize("keyword, value", [("seed", 5),
                                            ("batch_size", 10),
                                            ("shuffle", False),
                                            ("drop_last", True)])
def test_mismatched_checkpoint_names_the_keyword(reference, keyword, value):
    root, _ = reference
    state = partial_state(root, 3)
    with make(root, **{keyword: value}) as loader:
        with pytest.raises(ringfeed.ConfigError) as caught:
            loader.load_state_dict(state)
    assert f"{keyword}=" in str(caught.value)
    assert "RF_PARAM_" not in str(caught.value)


def test_checkpoint_of_another_world_size(reference):
    root, _ = reference
    state = partial_state(root, 2)
    with make(root, rank=0, world_size=2) as loader:
        with pytest.raises(ringfeed.ConfigError) as caught:
            loader.load_state_dict(state)
    assert "world_size=" in str(caught.value)


def test_not_a_state(reference):
    root, _ = reference
    with make(root) as loader:
        with pytest.raises(ringfeed.ConfigError):
            loader.load_state_dict({"epoch": 1})


@pytest.mark.parametrize("damage", [
    dict(batch=-1), dict(batch=14), dict(batch=2.5), dict(batch=True),
    dict(epoch=-1), dict(epoch=2 ** 30 + 1), dict(epoch=2 ** 70),
    dict(epoch="1"), dict(seed=None), dict(batches_per_epoch=None),
    dict(world_size=0),
], ids=lambda d: ",".join(f"{k}={v!r}" for k, v in d.items()))
def test_a_damaged_checkpoint_is_refused_at_load(reference, damage):
    """A position out of range, of the wrong type, or an entry missing
    (None here: removed) is a ConfigError from load_state_dict() itself,
    naming the entry, not a C range error at the next loop."""
    root, _ = reference
    state = partial_state(root, 5)
    for key, value in damage.items():
        if value is None:
            del state[key]
        else:
            state[key] = value
    with make(root) as loader:
        with pytest.raises(ringfeed.ConfigError) as caught:
            loader.load_state_dict(state)
        text = str(caught.value)
        assert repr(next(iter(damage))) in text
        assert "start_" not in text and "RF_" not in text


def test_size_as_a_tuple_matches(reference):
    """torch.save keeps a tuple a tuple: size (32, 32) is size [32, 32]."""
    root, want = reference
    state = partial_state(root, 5)
    state["size"] = tuple(state["size"])
    with make(root) as loader:
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[5:14])


def test_loop_left_early(reference):
    """As torch's (Stateful)DataLoader: after a ``break`` the state still
    records the position (a checkpoint taken after the loop resumes the
    rest of the epoch), while the next ``for`` starts the next epoch."""
    root, want = reference
    per_epoch = 14
    with make(root) as loader:
        for k, _ in enumerate(loader.batches(), 1):
            if k == 5:
                break
        state = loader.state_dict()
        assert (state["epoch"], state["batch"]) == (0, 5)
        assert_same_batches(collect(loader), want[per_epoch:2 * per_epoch])
    with make(root) as loader:
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[5:per_epoch])


def test_rank_zeros_checkpoint_resumes_every_rank(reference):
    """The usual DDP checkpoint is written by rank 0 only: its state must
    resume rank 1 at the same position, in rank 1's own shard."""
    root, _ = reference
    with make(root, rank=1, world_size=2) as loader:
        want = collect(loader)  # rank 1's epoch 0
    state = partial_state(root, 3, rank=0, world_size=2)
    with make(root, rank=1, world_size=2) as loader:
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[3:])


def test_other_world_size_when_not_strict(reference):
    """strict=False takes a checkpoint of another world size, starting at
    the batch where as many samples of the epoch were consumed (5 batches
    on 1 rank = 2 batches on 2 ranks, rounded down), with a warning."""
    root, _ = reference
    state = partial_state(root, 5)
    with make(root, rank=0, world_size=2) as loader:
        with pytest.warns(RuntimeWarning, match="may repeat"):
            loader.load_state_dict(state, strict=False)
        got = collect(loader)
        assert (got[0][0], got[0][1]) == (0, 2)


def test_state_dict_after_close(reference):
    """A closed loader (Ctrl-C in its wait closes it) still says where it
    was, so the checkpoint can be written on the way out."""
    root, want = reference
    loader = make(root)
    for k, _ in enumerate(loader.batches(), 1):
        if k == 4:
            break
    loader.close()
    state = loader.state_dict()
    assert (state["epoch"], state["batch"]) == (0, 4)
    with make(root) as loader:
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[4:14])


def test_checkpoint_of_other_files_is_refused(tmp_path_factory):
    """A checkpoint keeps which samples the folder held (the library's
    listing digest), not only how many: a file swapped for another, or a
    class folder renamed, with the count unchanged, put other samples at
    its positions and resumed without a word; now a ConfigError says so.
    A file added says how many the folder holds now."""
    root = str(tmp_path_factory.mktemp("changing"))
    write_folder(root, 3, 6, seed=9)
    state = partial_state(root, 1, batch_size=4)
    with make(root, batch_size=4) as loader:  # the same files: resumes
        loader.load_state_dict(state)
    swapped = os.path.join(root, "class_01", "img_0002.jpg")
    os.rename(swapped, swapped + ".away")
    shutil.copy(os.path.join(root, "class_02", "img_0000.jpg"),
                os.path.join(root, "class_02", "zz_new.jpg"))
    renamed = (os.path.join(root, "class_00"), os.path.join(root, "class_99"))
    try:
        for changed in ("a file swapped", "a class folder renamed"):
            if changed == "a class folder renamed":
                os.remove(os.path.join(root, "class_02", "zz_new.jpg"))
                os.rename(swapped + ".away", swapped)
                os.rename(*renamed)
            with make(root, batch_size=4) as loader:
                assert loader.stats()["samples_in_dataset"] == 18
                with pytest.raises(ringfeed.ConfigError) as caught:
                    loader.load_state_dict(state)
                assert "other samples than source= holds now" in \
                    str(caught.value), changed
        os.rename(renamed[1], renamed[0])
        shutil.copy(swapped, swapped + ".jpg")  # one more file
        with make(root, batch_size=4) as loader:
            with pytest.raises(ringfeed.ConfigError) as caught:
                loader.load_state_dict(state)
        assert "made on 18 samples and source= now holds 19" in \
            str(caught.value)
    finally:
        if os.path.exists(renamed[1]):
            os.rename(renamed[1], renamed[0])


def test_checkpoint_of_another_kind_of_source_is_refused(tmp_path_factory):
    """A folder's checkpoint into a Synthetic source of as many samples,
    and the reverse: refused, saying which is which (a synthetic source's
    listing digest is 0, and only the count was compared)."""
    root = str(tmp_path_factory.mktemp("kind"))
    write_folder(root, 3, 6, seed=9)
    folder_state = partial_state(root, 1, batch_size=4)
    synthetic = ringfeed.Synthetic(18, 3)
    synthetic_state = partial_state(synthetic, 1, batch_size=4)
    for state, source, says in (
            (folder_state, synthetic, "made on a dataset on disk and "
                                      "source= is a Synthetic source"),
            (synthetic_state, root, "made on a Synthetic source and "
                                    "source= is a dataset on disk")):
        with make(source, batch_size=4) as loader:
            with pytest.raises(ringfeed.ConfigError, match=says):
                loader.load_state_dict(state)


def test_checkpoint_without_a_listing_still_loads(reference):
    """A checkpoint from before the listing digest was kept resumes on
    the sample count alone."""
    root, want = reference
    state = partial_state(root, 5)
    assert state["listing"] != 0
    del state["listing"]
    with make(root) as loader:
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[5:14])


@pytest.mark.parametrize("saved_at", [13, 14])
def test_trainer_counting_its_own_epochs_resumes_exactly(reference, saved_at):
    """A trainer that saves its own epoch beside the loader's state at the
    epoch's last step (14th of 14), then resumes with
    ``for epoch in range(saved, n): loader.set_epoch(epoch)``: the finished
    epoch yields nothing and the next follows, as for a checkpoint one step
    earlier (it ran the whole finished epoch again)."""
    root, want = reference
    with make(root) as loader:
        loader.set_epoch(0)
        for step, _ in enumerate(loader.batches(), 1):
            if step == saved_at:
                checkpoint = {"epoch": 0, "loader": loader.state_dict()}
                break
    with make(root) as loader:
        loader.load_state_dict(checkpoint["loader"])
        got = []
        for epoch in range(checkpoint["epoch"], 2):
            loader.set_epoch(epoch)
            got += collect(loader)
    assert_same_batches(got, want[saved_at:28])


@pytest.mark.parametrize("kept", [False, True], ids=["dropped", "kept"])
def test_a_peeked_batch_then_set_epoch_runs_the_whole_epoch(reference,
                                                             kept):
    """``next(iter(loader))`` to look at a batch, then the usual
    set_epoch() loop: epoch 0 is whole, as with a DataLoader (it went on
    after the peeked batch, one batch short). Also with the iterator kept
    (PyTorch's tutorials: ``dataiter = iter(loader); images, labels =
    next(dataiter)``): the loop that follows ends it (it was refused,
    "already being iterated")."""
    root, want = reference
    with make(root) as loader:
        dataiter = iter(loader)
        images, _ = next(dataiter)
        if not kept:
            del dataiter
        assert images.shape[0] == BATCH
        got = []
        for epoch in range(2):
            loader.set_epoch(epoch)
            got += collect(loader)
    assert_same_batches(got, want[:28])


def test_a_loop_kept_by_a_traceback_does_not_block_the_next(reference):
    """An exception in the step, kept with its traceback (a notebook's
    sys.last_traceback, a logger, a retry wrapper), keeps the loop's
    generator paused: the next loop runs the next epoch, as after a
    break, batch for batch what an uninterrupted run yields there."""
    root, want = reference
    kept = []
    with make(root) as loader:
        try:
            for step, _ in enumerate(loader):
                if step == 3:
                    raise ValueError("a bug in the step")
        except ValueError as error:
            kept.append(error)  # its traceback holds the loop
        assert_same_batches(collect(loader), want[14:28])
    assert kept


@contextlib.contextmanager
def looping_in_a_thread(batches, seen):
    """Runs ``for batch in batches`` in a thread, each batch appended to
    `seen`, the thread held at its first batch (its loop open, paused)
    until the with block ends."""
    in_loop, done = threading.Event(), threading.Event()

    def loop():
        for batch in batches:
            seen.append(batch)
            in_loop.set()
            done.wait(timeout=30)

    thread = threading.Thread(target=loop)
    thread.start()
    assert in_loop.wait(timeout=30)
    try:
        yield
    finally:
        done.set()
        thread.join(timeout=60)


def test_load_state_dict_ends_a_paused_loop(reference):
    """load_state_dict() with a loop paused in this thread (its iterator
    kept, or a notebook's traceback holding it): the loop ends, raising
    if resumed, and the next loop resumes exactly; with a loop running in
    another thread it is refused, and that loop goes on."""
    root, want = reference
    state = partial_state(root, 5)
    with make(root) as loader:
        paused = iter(loader)
        next(paused)
        loader.load_state_dict(state)
        assert_same_batches(collect(loader), want[5:14])
        with pytest.raises(ringfeed.RingfeedError,
                           match=r"ended by load_state_dict\(\)"):
            next(paused)
    with make(root) as loader:
        counted = []
        with looping_in_a_thread(loader, counted):
            with pytest.raises(ringfeed.RingfeedError,
                               match="while a loop over this Loader runs"):
                loader.load_state_dict(state)
        assert len(counted) == len(loader)


def record(batch):
    """A Batch as collect() records it."""
    return (batch.epoch, batch.number, as_numpy(batch.images),
            as_numpy(batch.labels), as_numpy(batch.indices))


def test_a_refused_checkpoint_leaves_a_paused_loop_alone(reference):
    """load_state_dict() of a checkpoint it refuses changes nothing: the
    paused loop goes on (it was ended before the checkpoint was read)."""
    root, want = reference
    state = dict(partial_state(root, 5), seed=ARGS["seed"] + 1)
    with make(root) as loader:
        paused = loader.batches()
        got = [record(next(paused))]
        with pytest.raises(ringfeed.ConfigError, match="seed"):
            loader.load_state_dict(state)
        got += [record(batch) for batch in paused]
    assert_same_batches(got, want[:14])


def test_a_loop_is_not_ended_from_inside_its_own_work(reference):
    """A loop that is taking or counting its batch is running, even when
    a signal handler or on_message calls in from there: a new loop or
    load_state_dict() from inside is refused and the loop goes on exactly
    (it was ended, then handed over a batch and wrote its old position
    back over the loaded one)."""
    root, want = reference
    state = partial_state(root, 2)
    with make(root) as loader:
        count = loader._at.yielded
        refused = []

        def count_and_call_in(sequence):
            count(sequence)
            for call in (lambda: next(iter(loader)),
                         lambda: loader.load_state_dict(state)):
                try:
                    call()
                except ringfeed.RingfeedError as error:
                    refused.append(str(error))

        loader._at.yielded = count_and_call_in
        got = collect(loader)
    assert_same_batches(got, want[:14])
    assert len(refused) == 2 * 14
    assert all("already being iterated" in r or
               "while a loop over this Loader runs" in r for r in refused)


def test_a_loop_handed_to_another_thread_is_not_ended(reference):
    """A loop peeked at here and then run by a worker thread belongs to
    the worker: a loop or load_state_dict() here is refused while it is
    open, and the worker's batches are the epoch's."""
    root, want = reference
    state = partial_state(root, 2)
    with make(root) as loader:
        loop = iter(loader)
        got = [next(loop)]
        with looping_in_a_thread(loop, got):
            with pytest.raises(ringfeed.RingfeedError,
                               match="while a loop over this Loader runs"):
                loader.load_state_dict(state)
            with pytest.raises(ringfeed.RingfeedError,
                               match="already being iterated"):
                next(iter(loader))
    assert len(got) == 14


def test_finished_epoch_set_twice_stays_finished(reference):
    """set_epoch() of the finished epoch twice (a trainer's hook and a
    framework's) after a checkpoint at its last batch: still nothing left
    (the second call ran the whole epoch again); with epochs=N, moving
    back runs from there."""
    root, want = reference
    state = partial_state(root, 14)
    with make(root) as loader:
        loader.load_state_dict(state)
        loader.set_epoch(0)
        loader.set_epoch(0)
        assert collect(loader) == []
        loader.set_epoch(1)
        assert_same_batches(collect(loader), want[14:28])
    with make(root, epochs=3) as loader:
        loader.load_state_dict(state)
        loader.set_epoch(0)
        assert_same_batches(collect(loader), want[:42])


def test_set_epoch_of_the_loop_s_own_epoch_then_break_keeps_the_place(
        reference):
    """A hook that calls set_epoch() with the running loop's epoch, then a
    break (preemption): state_dict() records the place reached (it said
    the epoch's start), and the next loop starts the next epoch, as after
    any break."""
    root, want = reference
    with make(root) as loader:
        for batch in loader.batches():
            loader.set_epoch(0)
            if batch.number == 1:
                break
        state = loader.state_dict()
        assert (state["epoch"], state["batch"]) == (0, 2)
        assert_same_batches(collect(loader), want[14:28])


@pytest.mark.parametrize("hooked", ["once", "every batch"])
def test_set_epoch_of_the_loop_s_own_epoch_then_its_end(reference, hooked):
    """The same hook in a loop that runs to its end: state_dict() records
    the next epoch's start (it recorded epoch 0's, and a checkpoint saved
    after the loop trained epoch 0 again), and the next loop runs epoch
    1. A hook naming another epoch still sets the next loop's."""
    root, want = reference
    with make(root) as loader:
        for batch in loader.batches():
            if hooked == "every batch" or batch.number == 0:
                loader.set_epoch(0)
        state = loader.state_dict()
        assert (state["epoch"], state["batch"]) == (1, 0)
        assert_same_batches(collect(loader), want[14:28])
        for batch in loader.batches():
            if batch.number == 0:
                loader.set_epoch(1)  # the running one: nothing to do
                loader.set_epoch(0)  # another: the next loop's
        assert loader.state_dict()["epoch"] == 0
        assert_same_batches(collect(loader), want[:14])


def test_a_restart_reads_the_first_listing(tmp_path):
    """A class folder added and a file removed while the Loader runs, then
    set_epoch() to another epoch (which starts the producers again): the
    run reads the samples the Loader listed when it was made, as
    torchvision's ImageFolder does. The new folder is not read, every
    label and loader.classes stay, and the removed file fails as its
    sample (skipped here, and said by its path). Listing the folder again
    put other samples under the same indices and labels."""
    np = pytest.importorskip("numpy")
    root = str(tmp_path / "data")
    write_folder(root, 2, 4, seed=2)
    said = []
    with ringfeed.Loader(root, 4, size=16, num_workers=1, transform="eval",
                         shuffle=False, on_error="skip",
                         max_error_ppm=1000000, on_message=said.append,
                         epochs=4) as loader:
        first = collect(loader)
        classes = loader.classes
        shutil.copytree(os.path.join(root, "class_00"),
                        os.path.join(root, "class_00a"))
        removed = sorted(glob.glob(os.path.join(root, "class_01", "*")))[1]
        os.remove(removed)
        loader.set_epoch(3)
        again = collect(loader)
        assert loader.classes == classes == ["class_00", "class_01"]
    want = {int(i): (int(label), image) for batch in first
            for image, label, i in zip(batch[2], batch[3], batch[4])}
    got = {int(i): (int(label), image) for batch in again
           for image, label, i in zip(batch[2], batch[3], batch[4])}
    assert sorted(got) == [0, 1, 2, 3, 4, 6, 7]
    for i, (label, image) in got.items():
        assert label == want[i][0] and np.array_equal(image, want[i][1]), i
    assert any(removed in text and "left out" in text for text in said), said
