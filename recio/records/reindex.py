"""Rebuilding an ``.idx`` by scanning its ``.rec`` (what MXNet's ``tools/rec2idx.py`` does).

The records are found by hopping over record headers (``record_heads``: nothing is decoded,
damage raises ``RecordIOError`` with the byte offset before anything is written). The keys are
the positions ``0..n-1``, as ``rec2idx`` writes them, or whatever a ``keys`` function makes of
the records (``recio.image.tools.id_index`` keys them by image id). The ``.idx`` is written
atomically and replaces an existing one; the parsed-index cache beside an old ``.idx`` is removed
with it.
"""
from __future__ import annotations

import os
from array import array
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from recio import storage
from recio.records.atomic import check_outputs
from recio.records.index_cache import discard_cache
from recio.records.index_format import PathLike, sibling_index_path, write_index
from recio.records.sniff import not_a_record_file
from recio.records.split import record_heads

Progress = Optional[Callable[[int], Any]]
#: ``keys(rec_path, offsets)``: one key per record, in file order
KeyFunction = Callable[[str, np.ndarray], Union[Sequence[Any], np.ndarray]]

_PROGRESS_EVERY = 64 << 20


@dataclass
class RebuiltIndex:
    """What ``rebuild_index`` wrote: ``records`` lines in ``idx_path``, for ``rec_path``."""

    rec_path: str
    idx_path: str
    records: int
    keys: str = "position"  # "position" (0..n-1), "id" (image ids) or "custom"


def scan_record_offsets(rec_path: PathLike, progress: Progress = None) -> np.ndarray:
    """The byte offset of every record head of ``rec_path`` (int64, file order).

    ``progress(n)`` is called now and then with the bytes scanned since the last call; the
    calls add up to the file's size. A damaged record raises ``RecordIOError`` (path, offset).
    """
    size = storage.size(rec_path)
    heads = array("q")  # 8 bytes per record, not a Python int each
    reported = 0
    for offset in record_heads(rec_path):
        heads.append(offset)
        if progress is not None and offset - reported >= _PROGRESS_EVERY:
            progress(offset - reported)
            reported = offset
    if progress is not None and size > reported:
        progress(size - reported)
    return np.frombuffer(heads, np.int64).copy() if heads else np.empty(0, np.int64)


def rebuild_index(rec_path: PathLike, idx_path: Optional[PathLike] = None, *,
                  keys: Optional[KeyFunction] = None, force: bool = False,
                  progress: Progress = None) -> RebuiltIndex:
    """Scan ``rec_path`` and write its index to ``idx_path`` (default: the ``.idx`` beside it).

    Keys are ``0..n-1`` (byte-identical to ``rec2idx``), or ``keys(rec_path, offsets)``.
    Raises ``RecordIOError`` for a damaged ``.rec`` (no ``.idx`` is written then) and
    :class:`OutputExistsError` when ``idx_path`` is the ``.rec`` itself (or a link to it), or
    an existing file and ``force`` is false.
    """
    rec_path = os.fspath(rec_path)
    idx_path = sibling_index_path(rec_path) if idx_path is None else os.fspath(idx_path)
    other = not_a_record_file(rec_path)  # an .idx given as REC is its own sibling: say so
    if other is not None:
        raise other
    check_outputs([idx_path], [rec_path], force=force)
    offsets = scan_record_offsets(rec_path, progress)
    key_list: Union[Sequence[Any], np.ndarray] = (
        range(len(offsets)) if keys is None else keys(rec_path, offsets))
    write_index(idx_path, key_list, offsets)
    if not storage.is_url(idx_path):
        discard_cache(idx_path)  # the old index's cache no longer applies
    return RebuiltIndex(rec_path, idx_path, len(offsets), "position" if keys is None else "custom")
