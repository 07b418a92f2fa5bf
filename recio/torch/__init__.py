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
import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.torch.augment import ImageAugment
    from recio.torch.batching import collate_encoded, decode_on_device
    from recio.torch.datasets import RecordDataset
    from recio.torch.iterable import RecordIterableDataset
    from recio.torch.resume import resume_state
    from recio.torch.sampler import RecordSampler

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "RecordDataset": "recio.torch.datasets",
    "RecordSampler": "recio.torch.sampler",
    "RecordIterableDataset": "recio.torch.iterable",
    "ImageAugment": "recio.torch.augment",
    "resume_state": "recio.torch.resume",
    "collate_encoded": "recio.torch.batching",
    "decode_on_device": "recio.torch.batching",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, submodules=(
        "datasets", "sampler", "iterable", "decoders", "augment", "batching", "skipcount", "resume",
        "minibatch"))
