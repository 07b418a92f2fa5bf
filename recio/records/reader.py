"""``RecordReader``: sequential and by-offset reading of a RecordIO file (by key:
``recio.records.indexed``).

The reader is thin: a byte source (``recio.records.byte_sources``: a memory map, ``pread``, a
remote object with its prefetch policy, a stream) under the record walker
(``recio.records.walker``: the checked or the trusting strategy, the slow path,
resynchronisation); here are the read paths, with their position and read-ahead state. Local
files are memory-mapped and read by position, so a reader opened before ``fork()`` keeps
working in DataLoader workers and no file pointer is shared. Every framing problem raises
``RecordIOError`` naming the file and the byte offset.
"""
from __future__ import annotations

from typing import Any, Iterable, Iterator, List, Optional, Tuple

from recio.errors import ConcurrentUseError, RecordIOError
from recio.records.framing import MAGIC, MAGIC_BYTES
from recio.records.byte_sources import ByteSource, PathOrFile, open_source
from recio.records.closed import Closed, check_open
from recio.records.walker import (
    FIRST_WINDOW,
    DamageHandler,
    RecordWalker,
    Span,
    after_record,
    next_window,
    unpack_header,
)
from recio.storage import StorageOptions

#: records shorter than this are searched for a swallowed head in their own copy (``read_at``)
_SMALL_RECORD = 4096
_MAGIC_FIRST_BYTE = MAGIC_BYTES[0]


class _ByOffset:
    """The reads of a :class:`RecordReader` by byte offset, and what it counted: they touch
    no position, so any number of threads may share them (the position's reads, and the
    reader's lifecycle, are ``RecordReader``'s)."""

    path: Optional[str]
    size: int
    trust_lengths: bool
    source: ByteSource
    _buf: Any
    _walker: RecordWalker
    _read_whole: Any
    _closed: bool

    @property
    def skipped_bytes(self) -> int:
        """Bytes passed over as damage in skip mode (still readable after ``close()``)."""
        return self._walker.skipped_bytes

    @property
    def errors(self) -> List[RecordIOError]:
        """The errors of the damaged regions passed over in skip mode (the first 10,000; still
        readable after ``close()``)."""
        return self._walker.errors

    @property
    def buffer(self) -> Any:
        """The memory-mapped file (``bytes`` for an in-memory file, ``None`` for a stream)."""
        return self._buf

    def span_bytes(self, spans: List[Span]) -> bytes:
        """The record whose part spans ``iter_spans`` gave (a copy; readers without a map,
        e.g. of a remote object, hand out records this way)."""
        check_open(self._closed, "reader", self.path)
        return self._walker.join(spans)

    def read_at(self, offset: int) -> bytes:
        """The record whose first part starts at byte ``offset``; the position is unchanged."""
        buf = self._buf
        if buf is not None and 0 <= offset <= self.size - 8:
            magic, lrec = unpack_header(buf, offset)
            end = offset + 8 + lrec
            # framing.check_part_header for a small whole record, copied for speed; its data
            # (and a word running into the padding) must hold no aligned magic: without the
            # magic's first byte (a memchr) it holds none
            if magic == MAGIC and lrec < _SMALL_RECORD and end <= self.size and not offset & 3:
                data = buf[offset + 8:end]
                if self.trust_lengths or _MAGIC_FIRST_BYTE not in data or (
                        MAGIC_BYTES not in data and (
                            not lrec & 3 or buf[end & ~3:(end & ~3) + 4] != MAGIC_BYTES)):
                    return data
        if buf is None:  # a remote object given its index: the record's extent, one GET
            self.source.fetch_record(int(offset))
        record = self._read_whole(offset)
        if record is not None:
            return record
        spans, _ = self._walker.locate(int(offset))
        return self._walker.join(spans)

    def view_at(self, offset: int) -> Any:
        """The record at ``offset`` as a read-only zero-copy ``memoryview`` of the map where it
        is a single part (a ``bytes`` copy otherwise), checked like ``read_at``."""
        check_open(self._closed, "reader", self.path)
        end = self._walker.check_whole(offset)
        if end >= 0:
            return memoryview(self._buf)[offset + 8:end]
        spans, _ = self._walker.locate(int(offset))
        return self._walker.join(spans)

    def peek_at(self, offset: int, n: int) -> bytes:
        """The first ``n`` bytes of the record at ``offset`` (e.g. its image header), without
        copying the rest of a large record."""
        check_open(self._closed, "reader", self.path)
        end = self._walker.check_whole(offset)
        if end >= 0:
            return self._buf[offset + 8:min(offset + 8 + n, end)]
        return self.read_at(offset)[:n]

    def read_many_at(self, offsets: Iterable[int]) -> List[bytes]:
        """The records at each of ``offsets`` (a batch of ``read_at``)."""
        offsets = [int(o) for o in offsets]
        self.source.fetch_records(offsets)  # a remote object: coalesced, concurrent GETs
        return [self.read_at(offset) for offset in offsets]

    def evicted(self) -> bool:
        """Whether the local copy a ``shard_cache`` gave this reader has left the cache since
        (a limit evicted it): the reader still reads it, and frees its disk space when closed.
        False for any other reader."""
        return self.source.evicted()


