"""``PackPaths``: every path one pack of a list touches, worked out once from the list's path.

A pack of ``data/train.lst`` (or ``s3://bucket/data/train.lst``) writes beside it, under the
list's stem ``data/train``: the outputs ``train.rec`` + ``train.idx`` (or a shard set's
``train-NNNNN.*`` and ``train.manifest.json``), the skip report ``train.errors.tsv``, while it
runs the lock ``train.pack.lock``, and the progress a resume continues: ``train.rec.partial`` +
``train.pack.journal`` (``recio.image.packing.output``) for a pack in this process, or the
staging folder ``.recio-pack-train`` for a pack in parts (``recio.image.packing.progress``).
Every module names these paths from here, so none works them out from the list again.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Tuple, Union

from recio import storage
from recio.records.index_format import sibling_index_path
from recio.records.lock import lock_path, pack_journal_path
from recio.records.manifest import manifest_path

PathLike = Union[str, "os.PathLike[str]"]

#: the staging folder of ``STEM``'s pack: ``DIR/.recio-pack-NAME``
_STAGING_PREFIX = ".recio-pack-"


def staging_folder(stem: str) -> str:
    """``data/train`` -> ``data/.recio-pack-train`` (a URL stays a URL)."""
    return storage.join(storage.dirname(stem), _STAGING_PREFIX + storage.basename(stem))


@dataclass(frozen=True)
class PackPaths:
    """The paths of one pack of the list ``lst`` (absolute, or a URL)."""

    lst: str
    #: ``lst`` without ``.lst``: what every other path is named after
    stem: str
    rec: str
    idx: str
    #: ``line, index, path, reason`` of every item skipped
    errors: str
    #: a pack's records until it is complete, and the journal vouching for them
    rec_partial: str
    journal: str
    #: held while the pack runs (``recio.records.lock``)
    lock: str
    #: a pack in parts keeps its parts here
    staging: str
    #: a shard set's manifest, written last
    manifest: str

    @classmethod
    def of(cls, lst_path: PathLike) -> "PackPaths":
        """The paths of a pack of ``lst_path`` (a local path, made absolute, or a URL)."""
        lst = storage.absolute(lst_path)
        stem = os.path.splitext(lst)[0]
        return cls(lst, stem, stem + ".rec", sibling_index_path(stem + ".rec"),
                   stem + ".errors.tsv", stem + ".rec.partial", pack_journal_path(stem),
                   lock_path(stem), staging_folder(stem), manifest_path(stem))

    @property
    def partial(self) -> Tuple[str, str]:
        """``(rec_partial, journal)``: where an unfinished pack keeps its progress."""
        return self.rec_partial, self.journal

    def has_partial(self) -> bool:
        """True when an interrupted pack of this (local) list left progress that ``resume``
        can use: its ``.rec.partial`` and journal, or its journal beside the ``.rec`` it was
        publishing when it stopped (the journal goes last)."""
        return os.path.exists(self.journal) and (os.path.exists(self.rec_partial)
                                                 or os.path.exists(self.rec))

    def check(self) -> None:
        """Refuse the pack before it starts when a file it writes, reads back or deletes
        (outputs, error report, partial files, lock) is a FIFO, a device, a socket or a
        directory (``recio.storage.regular``): opening one would block, and nothing is ever
        written beside it or deleted in its place. URLs pass."""
        for path in (self.rec, self.idx, self.errors, self.rec_partial, self.journal,
                     self.lock):
            storage.check_output(path)

    def beside_the_list(self) -> str:
        """What to do when the folder of the list refuses its outputs (read-only, no
        permission): a pack writes them beside the list, so pack a copy of it elsewhere."""
        name = storage.basename(self.lst)
        return (f"a pack writes its outputs beside the list: copy {name} into a folder you "
                "can write to and pack that copy (its paths are relative to ROOT: the same "
                "images)")
