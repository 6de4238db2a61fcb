"""The source a Loader cannot open, each failure as its exception: a
missing path or a file that is no dataset (DatasetNotFound), a folder
this process may not list (DatasetUnreadable), another reason of the
operating system's (DatasetError), all OSErrors with errno and filename;
and a source= no file system takes (ConfigError)."""

from __future__ import annotations

import errno
import os
import subprocess
import sys
import textwrap

import pytest

import ringfeed
from helpers import child_env, write_folder


def test_missing_path_is_dataset_not_found(tmp_path):
    missing = tmp_path / "no-such-folder"
    with pytest.raises(ringfeed.DatasetNotFound) as caught:
        ringfeed.Loader(missing, 8, size=32)
    assert isinstance(caught.value, FileNotFoundError)
    assert isinstance(caught.value, ringfeed.RingfeedError)
    assert str(missing) in str(caught.value)
    # what an except OSError clause reads (all None before)
    assert caught.value.errno == errno.ENOENT
    assert caught.value.filename == str(missing)


def test_a_file_that_is_no_dataset_is_dataset_not_found(tmp_path):
    path = tmp_path / "notes.txt"
    path.write_text("hello")
    with pytest.raises(ringfeed.DatasetNotFound) as caught:
        ringfeed.Loader(str(path), 8)
    assert isinstance(caught.value, FileNotFoundError)
    assert "notes.txt" in str(caught.value)
    assert "ringfeed-pack" in str(caught.value)


def test_a_symlink_loop_is_a_dataset_error_and_an_os_error(tmp_path):
    """A source the operating system refuses for a reason of its own
    (here a symbolic link loop, ELOOP; a name too long, an I/O error):
    DatasetError, an OSError with its errno and filename, as open() would
    raise (it was a plain RingfeedError, which an except OSError clause
    missed)."""
    loop = tmp_path / "loop"
    loop.symlink_to("loop")
    for source in (loop, loop / "train"):
        with pytest.raises(ringfeed.DatasetError) as caught:
            ringfeed.Loader(source, 8, size=32)
        error = caught.value
        assert isinstance(error, OSError)
        assert isinstance(error, ringfeed.RingfeedError)
        assert not isinstance(error, FileNotFoundError)
        assert error.errno == errno.ELOOP
        assert error.filename == str(source)
        assert "Too many levels of symbolic links" in str(error)


def test_unreadable_class_folder_is_dataset_unreadable(tmp_path_factory):
    """A class folder this process may not list: DatasetUnreadable, a
    PermissionError (it was a plain RingfeedError), naming the folder.
    As root, which reads every folder, the Loader runs in a user namespace
    as another user (`unshare --user`), where root's own folders are read
    by their owner's permissions. Other failures with the same errno (a
    helper that may not be started) stay RingfeedError."""
    from ringfeed.errors import from_code
    assert type(from_code(-errno.EACCES, b"cannot start the helper: "
                          b"Permission denied")) is ringfeed.RingfeedError
    root = str(tmp_path_factory.mktemp("locked"))
    write_folder(root, 2, 2, seed=6)
    locked = os.path.join(root, "class_01")
    code = textwrap.dedent(f"""
        import ringfeed
        try:
            ringfeed.Loader({root!r}, 2, size=32)
        except ringfeed.DatasetUnreadable as e:
            assert isinstance(e, PermissionError)
            print("unreadable:", e)
        """)
    command = [sys.executable, "-c", code]
    if os.geteuid() == 0:
        if subprocess.run(["unshare", "--user", "--map-user=65534", "true"],
                          capture_output=True).returncode != 0:
            pytest.skip("root reads every folder, and no user namespace "
                        "(unshare --user) to run as another user")
        command = ["unshare", "--user", "--map-user=65534"] + command
    os.chmod(locked, 0)
    try:
        done = subprocess.run(command, env=child_env(), capture_output=True,
                              text=True, timeout=60)
    finally:
        os.chmod(locked, 0o755)
    assert done.returncode == 0, done.stderr
    assert "unreadable: cannot open dataset" in done.stdout, done.stdout
    assert "class_01: cannot open it: Permission denied" in done.stdout


def test_source_paths_no_file_has(tmp_path):
    """source= that no file system takes: empty, holding a NUL (the
    library read the path up to it and opened another folder), too long,
    or not a path at all. Each is a ConfigError naming source= and no C
    function, with a long path shortened."""
    root = str(tmp_path)
    write_folder(root, 1, 2, seed=1)
    cases = [("", "source='' is empty"),
             (root + "\0/other", "holds a NUL character"),
             ("/" + "a" * 5000, "bytes; the limit is 4095"),
             (42, "source=42: give the path of a folder")]
    for source, words in cases:
        with pytest.raises(ringfeed.ConfigError) as caught:
            ringfeed.Loader(source, 2, size=16)
        text = str(caught.value)
        assert words in text, text
        assert "rf_config" not in text and len(text) < 400, text
