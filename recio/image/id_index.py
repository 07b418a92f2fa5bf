"""An ``.idx`` keyed by image id: the ``id`` field of each record's ``IRHeader``.

MXNet's im2rec keys its ``.idx`` by the ``.lst`` index, which it also stores as the header's
``id``; ``index_by_id`` rebuilds exactly that file from the ``.rec`` alone. Only the first
24 bytes of each record are read (the header's fixed part), so label vectors of any length and
records without an image (a face-recognition set's header and identity records) are keyed too.
"""
from __future__ import annotations

import os
from typing import List, Optional, Sequence, Union

import numpy as np

from recio.errors import RecordIOError
from recio.image.header import IR_SIZE, IR_STRUCT
from recio.records.reader import RecordReader
from recio.records.reindex import Progress, RebuiltIndex, rebuild_index

PathLike = Union[str, "os.PathLike[str]"]


def record_ids(rec_path: PathLike, offsets: Sequence[int]) -> List[int]:
    """The ``IRHeader`` id of the record at each of ``offsets``.

    A record shorter than the 24-byte header raises ``RecordIOError`` with its offset.
    """
    rec_path = os.fspath(rec_path)
    ids = []
    with RecordReader(rec_path) as reader:
        for offset in offsets:
            head = reader.peek_at(int(offset), IR_SIZE)
            if len(head) < IR_SIZE:
                raise RecordIOError(f"record of {len(head)} bytes has no image header "
                                    f"({IR_SIZE} bytes) to take an id from; index it by "
                                    f"position instead", path=rec_path, offset=int(offset))
            ids.append(IR_STRUCT.unpack_from(head)[2])
    return ids


def unique_record_ids(rec_path: PathLike, offsets: Sequence[int]) -> Union[np.ndarray, List[int]]:
    """``record_ids``, checked to be unique (an index needs unique keys).

    A repeated id raises ``RecordIOError`` at the offset of its second record.
    """
    ids = record_ids(rec_path, offsets)
    seen = {}
    repeats = 0
    first_repeat = None
    for position, rid in enumerate(ids):
        if rid in seen:
            repeats += 1
            if first_repeat is None:
                first_repeat = (rid, seen[rid], position)
        else:
            seen[rid] = position
    if first_repeat is not None:
        rid, was, position = first_repeat
        raise RecordIOError(f"record id {rid} is also the id of the record at byte "
                            f"{int(offsets[was])} ({repeats} repeated ids in all); an index "
                            f"needs unique keys: index by position instead",
                            path=os.fspath(rec_path), offset=int(offsets[position]))
    if ids and max(ids) < 1 << 63:
        return np.asarray(ids, dtype=np.int64)  # formatted without a Python loop
    return ids


def index_by_id(rec_path: PathLike, idx_path: Optional[PathLike] = None, *,
                force: bool = False, progress: Progress = None) -> RebuiltIndex:
    """Write an ``.idx`` for ``rec_path`` whose keys are the records' image ids.

    ``idx_path`` defaults to the ``.idx`` beside the ``.rec``. For a ``.rec`` made by im2rec
    the result is byte-identical to the ``.idx`` im2rec wrote. Raises ``RecordIOError`` for a
    damaged ``.rec``, a record without an image header or a repeated id (nothing is written
    then). ``force`` and ``progress(n)`` as in ``rebuild_index``.
    """
    return rebuild_index(rec_path, idx_path, keys=unique_record_ids, force=force,
                         progress=progress)


__all__ = ["index_by_id", "record_ids", "unique_record_ids"]
