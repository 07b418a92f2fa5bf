"""An ``.idx`` keyed by image id: the ``id`` field of each record's ``IRHeader``.

MXNet's im2rec keys its ``.idx`` by the ``.lst`` index, which it also stores as the header's
``id``; ``index_by_id`` rebuilds exactly that file from the ``.rec`` alone. Only the first
24 bytes of each record are read (the header's fixed part), so label vectors of any length and
records without an image (a face-recognition set's header and identity records) are keyed too.
"""
from __future__ import annotations

import os
import shlex
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from recio import storage
from recio.errors import NotRegularFileError, RecordIOError
from recio.image.header import IR_SIZE, IR_STRUCT
from recio.records.index import open_index
from recio.records.index_format import key_text, sibling_index_path
from recio.records.reader import RecordReader
from recio.records.reindex import Progress, RebuiltIndex, rebuild_index

PathLike = Union[str, "os.PathLike[str]"]


def record_ids(rec_path: PathLike, offsets: Union[Sequence[int], np.ndarray]) -> List[int]:
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


def _unique_record_ids(rec_path: PathLike, offsets: Union[Sequence[int], np.ndarray]
                       ) -> Union[np.ndarray, List[int]]:
    """``record_ids``, checked to be unique (an index needs unique keys).

    A repeated id raises ``RecordIOError`` at the offset of its second record.
    """
    ids = record_ids(rec_path, offsets)
    seen: Dict[int, int] = {}  # id -> position of its first record
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
                            f"needs unique keys: index by position instead "
                            f"(`recio index --key position`)",
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
    written = rebuild_index(rec_path, idx_path, keys=_unique_record_ids, force=force,
                            progress=progress)
    written.keys = "id"
    return written


def index_keeping_keys(rec_path: PathLike, idx_path: Optional[PathLike] = None, *,
                       force: bool = False, progress: Progress = None) -> RebuiltIndex:
    """Write an ``.idx`` for ``rec_path`` with the kind of keys the index it replaces had.

    The old index is ``idx_path`` when that file exists, else the ``.idx`` beside the
    ``.rec``. Where its lines land on the records, its keys show what they were: ``0..n-1``
    by position (``rec2idx``) or each record's image id (im2rec), and the new index is keyed
    the same way (``RebuiltIndex.keys`` says which). Without an old index the keys are
    positions, as ``rec2idx`` writes them, unless the records carry image ids that are not
    their positions (``_auto_key_kind``: it asks). Keys of any other kind, or an old index that says
    nothing (unreadable, or of another file) over records whose ids are not their positions,
    raise ``RecordIOError`` asking for ``--key id`` or ``--key position``: the keys are never
    renumbered silently. Damage in the ``.rec`` raises as in ``rebuild_index``.
    """
    rec_path = os.fspath(rec_path)
    old = _old_index(rec_path, idx_path)
    chosen = {}

    def keys(path: str, offsets: np.ndarray) -> Union[Sequence[Any], np.ndarray]:
        kind = _auto_key_kind(path, offsets, old)
        chosen["kind"] = kind
        return range(len(offsets)) if kind == "position" else _unique_record_ids(path, offsets)

    written = rebuild_index(rec_path, idx_path, keys=keys, force=force, progress=progress)
    written.keys = chosen.get("kind", "position")
    return written


def _old_index(rec_path: str, idx_path: Optional[PathLike]) -> Optional[str]:
    """The index whose kind of keys a rebuild keeps: ``idx_path`` when that file exists, else
    the ``.idx`` beside the ``.rec``; None when there is neither."""
    target = sibling_index_path(rec_path) if idx_path is None else os.fspath(idx_path)
    old = target if storage.exists(target) else sibling_index_path(rec_path)
    return old if storage.exists(old) else None


