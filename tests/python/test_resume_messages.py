"""What state_dict() and load_state_dict() say when they refuse: the call
made, and values in the form the user passes them."""

from __future__ import annotations

import pytest

import ringfeed
from helpers import dataset

ARGS = dict(size=16, num_workers=1)


def test_load_state_dict_with_ordered_false_names_itself(tmp_path_factory):
    """load_state_dict() on a Loader of ordered=False names
    load_state_dict(); it said "state_dict() needs batches in order", a
    call the user had not made."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 4, **ARGS) as loader:
        state = loader.state_dict()
    with ringfeed.Loader(root, 4, ordered=False, **ARGS) as loader:
        with pytest.raises(ringfeed.ConfigError) as caught:
            loader.load_state_dict(state)
        assert str(caught.value) == ("load_state_dict() needs batches in "
                                     "order: drop ordered=False")
        with pytest.raises(ringfeed.ConfigError) as caught:
            loader.state_dict()
        assert str(caught.value) == ("state_dict() needs batches in order: "
                                     "drop ordered=False")


def test_a_seed_given_unsigned_is_shown_as_the_user_passes_it(
        tmp_path_factory):
    """A checkpoint of a run given seed=2**64-1 (a seed drawn as an
    unsigned 64-bit number), loaded with another seed, is refused showing
    that seed as given too, not only as the library's -1 (the same bits),
    a number the user never wrote."""
    root = dataset(tmp_path_factory, "tiny")
    with ringfeed.Loader(root, 4, seed=2**64 - 1, **ARGS) as loader:
        state = loader.state_dict()
    with ringfeed.Loader(root, 4, seed=2**64 - 2, **ARGS) as loader:
        with pytest.raises(ringfeed.ConfigError) as caught:
            loader.load_state_dict(state)
    assert str(caught.value).startswith(
        "the checkpoint has seed -1 (or 18446744073709551615: the same 64 "
        "bits) but this Loader -2 (or 18446744073709551614: the same 64 "
        "bits): resuming needs the run's own seed=")
