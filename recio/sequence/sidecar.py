"""The sample-count sidecar ``PREFIX.len``: how many samples each stream of each sequence record
holds, so a reader can plan minibatches and sweeps from the index alone (no record decoded).

The sample count of a record is CNTK's: the largest stream, or the stream that
``defines_mb_size``. The sidecar sits beside ``PREFIX.idx``; :class:`recio.sequence.writer.
SequenceWriter` writes it, :func:`rebuild_sidecar` re-creates it for files written elsewhere::

    +------------+-------------+--------------+-----------+-------------+
    | "RECIOLEN" | u32 version | u32 nstreams | u64 nrecs | u64 recsize |   32 bytes, version = 1
    +------------+-------------+--------------+-----------+-------------+
    per stream: u16 namelen, name (utf8); zero pad to a multiple of 8
    u32 counts[nrecs][nstreams]            samples of each stream of each record, in index order

``recsize`` is the size of the ``.rec`` the sidecar describes, to catch a stale sidecar.
"""
from __future__ import annotations

import os
import struct
from typing import List, Optional, Sequence, Tuple

import numpy as np

from recio import storage
from recio.errors import SequenceError
from recio.records.atomic import atomic_open
from recio.records.diagnose import open_checked_index
from recio.records.index_format import sibling_index_path
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.sequence.records import MAX_SAMPLES, MAX_STREAMS, PathLike, pad8, sequence_sample_counts
from recio.storage import open_regular

SIDECAR_MAGIC = b"RECIOLEN"
_SIDECAR_VERSION = 1
#: magic, version, number of streams, number of records, size of the .rec
_SIDECAR_HEADER = struct.Struct("<8sIIQQ")
_NAME_LEN = struct.Struct("<H")

def sidecar_path(rec_path: PathLike) -> str:
    """The sample-count sidecar of ``PREFIX.rec``: ``PREFIX.len``."""
    return os.path.splitext(os.fspath(rec_path))[0] + ".len"


def sidecar_bytes(stream_names: Sequence[str], counts: np.ndarray, rec_size: int) -> bytes:
    """The bytes of a sample-count sidecar (layout in the module docstring), checked first."""
    counts = np.asarray(counts)
    if counts.ndim != 2 or counts.shape[1] != len(stream_names):
        raise SequenceError(f"counts must be records x {len(stream_names)} streams, got shape "
                            f"{counts.shape}")
    if counts.size and (counts.min() < 0 or counts.max() > MAX_SAMPLES):
        raise SequenceError("sample counts must fit in uint32")
    head = [_SIDECAR_HEADER.pack(SIDECAR_MAGIC, _SIDECAR_VERSION, len(stream_names),
                                counts.shape[0], rec_size)]
    for name in stream_names:
        b = name.encode("utf-8")
        head.append(_NAME_LEN.pack(len(b)) + b)
    size = sum(len(h) for h in head)
    head.append(b"\0" * pad8(size))
    head.append(np.ascontiguousarray(counts, dtype="<u4").tobytes())
    return b"".join(head)


def write_sidecar(path: PathLike, stream_names: Sequence[str], counts: np.ndarray,
                  rec_size: int, *, fsync: bool = False) -> None:
    """Write a sample-count sidecar atomically (``counts``: records x streams)."""
    data = sidecar_bytes(stream_names, counts, rec_size)
    with atomic_open(path, "wb", fsync=fsync) as f:
        f.write(data)


def read_sidecar(path: PathLike, rec_size: Optional[int] = None,
                 num_records: Optional[int] = None) -> Tuple[List[str], np.ndarray]:
    """``(stream names, counts[records, streams])`` of a sidecar; raises :class:`SequenceError`.

    Checks magic and version, the ``.rec`` size it describes against ``rec_size`` and its record
    count against ``num_records`` (the index's) when given, the stream names (1..255 bytes of
    valid UTF-8, unique, at most 65535 of them, none for a file without records) and that the
    file is exactly as long as the header promises. Sample counts themselves are checked
    against the records when those are decoded (:class:`recio.sequence.corpora.RecordCorpus`).
    """
    path = os.fspath(path)
    with open_regular(path) as f:
        data = f.read()
    nstreams, nrecs = _sidecar_header(data, path, rec_size, num_records)
    names, pos = _sidecar_names(data, nstreams, path)
    need = pos + 4 * nrecs * nstreams
    if len(data) != need:
        raise SequenceError(f"sidecar has {len(data)} bytes, its header promises {need} "
                            f"({nrecs} records x {nstreams} streams)", path=path, offset=pos)
    counts = np.frombuffer(data, dtype="<u4", count=nrecs * nstreams, offset=pos)
    return names, counts.reshape(nrecs, nstreams)


