"""What torch's DataLoader calls by names a Loader does not have, and
what stands for each in a Loader: the message of the AttributeError that
code moved from a DataLoader meets (Loader.__getattr__)."""

from __future__ import annotations

from typing import Dict

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
