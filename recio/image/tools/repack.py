"""Rewrite an image ``.rec`` with only its image records, optionally globally shuffled.

DALI's ``readers.mxnet`` makes a sample of every ``.idx`` entry, so a face-recognition set in
InsightFace's layout (a header-only record 0 holding ``[first identity key, end]``, one header-only
record per identity at the tail) makes its decoder fail on the records without an image. The
rewrite keeps the image records byte for byte (headers, ids and labels untouched), numbers them
``0..n-1`` in the new order in the ``.idx`` (what DALI and ``rec2idx`` expect), and drops the
rest, counting each kind. DALI shuffles only inside a small buffer, so ``shuffle=True`` writes the
records in one seeded global permutation instead.

Memory stays bounded by the offsets (8 bytes a record, plus one byte a record for the keep mask):
records are copied one at a time from the memory-mapped input.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Optional, Tuple, Union

import numpy as np

from recio.errors import RecordIOError
from recio.image.header import IR_SIZE, IR_STRUCT, read_head
from recio.image.tools.stats import image_format
from recio.records.atomic import check_outputs
from recio.records.diagnose import explain_indexed_read
from recio.records.index_format import sibling_index_path
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.writer import IndexedRecordWriter

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], None]]

#: kinds of record a rewrite with ``images_only`` leaves out
_DROPPED_KINDS = ("header", "identity", "not_an_image")


@dataclass
class RepackResult:
    """What :func:`repack` wrote and what it left out."""

    rec_path: str
    idx_path: str
    records_in: int = 0
    records_out: int = 0
    bytes_out: int = 0
    dropped: Dict[str, int] = field(default_factory=lambda: dict.fromkeys(_DROPPED_KINDS, 0))
    shuffled: bool = False
    seed: Optional[int] = None
    seconds: float = 0.0

    def to_dict(self) -> Dict[str, Any]:
        return {"rec_path": self.rec_path, "idx_path": self.idx_path,
                "records_in": self.records_in, "records_out": self.records_out,
                "bytes_out": self.bytes_out, "dropped": dict(self.dropped),
                "shuffled": self.shuffled, "seed": self.seed,
                "seconds": round(self.seconds, 3)}


def output_pair(out: PathLike) -> Tuple[str, str]:
    """``(OUT.rec, OUT.idx)`` for a prefix ``OUT`` or a path ``OUT.rec``."""
    out = os.fspath(out)
    rec = out if out.endswith(".rec") else out + ".rec"
    return rec, sibling_index_path(rec)


def record_kind(head: bytes, position: int) -> str:
    """``"image"``, or why the record is not one: ``"header"`` (the first record of the face
    layout: no image, labels ``[a, b]`` with ``1 <= a <= b``), ``"identity"`` (another record
    holding only labels) or ``"not_an_image"``. ``head`` is the record's first bytes: at least
    the image header, its label vector and 12 bytes of payload when the record has them."""
    if len(head) < IR_SIZE:
        return "not_an_image"
    flag = IR_STRUCT.unpack_from(head, 0)[0]
    body = IR_SIZE + 4 * flag if 0 < flag < (1 << 20) else IR_SIZE
    if image_format(head, body) is not None:
        return "image"
    if flag > 0 and len(head) <= body:
        if position == 0 and flag >= 2:
            a, b = np.frombuffer(head, "<f4", count=2, offset=IR_SIZE)
            if 1 <= a <= b:
                return "header"
        return "identity"
    return "not_an_image"


def repack(rec_path: PathLike, out: PathLike, *, images_only: bool = True,
           shuffle: bool = False, seed: Optional[int] = None,
           idx_path: Optional[PathLike] = None, force: bool = False,
           progress: Progress = None) -> RepackResult:
    """Write ``OUT.rec`` + ``OUT.idx`` from ``rec_path``'s records in ``.idx`` order (or in a
    permutation seeded by ``seed`` with ``shuffle``), leaving out every record that holds no
    image when ``images_only``. Keys are ``0..n-1`` in output order; record bytes are unchanged.

    The input is never written over and an existing output is replaced only with ``force``
    (:class:`~recio.errors.OutputExistsError`); nothing appears unless the whole rewrite
    succeeded. ``progress(n)`` is called with the number of records handled.
    """
    start = time.monotonic()
    rec_path = os.fspath(rec_path)
    out_rec, out_idx = output_pair(out)
    given_idx = None if idx_path is None else os.fspath(idx_path)
    inputs = [rec_path, given_idx or sibling_index_path(rec_path)]
    check_outputs([out_rec, out_idx], inputs, force=force)
    result = RepackResult(out_rec, out_idx, shuffled=shuffle, seed=seed)
    index = index_for(rec_path, given_idx)
    offsets = index.offsets
    result.records_in = len(offsets)
    with RecordReader(rec_path) as reader:
        keep = np.ones(len(offsets), dtype=bool)
        if images_only:
            for i, offset in enumerate(offsets.tolist()):
                kind = record_kind(_explained(read_head, reader, index, offset), i)
                if kind != "image":
                    keep[i] = False
                    result.dropped[kind] += 1
        order = offsets[keep]
        if len(order) == 0 and result.records_in:
            raise RecordIOError(f"holds no image record (of {result.records_in}); nothing "
                                "was written", path=rec_path)
        if shuffle:
            order = order[np.random.default_rng(seed).permutation(len(order))]
        with IndexedRecordWriter(out_rec, out_idx) as writer:
            for key, offset in enumerate(order.tolist()):
                writer.write(key, _explained(RecordReader.read_at, reader, index, offset))
                if progress is not None:
                    progress(1)
            result.bytes_out = writer.tell()
    result.records_out = len(order)
    result.seconds = time.monotonic() - start
    return result


def _explained(read: Callable[[Any, int], bytes], reader: RecordReader, index: Any,
               offset: int) -> bytes:
    """``read(reader, offset)``; a failure names its culprit (``explain_indexed_read``)."""
    try:
        return read(reader, offset)
    except RecordIOError as exc:
        raise explain_indexed_read(reader, index, offset, exc) from None