def _sidecar_header(data: bytes, path: str, rec_size: Optional[int],
                    num_records: Optional[int]) -> Tuple[int, int]:
    """``(streams, records)`` from a sidecar's fixed header, checked against the ``.rec`` and
    its index (a stale sidecar must not plan minibatches) and against the file's length."""
    if len(data) < _SIDECAR_HEADER.size:
        raise SequenceError(f"sidecar of {len(data)} bytes is shorter than its header",
                            path=path, offset=0)
    magic, version, nstreams, nrecs, size = _SIDECAR_HEADER.unpack_from(data, 0)
    if magic != SIDECAR_MAGIC or version != _SIDECAR_VERSION:
        raise SequenceError(f"not a recio sample-count sidecar (magic {magic!r}, version "
                            f"{version}); rebuild it with recio.sequence.rebuild_sidecar",
                            path=path, offset=0)
    if rec_size is not None and size != rec_size:
        raise SequenceError(f"sidecar describes a .rec of {size} bytes but the .rec has "
                            f"{rec_size}; rebuild it with recio.sequence.rebuild_sidecar",
                            path=path, offset=24)
    if num_records is not None and nrecs != num_records:
        raise SequenceError(f"sidecar lists {nrecs} records but the index has {num_records}; "
                            f"rebuild it with recio.sequence.rebuild_sidecar",
                            path=path, offset=16)
    if nstreams > MAX_STREAMS or (nstreams == 0 and nrecs):
        raise SequenceError(f"sidecar declares {nstreams} streams for {nrecs} records; a "
                            f"sequence has 1..{MAX_STREAMS} streams", path=path, offset=12)
    # every name takes at least 3 bytes: a count this large cannot be in the file
    if _SIDECAR_HEADER.size + 3 * nstreams > len(data):
        raise SequenceError(f"sidecar declares {nstreams} stream names but has only "
                            f"{len(data)} bytes", path=path, offset=12)
    return nstreams, nrecs


def _sidecar_names(data: bytes, nstreams: int, path: str) -> Tuple[List[str], int]:
    """The sidecar's ``nstreams`` stream names and the (8-aligned) byte where its counts start;
    each name is 1..255 bytes of UTF-8 and none repeats."""
    pos = _SIDECAR_HEADER.size
    names: List[str] = []
    seen = set()
    for _ in range(nstreams):
        if pos + _NAME_LEN.size > len(data):
            raise SequenceError("sidecar truncated in its stream names", path=path, offset=pos)
        (n,) = _NAME_LEN.unpack_from(data, pos)
        raw = data[pos + 2:pos + 2 + n]
        if len(raw) != n:
            raise SequenceError(f"sidecar truncated in a stream name of {n} bytes", path=path,
                                offset=pos)
        try:
            name = raw.decode("utf-8")
        except UnicodeDecodeError:
            name = None
        if not 0 < n <= 255 or name is None or name in seen:
            raise SequenceError(f"sidecar stream name {raw[:40]!r} is empty, longer than 255 "
                                f"bytes, not UTF-8 or repeated", path=path, offset=pos)
        names.append(name)
        seen.add(name)
        pos += 2 + n
    return names, pos + pad8(pos)


def sample_counts(rec_path: PathLike, stream: Optional[str] = None) -> np.ndarray:
    """Samples per record of ``PREFIX.rec`` in index order, from the ``PREFIX.len`` sidecar.

    ``stream=None`` gives CNTK's count (the largest stream of each record); a name gives that
    stream's count (what ``defines_mb_size`` uses). No record is decoded; when ``PREFIX.idx``
    exists, the sidecar must list as many records as it does.
    """
    rec_path = os.fspath(rec_path)  # a local path or a URL
    storage.check_regular(rec_path)  # a FIFO or a device: refused as what it is
    side = sidecar_path(rec_path)
    if not storage.exists(side):
        raise SequenceError(f"no sample-count sidecar {side}; write the file with "
                            f"recio.sequence.SequenceWriter or run "
                            f"recio.sequence.rebuild_sidecar({rec_path!r})", path=rec_path)
    rec_size = storage.size(rec_path)
    idx = sibling_index_path(rec_path)
    num_records = len(open_checked_index(rec_path, idx, None, rec_size=rec_size)) \
        if storage.exists(idx) else None
    with storage.local_copy(side) as local_side:  # a URL's sidecar: downloaded (it is small)
        names, counts = read_sidecar(local_side, rec_size, num_records)
    if stream is None:
        return counts.max(axis=1) if names else np.zeros(len(counts), np.uint32)
    if stream not in names:
        raise SequenceError(f"stream {stream!r} is not in the file; it has {names}", path=side)
    return np.ascontiguousarray(counts[:, names.index(stream)])


def rebuild_sidecar(rec_path: PathLike, idx_path: Optional[PathLike] = None) -> str:
    """Re-create ``PREFIX.len`` from each record's stream table (for files written elsewhere).

    Every record must be a sequence record with the first record's streams, its sections
    filling it exactly (:func:`sequence_sample_counts`); errors name the record's offset. The
    rows follow the index ``RecordCorpus`` reads with (``recio.records.indexed.index_for``):
    ``idx_path``, else the ``.idx`` beside the file, else file order.
    """
    rec_path = os.fspath(rec_path)
    offsets = index_for(rec_path, idx_path, None).offsets.tolist()
    names: Optional[List[str]] = None
    rows = np.zeros((len(offsets), 0), np.uint32)
    reader = RecordReader(rec_path)
    try:
        for i, off in enumerate(offsets):
            try:
                counts = sequence_sample_counts(reader.read_at(off))
            except SequenceError as exc:
                raise SequenceError(exc.message, path=rec_path, offset=off) from None
            if names is None:
                names = list(counts)
                rows = np.zeros((len(offsets), len(names)), np.uint32)
            if list(counts) != names:
                raise SequenceError(f"record has streams {list(counts)}, the first had {names}; "
                                    f"all records of a file need the same streams",
                                    path=rec_path, offset=off)
            rows[i] = list(counts.values())
    finally:
        close = getattr(reader, "close", None)
        if close:
            close()
    side = sidecar_path(rec_path)
    write_sidecar(side, names or [], rows, os.path.getsize(rec_path))
    return side