def _auto_key_kind(rec_path: str, offsets: np.ndarray, old: Optional[str]) -> str:
    """``"position"`` or ``"id"``: the keys ``recio index --key auto`` gives the records at
    ``offsets``: those of the old index ``old`` (``_old_key_kind``); without one, positions
    (as ``rec2idx``) unless the records carry image ids that are not their positions, as
    im2rec writes them (a shuffled list, skipped images): then it cannot tell which the lost
    index had and raises ``RecordIOError`` asking for ``--key``, never renumbering an im2rec
    file silently."""
    if old is not None:
        return _old_key_kind(rec_path, offsets, old)
    ids = _ids_or_none(rec_path, offsets)
    if ids is None or ids == list(range(len(offsets))):
        return "position"
    raise RecordIOError(f"has no index to take the kind of keys from, and its records carry "
                        f"image ids that are not their positions (as im2rec keys them): "
                        f"{_ASK}", path=rec_path)


def index_command(rec_path: str, offsets: np.ndarray, idx_path: Optional[str] = None) -> str:
    """The ``recio index`` command that writes a new index for ``rec_path`` (whose record
    heads are ``offsets``) without asking: ``--force`` when an index is there, and the
    ``--key`` that ``auto`` would ask for (image ids when they are unique, else positions)."""
    old = _old_index(rec_path, idx_path)
    option = ""
    try:
        _auto_key_kind(rec_path, offsets, old)
    except RecordIOError:
        ids = _ids_or_none(rec_path, offsets)
        option = " --key id" if ids is not None and len(set(ids)) == len(ids) \
            else " --key position"
    out = "" if idx_path is None else f" -o {shlex.quote(idx_path)}"
    force = " --force" if old is not None and (idx_path is None or old == idx_path) else ""
    return f"recio index {shlex.quote(rec_path)}{out}{force}{option}"


_ASK = ("pass --key id (each record's image id, as im2rec writes them) or --key position "
        "(0..n-1, as rec2idx writes them)")


def _old_key_kind(rec_path: str, offsets: np.ndarray, old: str) -> str:
    """``"position"`` or ``"id"``: what the keys of the old index ``old`` were, judged on its
    lines that land on the records at ``offsets``; ``RecordIOError`` when they were neither
    or it cannot tell."""
    ask = _ASK
    why = None
    try:
        index = open_index(old, key_type=str, cache=False)
    except NotRegularFileError:  # a FIFO or a device where the index is: not a damaged one
        raise
    except RecordIOError as exc:
        index, why = None, f"it cannot be read ({exc.message})"
    landed = np.zeros(0, np.int64)
    if index is not None:
        old_offsets = np.asarray(index.offsets, np.int64)
        landed = np.flatnonzero(np.isin(old_offsets, offsets))
        if len(landed) * 2 <= len(old_offsets):
            why = "its offsets do not land on this file's records (it belongs to another file)"
    if why is None:
        assert index is not None  # why says when there is none
        keys = [index.key_at(int(i)) for i in landed]
        position = np.searchsorted(offsets, np.asarray(index.offsets)[landed])
        if keys == [str(p) for p in position.tolist()]:
            return "position"
        ids = _ids_or_none(rec_path, np.asarray(index.offsets)[landed])
        if ids is not None and keys == [str(i) for i in ids]:
            return "id"
        example = next((k for k, p in zip(keys, position.tolist()) if k != str(p)), keys[0])
        raise RecordIOError(f"the index it replaces, {old}, has keys that are neither "
                            f"positions nor image ids (e.g. key {key_text(example)}); "
                            f"rebuilding would renumber them: {ask}", path=rec_path)
    ids = _ids_or_none(rec_path, offsets)
    if ids is None or ids == list(range(len(offsets))):
        return "position"  # positions and ids agree, or there are no ids: nothing to choose
    raise RecordIOError(f"cannot tell which keys the index it replaces ({old}) had: {why}; "
                        f"{ask}", path=rec_path)


def _ids_or_none(rec_path: str, offsets: Union[Sequence[int], np.ndarray]
                 ) -> Optional[List[int]]:
    """``record_ids``, or None when a record has no image header."""
    try:
        return record_ids(rec_path, offsets)
    except RecordIOError:
        return None
