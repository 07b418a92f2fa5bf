"""PyTorch datasets over ``.rec`` files. Needs ``pip install 'recio[torch]'``.

* ``datasets``  ``RecordDataset``: map-style, random access through the ``.idx``; safe in
                ``DataLoader`` workers (each process opens the files itself).
* ``sampler``   ``RecordSampler``: a ``DistributedSampler`` for it whose order is a pure
                function of ``(seed, epoch)``.
* ``iterable``  ``RecordIterableDataset``: streams one ``InputSplit`` part per (rank,
                DataLoader worker), so no record is read twice.
* ``decoders``  what a record becomes (``decode=``): an image and its label by default, or any
                callable ``bytes -> sample`` (sequence records, raw payloads).
* ``augment``   ``ImageAugment``: ImageBatchIter's decode + augmentation as a transform.
* ``batching``  whole batches decoded in one call and passed from the workers without a copy.
* ``skipcount`` ``num_skipped`` of the datasets, one count over every DataLoader worker.
* ``resume``    exact mid-epoch resume: ``RecordSampler`` and ``RecordIterableDataset`` have the
                ``state_dict()`` / ``load_state_dict()`` of torchdata's ``StatefulDataLoader``
                (recio itself does not import torchdata); ``resume_state`` merges what every
                rank saved into one state that fits any number of ranks and workers.
* ``minibatch`` ``MinibatchDataset``: a resumable ``IterableDataset`` over a ``MinibatchSource``.

The names below are imported on first use (``recio._lazy``): ``import recio.torch.minibatch``
does not load the datasets, and ``resume_state`` works without torch.
"""
from recio._lazy import lazy_exports

__all__ = ["RecordDataset", "RecordSampler", "RecordIterableDataset", "ImageAugment",
           "resume_state", "collate_encoded", "decode_on_device"]

__getattr__, __dir__ = lazy_exports(__name__, {
    "RecordDataset": ".datasets", "RecordSampler": ".sampler",
    "RecordIterableDataset": ".iterable", "ImageAugment": ".augment",
    "resume_state": ".resume", "collate_encoded": ".batching", "decode_on_device": ".batching",
}, submodules=("datasets", "sampler", "iterable", "decoders", "augment", "batching", "skipcount",
               "resume", "minibatch"))
