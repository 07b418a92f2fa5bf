"""Writing sequence files: ``PREFIX.rec`` of sequence records (:mod:`recio.sequence.records`),
its ``.idx`` and its sample-count sidecar ``.len`` (:mod:`recio.sequence.sidecar`), all three
appearing together on ``close()`` or not at all.
"""
from __future__ import annotations

import os
import weakref
from typing import Any, Dict, Iterable, List, Optional

import numpy as np

from recio.errors import SequenceError
from recio.records.closed import check_open
from recio.records.atomic import ManagedWriter, OutputSet
from recio.records.index_format import format_index, sibling_index_path
from recio.records.write_errors import write_failed
from recio.records.writer import RecordWriter
from recio.sequence.records import (
    Layout,
    PathLike,
    Stream,
    layout_mismatch,
    pack_sequence,
    samples_of,
    stream_layout,
)
from recio.sequence.sidecar import sidecar_bytes, sidecar_path

class SequenceWriter(ManagedWriter):
    """Write sequence records: ``PREFIX.rec``, ``.idx`` and ``.len`` sidecar, atomically on close.

    ``write(streams, key=None) -> offset``; keys default to 0, 1, 2, ... Every record must have
    the same stream names (in any order; stored in the first record's order). The lifecycle is
    ``recio.records.atomic.ManagedWriter``'s: ``close()`` renames the ``.rec``, then the
    ``.len``, then the ``.idx`` into place; ``abort()`` (also ``discard()``), an exception
    inside ``with`` or a writer dropped without ``close()`` leaves none of them.
    ``fsync=True``: a returned ``close()`` survives an OS crash.
    """

    def __init__(self, rec_path: PathLike, idx_path: Optional[PathLike] = None, *,
                 fsync: bool = False) -> None:
        self.rec_path = os.fspath(rec_path)
        self.idx_path = os.fspath(idx_path) if idx_path is not None else \
            sibling_index_path(self.rec_path)
        self.len_path = sidecar_path(self.rec_path)
        self.path = self.rec_path  # what a closed writer's errors name
        self.stream_names: Optional[List[str]] = None
        self._layouts: Optional[Dict[str, Layout]] = None
        self._counts: List[List[int]] = []
        self._written = 0
        outputs = OutputSet.create([(self.rec_path, "wb", 0), (self.len_path, "wb", -1),
                                    (self.idx_path, "wb", -1)], fsync=fsync)
        self._records = RecordWriter._sink(outputs.files[0].file, self.rec_path,
                                           weakref.ref(self))
        self._len_file = outputs.files[1].file
        self._idx_file = outputs.files[2].file
        self._begin(outputs, f"SequenceWriter({self.rec_path!r})")

    def write(self, streams: Dict[str, Stream], key: Any = None) -> int:
        """Append one sequence; returns its byte offset in the .rec."""
        check_open(self.closed, "writer", self.path)
        if self.stream_names is None:
            self.stream_names = list(streams)
        elif set(streams) != set(self.stream_names) or len(streams) != len(self.stream_names):
            raise SequenceError(f"sequence {self._written} has streams {sorted(streams)}; the "
                                f"file has {sorted(self.stream_names)} (all records need the same)",
                                path=self.rec_path)
        ordered = {name: streams[name] for name in self.stream_names}
        if self._layouts is None:
            self._layouts = {name: stream_layout(data) for name, data in ordered.items()}
        else:  # readers refuse a file whose records disagree: refuse the record instead
            differ = layout_mismatch(ordered, self._layouts, "sequence 0")
            if differ is not None:
                raise SequenceError(f"sequence {self._written}: {differ}; every record of a file "
                                    f"needs the same stream layouts (dense or sparse, dtype, "
                                    f"dimension): convert it, e.g. with .astype()",
                                    path=self.rec_path)
        offset = self._records.write(pack_sequence(ordered))
        self._counts.append([samples_of(d) for d in ordered.values()])
        try:
            self._idx_file.write(format_index([self._written if key is None else key],
                                              [offset]))
        except OSError as exc:  # a full disk: the writer is aborted, its files deleted
            self.abort()
            raise write_failed(exc, self.idx_path) from exc
        self._written += 1
        return offset

    def tell(self) -> int:
        """Bytes written so far (the offset of the next record)."""
        return self._records.tell()

    def _finish(self) -> None:
        self._records._finish()
        end = self._records.tell()
        self._records.closed = True
        counts = np.asarray(self._counts, dtype=np.int64).reshape(
            len(self._counts), len(self.stream_names or []))
        try:
            self._len_file.write(sidecar_bytes(self.stream_names or [], counts, end))
        except OSError as exc:  # a full disk (close() then deletes every file)
            raise write_failed(exc, self.len_path) from exc

    def _drop(self) -> None:
        self._records.closed = True
        self._records._drop()

    def close(self) -> None:
        """Finish: write what is buffered and the sidecar, then move .rec, .len and .idx into
        place."""
        super().close()

    def discard(self) -> None:
        """Abandon the files: nothing appears under the final names (same as ``abort()``)."""
        self.abort()


def write_sequences(rec_path: PathLike, sequences: Iterable[Dict[str, Stream]],
                    idx_path: Optional[PathLike] = None) -> int:
    """Write all ``sequences`` to ``rec_path`` (+ .idx, .len); returns how many were written."""
    n = 0
    with SequenceWriter(rec_path, idx_path) as w:
        for seq in sequences:
            w.write(seq)
            n += 1
    return n
