"""What a Loader is not, for code written for torch's DataLoader: not a
dataset to index, nothing to pickle or copy, and without the DataLoader's
attributes that have other names here (each error says what stands for
it). Nothing here is public."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Dict, NoReturn

# torch DataLoader attributes that a Loader has no counterpart of under
# the same name: what to use instead (see Loader.__getattr__)
DATALOADER_ATTRIBUTES: Dict[str, str] = {
    "dataset": "the Loader reads its source itself; its size is "
               "loader.stats()['samples_in_dataset'], its class names "
               "loader.classes (for an accuracy, count len(labels) as the "
               "batches come: a rank's share and skipped samples are then "
               "right)",
    "sampler": "shuffle=, seed=, rank=, world_size= and set_epoch() are its "
               "sampler's settings",
    "batch_sampler": "batch_size= and drop_last= make its batches",
    "num_workers": "the producers it runs are loader.stats()['producers'] "
                   "(num_workers=None: this rank's CPU budget, "
                   "loader.cpu_budget)",
    "pin_memory": "device='cuda' copies each batch to the GPU from its "
                  "pinned ring",
    "collate_fn": "batches come whole from the producers",
    "prefetch_factor": "slots= is the ring's size, the batches made ahead",
    "persistent_workers": "its producers live as long as it does",
    "worker_init_fn": "its producers are processes of the library's own",
    "generator": "seed= keys the order, crops and flips",
    "timeout": "batch_timeout_ms= replaces a producer that delivers "
               "nothing that long, and stall_warning_ms= says so sooner",
    "multiprocessing_context": "start_mode= says how producers start "
                               "('spawn', the default, or 'fork')",
    "pin_memory_device": "device='cuda:N' names the GPU",
    "in_order": "batches come in order (ordered=True, the default)",
}


class NotADataLoader:
    """Loader's base: the refusals, each saying what to do instead."""

    def __reduce__(self) -> NoReturn:
        raise TypeError(
            "a ringfeed.Loader cannot be pickled or sent to another "
            "process (its producers and ring belong to this one): open a "
            "Loader in each process, e.g. inside the function that "
            "torch.multiprocessing.spawn runs")

    if not TYPE_CHECKING:  # a type checker still sees no such attributes
        def __getattr__(self, name: str) -> Any:
            """Only for attributes a Loader lacks: those of torch's
            DataLoader that code moved from it reads say what stands for
            them."""
            hint = DATALOADER_ATTRIBUTES.get(name)
            if hint is None:
                raise AttributeError(
                    f"'Loader' object has no attribute {name!r}")
            raise AttributeError(f"a ringfeed.Loader has no .{name}, as "
                                 f"torch's DataLoader has: {hint}")

    def __getitem__(self, index: Any) -> NoReturn:
        raise TypeError(
            "a ringfeed.Loader is iterated, not indexed: use it in place of "
            "the DataLoader (for images, labels in loader), not inside one "
            "as a dataset")

    def __copy__(self) -> NoReturn:
        raise TypeError("a ringfeed.Loader cannot be copied (a copy would "
                        "share its producers); open a second Loader")

    def __deepcopy__(self, memo: Dict[int, Any]) -> "NotADataLoader":
        return self.__copy__()
