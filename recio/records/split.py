"""InputSplit: part k of n of one logical byte stream made of several ``.rec`` files.

This reproduces dmlc-core's ``InputSplitBase::ResetPartition`` + ``RecordIOSplitter``, which is
what MXNet's ``ImageRecordIter(num_parts=n, part_index=k)`` reads:

* the files (empty ones skipped) form one stream of ``T`` bytes;
* ``step = ceil(T / n)`` rounded up to a multiple of 4; part k covers the nominal bytes
  ``[min(k*step, T), min((k+1)*step, T))``;
* both ends move forward to the next *record head* (``framing.find_record_head``) inside the file
  that holds the offset; reaching that file's end means "the start of the next file".

A record belongs to the part that holds its head, so for every n every record is read by exactly
one part, in file order. Finding a boundary reads only a few KB around it (by position: ``portable.read_at``); a part
is read through ``RecordReader`` (a memory map: only the pages of the part are touched), so a
damaged part raises exactly what any other reader raises.

An *indexed* split (``balance="records"``) uses the ``.idx`` files instead and gives each part
``ceil(N / n)`` records, like dmlc's ``IndexedRecordIOSplitter``; ``shuffle=True`` then reads a
part in a permutation seeded by ``(seed, epoch, part_index)``.
"""
from __future__ import annotations

import bisect
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

import numpy as np

from recio import portable, storage
from recio.errors import ConcurrentUseError, IndexFileError
from recio.records import framing
from recio.records.cache.shard_cache import READ_AHEAD, ShardCache
from recio.records.closed import check_open
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.source import Source, expand_source
from recio.storage import RemoteFile, StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

#: default size of one read while streaming a part (and the largest boundary-search window)
DEFAULT_CHUNK_SIZE = 4 << 20
#: first window read when looking for a record head after a nominal boundary
_PROBE_SIZE = 4096


class FileSpan(NamedTuple):
    """The bytes ``[start, end)`` of file ``path`` that a part reads (offsets inside that file)."""

    path: str
    start: int
    end: int


