"""CorruptSample: a sample that does not read or decode fails naming its
index, its file and the reason (.index, .path, .name, .reason, taken
from the library's message for any file name: parentheses, the
message's own separator, bytes that are not UTF-8), or under
on_error="skip" is left out, said and listed, until a limit is
crossed."""

from __future__ import annotations

import os
import re
import subprocess

import pytest

import ringfeed
from helpers import Reference, assert_user_terms, write_folder

SAMPLES = 61


@pytest.fixture(scope="module")
def bad_folder(tmp_path_factory):
    """2 classes of 30 images, one of them truncated, plus a file of
    garbage after a JPEG marker: 61 samples; returns (root, {index: full
    path of a bad one})."""
    root = str(tmp_path_factory.mktemp("bad"))
    write_folder(root, 2, 30, seed=21)
    truncated = os.path.join(root, "class_00", "img_0007.jpg")
    with open(truncated, "rb") as f:
        data = f.read()
    with open(truncated, "wb") as f:
        f.write(data[:len(data) // 3])
    garbage = os.path.join(root, "class_01", "img_0030.jpg")
    with open(garbage, "wb") as f:
        f.write(b"\xff\xd8\xff\xe0" + bytes(range(256)) * 8)
    bad = {}
    with Reference(root, {"height": 32, "width": 32}) as ref:
        for index in range(ref.size):
            path = os.path.join(root, ref.name(index))
            if path in (truncated, garbage):
                bad[index] = path
        assert ref.size == SAMPLES
    assert len(bad) == 2
    return root, bad


# The reason a file that is no image fails with, naming what this build
# decodes: "not a JPEG, PNG or WebP file (starts with 6e 6f 74 20: ...".
NOT_AN_IMAGE = (r"not a JPEG(, PNG or WebP| or PNG| or WebP)? file "
                r"\(starts with ")


def test_corrupt_sample_fails_with_its_details(bad_folder):
    root, bad = bad_folder
    loader = ringfeed.Loader(root, 8, size=32, on_error="fail",
                             num_workers=2)
    delivered = 0
    with pytest.raises(ringfeed.CorruptSample) as caught:
        for images, _ in loader:
            delivered += len(images)
    e = caught.value
    assert isinstance(e, ringfeed.RingfeedError)
    assert e.index in bad, f"index {e.index} is not a bad sample's"
    assert e.path == bad[e.index]
    assert e.reason and e.reason in str(e)
    assert bad[e.index] in str(e)
    assert "on_error=" in str(e)  # what to change, as a keyword
    assert_user_terms(str(e))
    assert delivered < SAMPLES
    assert loader.closed  # a failed run closes the loader


def test_skip_counts_and_lists_the_bad_samples(bad_folder):
    """Skipped samples are left out, counted, listed, and said: once each
    through on_message, the first time (nothing said them: a loop saw
    only shorter batches)."""
    root, bad = bad_folder
    said = []
    with ringfeed.Loader(root, 8, size=32, on_error="skip",
                         max_error_ppm=1_000_000, num_workers=2,
                         on_message=said.append) as loader:
        for epoch in range(2):
            seen, skipped = [], 0
            for batch in loader.batches():
                seen += batch.indices.tolist()
                skipped += batch.skipped
                assert len(batch.labels) + batch.skipped <= 8
            assert skipped == len(bad)
            assert sorted(seen) == sorted(set(range(SAMPLES)) - set(bad))
        errors = loader.sample_errors()
        assert loader.stats()["failed_samples"] == 2 * len(bad)
    # each failed sample once, with its first failure (epoch 0)
    assert sorted((i, e) for i, e, _ in errors) == [(i, 0)
                                                    for i in sorted(bad)]
    for index, _, message in errors:
        assert bad[index] in message
        assert_user_terms(message)
    assert len(said) == len(bad), said
    for index, path in bad.items():
        [text] = [t for t in said if path in t]
        assert text.startswith(f"left out (on_error='skip'): sample {index} ")
        assert_user_terms(text)


def test_a_truncated_jpeg_names_the_keyword_that_accepts_it(tmp_path):
    """A truncated JPEG's reason says which jpeg_warnings= accepts it, as
    a keyword and its value (the library writes it in C's names)."""
    root = str(tmp_path)
    write_folder(root, 1, 2, seed=5)
    path = os.path.join(root, "class_00", "img_0000.jpg")
    with open(path, "rb") as f:
        data = f.read()
    with open(path, "wb") as f:
        f.write(data[:len(data) // 2])
    with pytest.raises(ringfeed.CorruptSample) as caught:
        for _ in ringfeed.Loader(root, 2, size=32, num_workers=1):
            pass
    text = str(caught.value)
    assert "(jpeg_warnings='lenient' accepts it, the missing rows grey" \
        in text, text
    assert_user_terms(text)


def test_a_reason_not_kept_says_how_to_get_it(tmp_path):
    """Past the four reasons a batch keeps, a failed sample's message says
    how to get its reason in Python's terms (it said only that it was not
    kept)."""
    root = str(tmp_path)
    write_folder(root, 1, 8, seed=3)
    for i in range(6):
        with open(os.path.join(root, "class_00", f"img_{i:04d}.jpg"),
                  "wb") as f:
            f.write(b"not an image")
    with ringfeed.Loader(root, 8, size=32, on_error="skip", shuffle=False,
                         max_error_ppm=1_000_000, num_workers=1,
                         on_message=lambda text: None) as loader:
        for _ in loader:
            pass
        errors = loader.sample_errors()
    not_kept = [m for _, _, m in errors if "its reason was not kept" in m]
    assert len(not_kept) == 2, errors
    for message in not_kept:
        assert message.endswith("failed); `ringfeed-pack --verify` of the "
                                "source says why"), message
        assert "rf_" not in message
        assert_user_terms(message)


def test_restarts_keep_the_skip_record(bad_folder):
    """Loops left early (a fixed number of steps an epoch) start the
    producers again at each set_epoch(): the skip record is the Loader's
    whole run's all the same. A bad file is said once and listed once
    with its first failure; failed_samples counts every epoch. (Each
    start said it again, and listed only its own failures.)"""
    root, bad = bad_folder
    early = sorted(i for i in bad if i < 6 * 8)  # in the batches taken
    assert early
    said = []
    with ringfeed.Loader(root, 8, size=32, on_error="skip", shuffle=False,
                         max_error_ppm=1_000_000, max_errors=len(early),
                         num_workers=1, on_message=said.append) as loader:
        for epoch in range(3):
            loader.set_epoch(epoch)
            for step, _ in enumerate(loader):
                if step == 5:
                    break
        errors = loader.sample_errors()
        assert loader.stats()["failed_samples"] == 3 * len(early)
    assert sorted((i, e) for i, e, _ in errors) == [(i, 0) for i in early]
    assert len([t for t in said if t.startswith("left out")]) == len(early)


def test_skip_past_the_limit_fails(bad_folder):
    """on_error="skip" with the default max_error_ppm (1%): 2 of 61 is
    too many, and the message names the keyword to raise."""
    root, bad = bad_folder
    with pytest.raises(ringfeed.CorruptSample) as caught:
        with ringfeed.Loader(root, 8, size=32, on_error="skip") as loader:
            for _ in loader:
                pass
    assert "max_error_ppm=" in str(caught.value)
    assert_user_terms(str(caught.value))
    assert caught.value.index in bad


def test_an_epoch_whose_every_sample_failed_fails(tmp_path):
    """Every file bad, under on_error="skip" with max_error_ppm=1_000_000
    (any share may fail): the batches come out empty, and the epoch's last
    failure raises CorruptSample naming the file, in keywords. (Every
    epoch gave only empty batches, and the loop ran to its end as if all
    were well.)"""
    root = tmp_path / "data"
    for name in ("a", "b"):
        (root / name).mkdir(parents=True)
        for i in range(5):
            (root / name / f"{i}.jpg").write_bytes(b"not an image")
    empty = 0
    with pytest.raises(ringfeed.CorruptSample) as caught:
        with ringfeed.Loader(str(root), 4, size=16, on_error="skip",
                             max_error_ppm=1_000_000, num_workers=1,
                             quiet=True) as loader:
            for _ in range(3):
                for images, labels in loader:
                    assert len(labels) == len(images) == 0
                    empty += 1
    text = str(caught.value)
    assert empty == 2, empty  # of 3 batches: the third's failure ends it
    assert text.startswith("all 10 samples of epoch 0 failed, so the epoch "
                           "has nothing to deliver: under on_error='skip' "
                           "that ends the run, whatever "
                           "max_error_ppm=1000000 allows"), text
    assert "the failures are in sample_errors()" in text, text
    assert caught.value.path and caught.value.path.startswith(str(root))
    assert caught.value.path in text
    assert_user_terms(text)


@pytest.mark.parametrize("folder, name", [
    ("plain", "a photo (1).jpg"),       # a name with parentheses
    ("imagenet (copy)", "b.jpg"),       # a folder with them
    ("names", b"bad\xff.jpg"),          # a name that is not UTF-8
    ("plain", "a): b.jpg"),             # the message's own separator
    ("x): y", "b\xff): c.jpg".encode("latin-1")),  # both, and not UTF-8
])
def test_corrupt_sample_path_is_the_file(tmp_path, folder, name):
    """CorruptSample.index and .path for names that the message's form
    could not take apart: parentheses in the path (they were None), a
    name's bytes that are not UTF-8 (.path had U+FFFD, no file's name),
    and "): ", the end of the path in the message, inside it (.path was
    cut there and .reason began with the rest of the name): .path is what
    open() and os.remove() take."""
    root = os.path.join(os.fsencode(tmp_path), os.fsencode(folder))
    write_folder(os.fsdecode(root), 1, 2, seed=5)
    bad = os.path.join(root, b"class_00", os.fsencode(name))
    with open(bad, "wb") as f:
        f.write(b"not a picture at all")
    with pytest.raises(ringfeed.CorruptSample) as caught:
        with ringfeed.Loader(os.fsdecode(root), 3, size=32, shuffle=False,
                             num_workers=1) as loader:
            for _ in loader:
                pass
    e = caught.value
    assert e.path == os.fsdecode(bad)
    assert os.path.exists(e.path)
    assert e.index == 0  # its name sorts before the "img_..." ones
    assert re.match(NOT_AN_IMAGE, e.reason), e.reason
    assert_user_terms(str(e))


@pytest.mark.parametrize("message, index, path, name", [
    (b"sample 3 (/data/best (2019) of cats/a.jpg): not a JPEG", 3,
     "/data/best (2019) of cats/a.jpg", None),
    (b"sample 7 (n01/x (1).jpg, packed offset 4096) of /d/t (v1).pack: "
     b"bad", 7, "/d/t (v1).pack", "n01/x (1).jpg"),
    (b"sample 9 (packed offset 128) of /d/x.pack: bad", 9, "/d/x.pack",
     None),
    (b"sample 5 (/no/such/aaaa...zzzz/c.jpg): cannot open it", 5, None,
     None),
])
def test_corrupt_sample_fields_of_each_message_form(message, index, path,
                                                    name):
    """Each form of the library's sample description: a folder path with
    " of " after a parenthesis (the name and the path were swapped), a
    packed sample with and without a name, and a path shortened in its
    middle (None: it named no file)."""
    from ringfeed import _capi
    from ringfeed.errors import from_code
    e = from_code(_capi.E_CORRUPT_SAMPLE, message)
    assert (e.index, e.path, e.name) == (index, path, name)
    assert e.reason == message.decode().rsplit(": ", 1)[1]


def test_corrupt_sample_pack_path_holding_the_separator(tmp_path):
    """A packed file whose path holds ": " (the end of the path in the
    message): .path is the file on disk, .reason the library's reason
    (the path was cut at its own ": ")."""
    from ringfeed import _capi
    from ringfeed.errors import from_code
    pack = os.path.join(str(tmp_path), "run: 2.pack")
    open(pack, "wb").close()
    message = (f"sample 4 (n01/a.jpg, packed offset 64) of {pack}: "
               "checksum mismatch: stored 1, computed 2").encode()
    e = from_code(_capi.E_CORRUPT_SAMPLE, message)
    assert (e.index, e.path, e.name) == (4, pack, "n01/a.jpg")
    assert e.reason == "checksum mismatch: stored 1, computed 2"


def test_corrupt_sample_path_beside_a_folder_named_like_its_start(tmp_path):
    """A file in class folder "cls): one" beside class folder "cls": .path
    is the file, not the folder "cls" that the message's first "): "
    leaves."""
    root, made = str(tmp_path / "root"), str(tmp_path / "made")
    os.mkdir(root)
    for name in ("cls", "cls): one"):
        write_folder(made, 1, 1, seed=3)
        os.rename(os.path.join(made, "class_00"), os.path.join(root, name))
    bad = os.path.join(root, "cls): one", "bad.jpg")
    with open(bad, "wb") as f:
        f.write(b"not a picture")
    with pytest.raises(ringfeed.CorruptSample) as caught:
        with ringfeed.Loader(root, 2, size=16, shuffle=False,
                             num_workers=1) as loader:
            for _ in loader:
                pass
    assert caught.value.path == bad
    assert re.match(NOT_AN_IMAGE, caught.value.reason), caught.value.reason


def test_corrupt_sample_path_of_a_relative_source_after_chdir(
        tmp_path, monkeypatch):
    """A relative source= and an os.chdir() after the Loader was made:
    CorruptSample.path is still the file (it was relative to the old
    directory, and a name holding "): " was cut in the wrong place)."""
    root = tmp_path / "data"
    write_folder(str(root), 1, 2, seed=7)
    bad = root / "class_00" / "photo (2): a.jpg"
    bad.write_bytes(b"not a picture")
    monkeypatch.chdir(tmp_path)
    loader = ringfeed.Loader("data", 3, size=16, shuffle=False,
                             num_workers=1)
    monkeypatch.chdir("/")
    with pytest.raises(ringfeed.CorruptSample) as caught:
        with loader:
            for _ in loader:
                pass
    assert caught.value.path == str(bad)
    assert re.match(NOT_AN_IMAGE, caught.value.reason), caught.value.reason


def test_a_source_under_the_home_folder(tmp_path, monkeypatch):
    """source="~/data", as ImageFolder takes it (it expands the ~): the
    folder under $HOME is read, and CorruptSample.path is its file (the
    Loader looked for a folder named ~ in the working directory and
    raised DatasetNotFound)."""
    monkeypatch.setenv("HOME", str(tmp_path))
    monkeypatch.chdir("/")
    root = tmp_path / "data"
    write_folder(str(root), 2, 2, seed=7)
    bad = root / "class_01" / "z.jpg"
    bad.write_bytes(b"not a picture")
    loader = ringfeed.Loader("~/data", 5, size=16, shuffle=False,
                             num_workers=1)
    assert loader.classes == ["class_00", "class_01"]
    with pytest.raises(ringfeed.CorruptSample) as caught:
        with loader:
            for _ in loader:
                pass
    assert (caught.value.index, caught.value.path) == (4, str(bad))


def first_failure(source):
    """The CorruptSample a loop over source ends with."""
    with pytest.raises(ringfeed.CorruptSample) as caught:
        with ringfeed.Loader(source, 3, size=32, shuffle=False,
                             num_workers=1) as loader:
            for _ in loader:
                pass
    return caught.value


def test_corrupt_sample_fields_come_from_the_library(tmp_path):
    """The fields as the library gives them apart: .path whole for a path
    longer than its message keeps (that message shortens it in its middle,
    and .path was None), and a packed sample's stored name that holds the
    message's own words (", packed offset 7) of ")."""
    root = os.path.join(str(tmp_path), "c" * 200 + " (1): x")
    write_folder(root, 1, 2, seed=5)
    name = "class_00/a, packed offset 7) of b.jpg"
    with open(os.path.join(root, name), "wb") as f:
        f.write(b"not a picture at all")
    e = first_failure(root)
    assert "..." in str(e)
    assert (e.index, e.path, e.name) == (0, os.path.join(root, name), None)
    assert re.match(NOT_AN_IMAGE, e.reason), e.reason
    tools = os.environ.get("RINGFEED_TOOLS")
    if not tools:
        pytest.skip("set RINGFEED_TOOLS to the build's tools (ringfeed-pack)")
    pack = os.path.join(str(tmp_path), "p: 1.pack")
    subprocess.run([os.path.join(tools, "ringfeed-pack"), root, pack],
                   check=True, capture_output=True)
    e = first_failure(pack)
    assert (e.index, e.path, e.name) == (0, pack, name)
    assert re.match(NOT_AN_IMAGE, e.reason), e.reason
    assert_user_terms(str(e))


def test_fields_without_a_path_fall_back_to_the_message():
    """A loader that kept no listing (few fds free at open) gives the
    index and the whole failure, no path: .path and .reason are then
    read from the message, as without fields."""
    from ringfeed import _capi
    from ringfeed.errors import from_code
    message = b"sample 3 (/data/best (2019) of cats/a.jpg): not a JPEG"
    e = from_code(_capi.E_CORRUPT_SAMPLE, message,
                  (3, None, None, message.decode()))
    assert (e.index, e.path, e.name, e.reason) == (
        3, "/data/best (2019) of cats/a.jpg", None, "not a JPEG")