class RecordReader(_ByOffset):
    """Reads a RecordIO file: iterate for records, ``read()`` for the next, ``read_at()`` by offset.

    Every record is checked before it is returned: its part headers (``framing.check_part_header``)
    and its data, which must not hold a magic word at a 4-aligned offset (a length field that
    swallows the records after it would otherwise return them as one garbage record). Damage
    raises ``RecordIOError`` with the file and byte offset.

    ``on_error="skip"`` instead resynchronises at the next record head after damage, counting
    the bytes passed over in ``skipped_bytes``, keeping the errors in ``errors`` (the first
    10,000) and calling ``on_damage(start, end, error)`` for each region passed over.
    ``trust_lengths=True`` is the fast mode: it does not look inside record data for swallowed
    records (as MXNet reads); header checks stay.
    ``shard_cache`` (a ``recio.records.cache.shard_cache.ShardCache``): a URL is read from the
    cache's checked local copy of the whole object (mapped like a local file; errors still name the
    URL), downloaded first when the cache has none.

    ``source`` is the ``recio.records.byte_sources.ByteSource`` read; a remote object's
    read-ahead hints go to it (``reader.source.fetch(ranges)``, ``.limit(end)``,
    ``.use_index(index)``).

    Threads: reads by offset (``read_at``, ``view_at``, ``peek_at``, ``read_many_at``) may be
    shared by any number of threads. The position (``read()``, ``read_batch()``, iterating)
    is one thread's at a time: a ``read()`` while another thread is inside one, or a
    ``read()``, ``read_batch()`` or second iteration while an iteration is under way (in any
    thread), raises :class:`~recio.errors.ConcurrentUseError` (it would hand out records twice
    or skip them). After ``close()`` every method raises
    :class:`~recio.errors.ClosedError` (``I/O on a closed reader: PATH``), and so does
    pickling.
    """

    #: set by ``close()``
    _closed = False
    #: a ``read()``/``read_batch()`` runs, or an iteration is under way (see the class doc)
    _busy = False

    def __init__(self, source: PathOrFile, on_error: str = "raise", *,
                 trust_lengths: bool = False, on_damage: Optional[DamageHandler] = None,
                 storage_options: StorageOptions = None, shard_cache: Any = None) -> None:
        if on_error not in ("raise", "skip"):
            raise ValueError(f"on_error must be 'raise' or 'skip', not {on_error!r}")
        self.on_error = on_error
        self.trust_lengths = trust_lengths
        self.storage_options = storage_options
        self.shard_cache = shard_cache
        self.source: ByteSource = open_source(source, storage_options, shard_cache)
        self.path = self.source.path
        self.size = self.source.size
        self._buf: Any = self.source.buffer  # the map or bytes when addressable, else None
        walker = self._walker = RecordWalker(
            self.source, trust_lengths=trust_lengths, on_error=on_error, on_damage=on_damage,
            storage_options=storage_options)
        # the walker's steps for one record, bound once: read() calls them for every record
        self._read_whole, self._large_at = walker.read_whole, walker.large_at
        self._pos = 0
        self._clear_ahead()

    def _claim(self) -> None:
        """Take the position for one ``read()`` or one whole iteration (see the class doc)."""
        if self._busy:
            raise self._shared()
        check_open(self._closed, "reader", self.path)
        self._busy = True

    def _shared(self) -> ConcurrentUseError:
        return ConcurrentUseError(
            "its position is used by two threads (or two iterations) at once, which would hand "
            "out records twice or skip them; give each thread its own reader, or read by "
            "offset or key (read_at, reader[key]), which threads may share", self.path)

    def _clear_ahead(self) -> None:
        """Forget the records ``read()`` checked ahead (after a seek or reset)."""
        self._ahead_heads: List[int] = []
        self._ahead_ends: List[int] = []
        self._ahead_next: List[int] = []
        self._ahead_i = 0
        self._window = 0  # bytes read() checks ahead; 0: one record (after a seek)
        self._sequential_at = -1  # where read() left off: reading on from here is sequential

    # -- public API ------------------------------------------------------------------------
    def records_with_offsets(self) -> Iterator[Tuple[int, bytes]]:
        """Yield ``(offset, record)`` from the current position to the end of the file."""
        check_open(self._closed, "reader", self.path)
        return self._scan(True)

    def __iter__(self) -> Iterator[bytes]:
        check_open(self._closed, "reader", self.path)
        return self._scan(False)

    def _scan(self, with_offsets: bool) -> Iterator[Any]:
        self._claim()
        try:
            buf, walker = self._buf, self._walker
            window = FIRST_WINDOW
            remote = self.source.remote
            record: Optional[bytes]
            while True:
                pos = self._pos
                if pos >= self.size:
                    return
                self._clear_ahead()
                if remote:  # whole runs of records from the stream's blocks, checked at once
                    view, heads, ends, nxt = walker.stream_walk(pos)
                    if heads:
                        for head, end, after in zip(heads, ends, heads[1:] + [nxt]):
                            self._pos = after
                            record = bytes(view[head - pos + 8:end - pos])
                            yield (head, record) if with_offsets else record
                        continue
                record = walker.large_at(pos)
                if record is not None:
                    self._pos = after_record(pos, len(record), self.size)
                    yield (pos, record) if with_offsets else record
                    continue
                heads, ends, nxt = walker.walk(pos, window, copying=True)
                window = next_window(window, pos, nxt)
                if heads:
                    for head, end, after in zip(heads, ends, heads[1:] + [nxt]):
                        self._pos = after
                        yield (head, buf[head + 8:end]) if with_offsets else buf[head + 8:end]
                    continue
                offset, spans, self._pos = walker.next_spans(pos)
                if offset is None:
                    return
                record = walker.join(spans)
                yield (offset, record) if with_offsets else record
        finally:
            self._busy = False

    def iter_spans(self) -> Iterator[Tuple[int, List[Span]]]:
        """Yield ``(offset, part spans)`` of every record from the current position, checked
        like any read but copying nothing (the spans are ``(start, end)`` of each part's data)."""
        self._claim()
        try:
            window = FIRST_WINDOW
            while self._pos < self.size:
                self._clear_ahead()
                start = self._pos
                offsets, spans, nxt = self._walker.spans_from(start, window)
                if not offsets:
                    self._pos = nxt
                    return
                window = next_window(window, start, nxt)
                for i, offset in enumerate(offsets):
                    self._pos = offsets[i + 1] if i + 1 < len(offsets) else nxt
                    yield offset, spans[i]
        finally:
            self._busy = False

    def read(self) -> Optional[bytes]:
        """The next record, or ``None`` at the end of the file."""
        if self._busy:  # another thread is inside read(), or an iteration is under way
            raise self._shared()
        self._busy = True  # no thread switch since the test above (no call between them)
        try:
            i = self._ahead_i
            heads = self._ahead_heads
            if i < len(heads) and heads[i] == self._pos:
                self._ahead_i = i + 1
                self._pos = self._sequential_at = self._ahead_next[i]
                return self._buf[heads[i] + 8:self._ahead_ends[i]]
            return self._read_window()
        finally:
            self._busy = False

    def _read_window(self) -> Optional[bytes]:
        """``read()`` when nothing checked is pending: after a seek one record, and while the
        reads stay sequential a window ahead that grows each time; or the slow path."""
        check_open(self._closed, "reader", self.path)
        pos = self._pos
        if pos >= self.size:
            return None
        self._ahead_heads = []
        if pos != self._sequential_at:
            self._window = 0
        if self._window == 0:  # random access: check just this record
            self._window = FIRST_WINDOW
            record = self._read_whole(pos)
            if record is not None:
                self._pos = self._sequential_at = after_record(pos, len(record), self.size)
                return record
        else:
            record = self._large_at(pos)
            if record is not None:
                self._pos = self._sequential_at = after_record(pos, len(record), self.size)
                return record
            heads, ends, nxt = self._walker.walk(pos, self._window, copying=True)
            self._window = next_window(self._window, pos, nxt)
            if heads:
                self._ahead_heads, self._ahead_ends = heads, ends
                self._ahead_next = heads[1:] + [nxt]
                self._ahead_i = 1
                self._pos = self._sequential_at = self._ahead_next[0]
                return self._buf[pos + 8:ends[0]]
        offset, spans, self._pos = self._walker.next_spans(pos)
        self._sequential_at = self._pos
        return None if offset is None else self._walker.join(spans)

    def read_batch(self, n: int) -> List[bytes]:
        """Up to ``n`` next records as a list (fewer at the end): the fastest sequential read.

        Damage after some records of the batch ends the batch early; the next call raises.
        """
        self._claim()
        try:
            self._clear_ahead()
            out, self._pos = self._walker.batch(self._pos, n)
        finally:
            self._busy = False
        return out

    def iter_offsets(self) -> Iterator[int]:
        """Offsets of every record head from the current position, checked like any read but
        copying no payloads (what ``build_index`` uses)."""
        self._claim()
        try:
            window = FIRST_WINDOW
            while self._pos < self.size:
                self._clear_ahead()
                heads, _, nxt = self._walker.walk(self._pos, window)
                window = next_window(window, self._pos, nxt)
                if heads:
                    for head, after in zip(heads, heads[1:] + [nxt]):
                        self._pos = after
                        yield head
                    continue
                offset, _, self._pos = self._walker.next_spans(self._pos)
                if offset is None:
                    return
                yield offset
        finally:
            self._busy = False

    def seek(self, offset: int) -> None:
        """Move to byte ``offset`` (which should be a record head, e.g. from an ``.idx``)."""
        check_open(self._closed, "reader", self.path)
        offset = int(offset)
        if not 0 <= offset <= self.size:
            raise RecordIOError(f"seek outside the {self.size}-byte file", self.path, offset)
        self._pos = offset

    def tell(self) -> int:
        """Byte offset of the next record to be read."""
        check_open(self._closed, "reader", self.path)
        return self._pos

    def reset(self) -> None:
        """Go back to the start of the file."""
        check_open(self._closed, "reader", self.path)
        self._pos = 0
        self._clear_ahead()

    def close(self) -> None:
        """Release the memory map and the file (if the reader opened it). Every later use
        raises :class:`~recio.errors.ClosedError`; closing again does nothing."""
        if self._closed:
            return
        self._walker.close()
        self.source.close()
        self._buf = None
        self._clear_ahead()
        self._closed = True
        # what the reads go through, so that each raises ClosedError at no cost while open
        self.source = self._read_whole = self._large_at = Closed(  # type: ignore[assignment]
            "reader", self.path)

    def __enter__(self) -> "RecordReader":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        check_open(self._closed, "reader", self.path)  # it would reopen on the other side
        if not self.source.owns_file:
            raise TypeError("a RecordReader over a caller's file object cannot be pickled; "
                            "open it from a path instead")
        return {"path": self.path, "pos": self._pos, "on_error": self.on_error,
                "trust_lengths": self.trust_lengths, "storage_options": self.storage_options,
                "shard_cache": self.shard_cache}

    def __setstate__(self, state: dict) -> None:
        RecordReader.__init__(self, state["path"], on_error=state["on_error"],
                              trust_lengths=state.get("trust_lengths", False),
                              storage_options=state.get("storage_options"),
                              shard_cache=state.get("shard_cache"))
        self._pos = state["pos"]