def nominal_range(total: int, part_index: int, num_parts: int) -> Tuple[int, int]:
    """Part ``part_index`` of ``num_parts`` before moving to record heads (dmlc's arithmetic).

    ``step = ceil(total / num_parts)`` rounded up to a multiple of 4 (a record head is 4-aligned).
    """
    check_part(part_index, num_parts)
    step = -(-total // num_parts)
    step = (step + 3) & ~3
    return min(part_index * step, total), min((part_index + 1) * step, total)


def record_range(count: int, part_index: int, num_parts: int) -> Tuple[int, int]:
    """Records ``[lo, hi)`` of part ``part_index`` when ``count`` records are split into
    ``num_parts`` parts of ``ceil(count / num_parts)`` records (dmlc's indexed split)."""
    check_part(part_index, num_parts)
    step = -(-count // num_parts) if count else 0
    return min(part_index * step, count), min((part_index + 1) * step, count)


def check_part(part_index: int, num_parts: int) -> None:
    """Reject a part number outside ``0 <= part_index < num_parts``."""
    if num_parts < 1:
        raise ValueError(f"num_parts must be at least 1, got {num_parts}")
    if not 0 <= part_index < num_parts:
        raise ValueError(f"part_index must be in 0..{num_parts - 1}, got {part_index}")


def seek_record_head(fd: Any, file_size: int, pos: int,
                     max_window: int = DEFAULT_CHUNK_SIZE) -> int:
    """Offset (inside the file) of the first record head at or after ``pos``; ``file_size`` if none.

    Reads windows of 4 KB, doubling up to ``max_window``, each overlapping the next by 7 bytes so
    a head straddling two windows is found. The head test is ``framing.find_record_head``.
    ``fd``: a file descriptor, or a ``RemoteFile`` (one ranged GET per window).
    """
    pread = fd.pread if isinstance(fd, RemoteFile) else (lambda n, at: portable.read_at(fd, n, at))
    window = _PROBE_SIZE
    while pos < file_size:
        n = min(window, file_size - pos)
        buf = pread(n + framing.HEADER_SIZE - 1, pos)
        found = framing.find_record_head(buf, 0, n, base=pos)
        if found >= 0:
            return pos + found
        pos += n
        window = min(window * 2, max(max_window, _PROBE_SIZE))
    return file_size


class SourceLayout:
    """The files of a source as one stream: paths, sizes and start offsets (empty files dropped).

    ``shard_cache`` (a ``recio.records.cache.shard_cache.ShardCache``): the sizes of a manifest's
    URLs come from the manifest, and record heads are looked for in the cache's local copies
    (downloaded for it, where the cache's limit holds the whole source)."""

    def __init__(self, source: Source, storage_options: StorageOptions = None,
                 shard_cache: Optional[ShardCache] = None) -> None:
        self.storage_options = storage_options
        self.shard_cache = shard_cache
        paths = expand_source(source, storage_options, shard_cache)
        sizes = [shard_cache.size(p) if shard_cache is not None and storage.is_url(p)
                 else storage.size(p, storage_options) for p in paths]
        self.paths = [p for p, s in zip(paths, sizes) if s > 0]
        self.sizes = [s for s in sizes if s > 0]
        self.starts = [0]
        for s in self.sizes:
            self.starts.append(self.starts[-1] + s)
        self.total = self.starts[-1]

    def file_of(self, pos: int) -> int:
        """Index of the file holding global offset ``pos`` (``len(paths)`` at the very end)."""
        return bisect.bisect_right(self.starts, pos) - 1

    def to_head(self, pos: int, max_window: int) -> int:
        """Move global offset ``pos`` forward to the next record head (dmlc's rule, above)."""
        i = self.file_of(pos)
        if i >= len(self.paths) or pos == self.starts[i]:
            return pos
        path, size, at = self.paths[i], self.sizes[i], pos - self.starts[i]
        if storage.is_url(path):
            copy = None
            if self.shard_cache is not None:  # the parts on both sides read the file anyway:
                cache = self.shard_cache      # download it, where the cache holds the source
                whole = cache.limit is None or cache.limit >= self.total
                copy = cache.open(path, cached_only=not whole)
            if copy is None:  # a ranged GET or two
                with RemoteFile(path, self.storage_options, size=size) as remote:
                    return self.starts[i] + seek_record_head(remote, size, at, max_window)
            with copy:
                return self.starts[i] + seek_record_head(copy.fileno(), size, at, max_window)
        fd = storage.open_regular_fd(path)
        try:
            return self.starts[i] + seek_record_head(fd, size, at, max_window)
        finally:
            os.close(fd)

    def spans(self, begin: int, end: int) -> List[FileSpan]:
        """The per-file pieces of the global byte range ``[begin, end)``."""
        out = []
        for i, path in enumerate(self.paths):
            lo, hi = max(begin, self.starts[i]), min(end, self.starts[i + 1])
            if lo < hi:
                out.append(FileSpan(path, lo - self.starts[i], hi - self.starts[i]))
        return out


def load_record_offsets(layout: SourceLayout,
                  idx_paths: Optional[Sequence[Optional[PathLike]]]) -> List[Tuple[int, int]]:
    """(file number, offset) of every record, from the ``.idx`` files (scanning where one is
    missing)."""
    if idx_paths is None:
        idx_paths = [None] * len(layout.paths)
    elif len(idx_paths) != len(layout.paths):
        raise ValueError(f"{len(idx_paths)} index files given for {len(layout.paths)} "
                         f"record files")
    records: List[Tuple[int, int]] = []
    for i, (rec, idx) in enumerate(zip(layout.paths, idx_paths)):
        index = index_for(rec, idx, None, rec_size=layout.sizes[i], warn_on_scan=True,
                          storage_options=layout.storage_options,
                          shard_cache=layout.shard_cache)
        if index.path is not None:
            in_order = index.offsets
            order = np.argsort(in_order, kind="stable")
            offsets = in_order[order]
            same: Union[np.ndarray, List[int]] = (
                np.flatnonzero(offsets[1:] == offsets[:-1]) if len(offsets) > 1 else [])
            if len(same):
                first, second = sorted(int(order[j]) for j in (same[0], same[0] + 1))
                raise IndexFileError(
                    f"entries {first + 1} and {second + 1} both point at the record at byte "
                    f"{int(offsets[same[0]])}; rebuild the index with `recio index`",
                    path=index.path, line=second + 1)
        else:
            offsets = index.offsets
        records.extend((i, off) for off in offsets.tolist())
    return records


class InputSplit:
    """Part ``part_index`` of ``num_parts`` of the records in ``source``, read as MXNet would.

    ``source``: a path, a list of paths, a ``;``-joined string, a directory (its ``*.rec``) or a
    glob. Iterating yields record payloads (``bytes``) in file order (or shuffled, see below);
    ``read()``/``reset()`` give the same as a cursor. ``spans`` is the byte range read in each file;
    ``count_records()`` hops over record headers only.

    ``balance="records"`` splits by record count using the ``.idx`` beside each file (or
    ``idx_paths``, one per file); ``shuffle=True`` reads a part in a permutation of its records
    that depends on ``(seed, epoch, part_index)``: ``reset()`` moves to the next epoch,
    ``set_epoch(e)`` picks one.

    URLs are streamed, or with ``cache_dir`` (or ``RECIO_CACHE_DIR``) read from local copies
    of the whole files kept there, at most ``cache_limit`` bytes
    (``recio.records.cache.shard_cache``): the next file is downloaded while one is read.

    ``close()`` (or leaving ``with``) ends the split: every later call raises
    :class:`~recio.errors.ClosedError` naming its files, and so does pickling it. ``read()`` is
    one thread's at a time (another thread's ``read()`` meanwhile raises
    :class:`~recio.errors.ConcurrentUseError`); iterating gives each loop its own position.
    """

    #: set by ``close()``
    _closed = False
    #: a ``read()`` runs
    _reading = False

    def __init__(self, source: Source, part_index: int = 0, num_parts: int = 1, *,
                 chunk_size: int = DEFAULT_CHUNK_SIZE, balance: str = "bytes",
                 idx_paths: Optional[Sequence[Optional[PathLike]]] = None, shuffle: bool = False,
                 seed: int = 0, epoch: int = 0, storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None,
                 _layout: Optional[SourceLayout] = None,
                 _bounds: Optional[Tuple[int, int]] = None,
                 _records: Optional[List[Tuple[int, int]]] = None) -> None:
        check_part(part_index, num_parts)
        if chunk_size < framing.HEADER_SIZE:
            raise ValueError(f"chunk_size must be at least {framing.HEADER_SIZE} bytes (one record "
                             f"header), got {chunk_size}")
        if balance not in ("bytes", "records"):
            raise ValueError(f"balance must be 'bytes' or 'records', got {balance!r}")
        self.part_index, self.num_parts = part_index, num_parts
        self.chunk_size, self.balance = chunk_size, balance
        self.shuffle, self.seed, self.epoch = shuffle, seed, epoch
        #: the source's files as one byte stream (what ``spans`` and the part bounds refer to)
        self.layout = _layout if _layout is not None else SourceLayout(
            source, storage_options, ShardCache.configured(cache_dir, cache_limit,
                                                           storage_options))
        self.storage_options = storage_options
        self.shard_cache = self.layout.shard_cache
        self._records: Optional[List[Tuple[int, int]]] = None  # (file number, offset) in this part
        if balance == "records":
            everything = _records if _records is not None else load_record_offsets(self.layout,
                                                                                idx_paths)
            self.begin, self.end, self._records = _record_bounds(self.layout, everything,
                                                                 part_index, num_parts)
        elif _bounds is not None:
            self.begin, self.end = _bounds
        else:
            lo, hi = nominal_range(self.layout.total, part_index, num_parts)
            self.begin = self.layout.to_head(lo, chunk_size)
            self.end = self.layout.to_head(hi, chunk_size)
        self._cursor: Optional[Iterator[bytes]] = None

    # -- description -------------------------------------------------------------------------
    @property
    def files(self) -> List[str]:
        """All (non-empty) input files, in stream order."""
        return list(self.layout.paths)

    @property
    def total_size(self) -> int:
        """Bytes in all input files together."""
        return self.layout.total

    @property
    def spans(self) -> List[FileSpan]:
        """The byte range this part reads in each file it touches."""
        return self.layout.spans(self.begin, self.end)

    @property
    def nbytes(self) -> int:
        """Bytes in this part (record framing included)."""
        return self.end - self.begin

    def _check_open(self) -> None:
        check_open(self._closed, "InputSplit", ";".join(self.layout.paths) or None)

    def count_records(self) -> int:
        """Number of records in this part (from the index, or by hopping over record headers)."""
        self._check_open()
        if self._records is not None:
            return len(self._records)
        return sum(sum(1 for _ in record_heads(s.path, s.start, s.end, self.storage_options,
                                               self.shard_cache))
                   for s in self.spans)

    def record_offsets(self) -> List[Tuple[str, int]]:
        """``(path, offset)`` of each record head of this part, in reading order."""
        self._check_open()
        if self._records is not None:
            return [(self.layout.paths[i], off) for i, off in self._ordered_records()]
        out = [(s.path, off) for s in self.spans
               for off in record_heads(s.path, s.start, s.end, self.storage_options,
                                       self.shard_cache)]
        if self.shuffle:
            out = [out[j] for j in self._permutation(len(out))]
        return out

    # -- reading -----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[bytes]:
        """All records of the part, from its start (in this epoch's order when shuffling)."""
        self._check_open()
        return (record for _, _, record in self._records_with_offsets())

    def records_with_offsets(self) -> Iterator[Tuple[str, int, bytes]]:
        """``(path, offset, payload)`` of every record of the part, in the order ``iter`` gives
        (for messages that name where a record is)."""
        self._check_open()
        return self._records_with_offsets()

    def _records_with_offsets(self) -> Iterator[Tuple[str, int, bytes]]:
        if not self.shuffle:
            spans = self.spans
            ahead = None if self.shard_cache is None else \
                self.shard_cache.prefetch([s.path for s in spans], ahead=READ_AHEAD)
            try:
                for n, span in enumerate(spans):
                    if ahead is not None:
                        ahead.reached(n)
                    for offset, record in _iter_span_with_offsets(
                            span.path, span.start, span.end, self.storage_options,
                            self.shard_cache):
                        yield span.path, offset, record
            finally:
                if ahead is not None:
                    ahead.stop()
            return
        readers: dict = {}
        try:
            for path, off in self.record_offsets():
                reader = readers.get(path)
                if reader is None:
                    reader = readers[path] = RecordReader(
                        path, storage_options=self.storage_options, shard_cache=self.shard_cache)
                yield path, off, reader.read_at(off)
        finally:
            for reader in readers.values():
                reader.close()

    def read(self) -> Optional[bytes]:
        """The next record of the part, or ``None`` at its end (MXNet's ``NextRecord``)."""
        if self._reading:
            raise ConcurrentUseError("read() from two threads at once would hand out records "
                                     "twice or skip them; give each thread its own InputSplit",
                                     ";".join(self.layout.paths) or None)
        self._reading = True
        try:
            if self._cursor is None:
                self._cursor = iter(self)
            return next(self._cursor, None)
        finally:
            self._reading = False

    def reset(self, epoch: Optional[int] = None) -> None:
        """Restart the part; when shuffling, go to ``epoch`` (default: the next one)."""
        self._check_open()
        self._release()
        if self.shuffle:
            self.epoch = self.epoch + 1 if epoch is None else epoch
        elif epoch is not None:
            self.epoch = epoch

    def set_epoch(self, epoch: int) -> None:
        """Choose the shuffling epoch (like ``DistributedSampler.set_epoch``) and restart."""
        self.reset(epoch)

    def close(self) -> None:
        """Release the files a ``read()`` left open mid-part (iterating with ``for`` releases
        them at the end of the part, or when the loop is left) and end the split: any later
        call raises ``ClosedError``. Closing again does nothing."""
        self._release()
        self._closed = True

    def _release(self) -> None:
        if self._cursor is not None:
            self._cursor.close()  # type: ignore[attr-defined]
        self._cursor = None

    def __enter__(self) -> "InputSplit":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _permutation(self, n: int) -> List[int]:
        rng = np.random.default_rng([self.seed, self.epoch, self.part_index])
        return rng.permutation(n).tolist()

    def _ordered_records(self) -> List[Tuple[int, int]]:
        records = self._records or []
        if not self.shuffle:
            return records
        return [records[j] for j in self._permutation(len(records))]

    def __getstate__(self) -> dict:  # picklable for DataLoader workers: drop the open cursor
        self._check_open()
        state = self.__dict__.copy()
        state["_cursor"] = None
        return state

    def __repr__(self) -> str:
        return (f"InputSplit(part {self.part_index}/{self.num_parts}, bytes [{self.begin}, "
                f"{self.end}) of {self.total_size}, {len(self.layout.paths)} files)")

    # -- all parts at once -------------------------------------------------------------------
    @classmethod
    def all_parts(cls, source: Source, num_parts: int, **kwargs: Any) -> List["InputSplit"]:
        """The ``num_parts`` parts of ``source``, each boundary found once (for tools and tests).

        ``kwargs`` are those of ``InputSplit`` (``balance``, ``idx_paths``, ``chunk_size``, ...).
        """
        chunk_size = kwargs.get("chunk_size", DEFAULT_CHUNK_SIZE)
        options = kwargs.get("storage_options")
        layout = SourceLayout(source, options, ShardCache.configured(
            kwargs.pop("cache_dir", None), kwargs.pop("cache_limit", None), options))
        if kwargs.get("balance", "bytes") == "records":
            records = load_record_offsets(layout, kwargs.pop("idx_paths", None))
            return [cls(source, k, num_parts, _layout=layout, _records=records, **kwargs)
                    for k in range(num_parts)]
        check_part(0, num_parts)
        points = [layout.to_head(nominal_range(layout.total, k, num_parts)[0], chunk_size)
                  for k in range(num_parts)] + [layout.total]
        return [cls(source, k, num_parts, _layout=layout, _bounds=(points[k], points[k + 1]),
                    **kwargs) for k in range(num_parts)]


def _record_bounds(layout: SourceLayout, records: List[Tuple[int, int]], part_index: int,
                   num_parts: int) -> Tuple[int, int, List[Tuple[int, int]]]:
    """Global byte range and records of part k when parts hold ``ceil(N / n)`` records each."""
    n = len(records)
    lo, hi = record_range(n, part_index, num_parts)
    mine = records[lo:hi]

    def start_of(j: int) -> int:
        if j >= n:
            return layout.total
        i, off = records[j]
        return layout.starts[i] + off

    return start_of(lo), start_of(hi), mine


# -- a description of all the parts ------------------------------------------------------------
@dataclass
class PartSummary:
    """One part of a split: its global byte range ``[begin, end)``, its record count (None when
    not counted), the piece of each file it reads, and where it was written (by ``reshard``)."""

    part_index: int
    begin: int
    end: int
    records: Optional[int]
    spans: List[FileSpan]
    rec_path: Optional[str] = None
    idx_path: Optional[str] = None

    @property
    def nbytes(self) -> int:
        """Bytes in this part (record framing included)."""
        return self.end - self.begin

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict (``part``, ``begin``, ``end``, ``bytes``, ``records``, ``spans``,
        and ``output``/``output_idx`` when the part was written)."""
        out: Dict[str, Any] = {
            "part": self.part_index, "begin": self.begin, "end": self.end, "bytes": self.nbytes,
            "records": self.records,
            "spans": [{"file": s.path, "start": s.start, "end": s.end} for s in self.spans]}
        if self.rec_path is not None:
            out["output"] = self.rec_path
            out["output_idx"] = self.idx_path
        return out


@dataclass
class SplitPlan:
    """How ``num_parts`` workers partition ``files`` (one stream of ``total_bytes``), and the
    parts described (all of them, or the one asked for)."""

    files: List[str]
    total_bytes: int
    num_parts: int
    balance: str
    parts: List[PartSummary] = field(default_factory=list)

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict of the plan and its parts."""
        return {"files": list(self.files), "total_bytes": self.total_bytes,
                "num_parts": self.num_parts, "balance": self.balance,
                "parts": [p.to_dict() for p in self.parts]}


def chosen_parts(source: Source, num_parts: int, part_index: Optional[int] = None, *,
                 balance: str = "bytes", chunk_size: int = DEFAULT_CHUNK_SIZE,
                 idx_paths: Optional[Sequence[Optional[PathLike]]] = None,
                 storage_options: StorageOptions = None
                 ) -> Tuple[List[InputSplit], List[InputSplit]]:
    """``(all parts, the parts asked for)``: every part, or only ``part_index`` when given."""
    if part_index is not None:
        check_part(part_index, num_parts)
    parts = InputSplit.all_parts(source, num_parts, balance=balance, chunk_size=chunk_size,
                                 idx_paths=idx_paths, storage_options=storage_options)
    return parts, (parts if part_index is None else [parts[part_index]])


def plan_split(source: Source, num_parts: int, part_index: Optional[int] = None, *,
               balance: str = "bytes", chunk_size: int = DEFAULT_CHUNK_SIZE,
               idx_paths: Optional[Sequence[Optional[PathLike]]] = None, count: bool = True,
               progress: Optional[Callable[[int], Any]] = None,
               storage_options: StorageOptions = None) -> SplitPlan:
    """Describe the parts of ``source`` that ``InputSplit`` gives ``num_parts`` workers.

    Every part, or only ``part_index``. With ``count`` each part's records are counted (by
    hopping over record headers, or from the index with ``balance="records"``), which reads the
    whole part; without it only the boundaries are read. ``progress(1)`` is called after each
    part. A damaged part raises ``RecordIOError`` with the file and byte offset.
    """
    parts, chosen = chosen_parts(source, num_parts, part_index, balance=balance,
                                 chunk_size=chunk_size, idx_paths=idx_paths,
                                 storage_options=storage_options)
    plan = SplitPlan(parts[0].files, parts[0].total_size, num_parts, balance)
    for p in chosen:
        plan.parts.append(PartSummary(p.part_index, p.begin, p.end,
                                      p.count_records() if count else None, p.spans))
        if progress is not None:
            progress(1)
    return plan


# -- record-level reading ----------------------------------------------------------------------
def record_heads(path: PathLike, start: int = 0, end: Optional[int] = None,
                 storage_options: StorageOptions = None,
                 shard_cache: Optional[ShardCache] = None) -> Iterator[int]:
    """Offsets of the record heads in ``[start, end)`` of a file, hopping over headers only.

    Raises ``RecordIOError`` (with the offset) on anything that is not a well-formed record.
    """
    with RecordReader(path, storage_options=storage_options, shard_cache=shard_cache) as reader:
        end = reader.size if end is None else min(end, reader.size)
        if start >= end:
            return
        reader.source.limit(end)
        reader.seek(start)
        for offset in reader.iter_offsets():
            if offset >= end:
                return
            yield offset


def _iter_span_with_offsets(path: PathLike, start: int, end: int,
                            storage_options: StorageOptions = None,
                            shard_cache: Optional[ShardCache] = None
                            ) -> Iterator[Tuple[int, bytes]]:
    """``(offset, payload)`` of the records whose heads lie in ``[start, end)`` of ``path``
    (see ``iter_span``); a remote object is streamed from ``start`` to ``end`` in one GET, or
    read from ``shard_cache``'s local copy."""
    if start >= end:
        return
    with RecordReader(path, storage_options=storage_options, shard_cache=shard_cache) as reader:
        reader.source.limit(end)
        reader.seek(start)
        for offset, record in reader.records_with_offsets():
            yield offset, record
            if reader.tell() >= end:  # the next record is the next part's (damage there too)
                return


def iter_span(path: PathLike, start: int, end: int,
              storage_options: StorageOptions = None) -> Iterator[bytes]:
    """Payloads of the records whose heads lie in ``[start, end)`` of ``path``.

    ``start`` must be a record head; the last record is read to its end even past ``end``.
    Records are read and checked by ``RecordReader`` (the one parser), so damage raises the same
    ``RecordIOError`` at the same offset as any other reader (a local file is memory-mapped,
    and only the pages read are touched).
    """
    for _, record in _iter_span_with_offsets(path, start, end, storage_options):
        yield record


def split_boundaries(source: Source, num_parts: int, max_window: int = DEFAULT_CHUNK_SIZE,
                     storage_options: StorageOptions = None) -> List[int]:
    """The ``num_parts + 1`` global byte offsets where the parts of ``source`` begin and end."""
    layout = SourceLayout(source, storage_options)
    check_part(0, num_parts)
    return [layout.to_head(nominal_range(layout.total, k, num_parts)[0], max_window)
            for k in range(num_parts)] + [layout.total]
