"""``recio.mx.recordio``: the drop-in for ``mxnet.recordio``.

Same classes, methods, attributes and arrays as MXNet 1.9: ``MXRecordIO(uri, flag)``,
``MXIndexedRecordIO(idx_path, uri, flag, key_type=int)`` (index path first), ``IRHeader``,
``pack``/``unpack``, and ``pack_img``/``unpack_img`` with **BGR** arrays as ``cv2`` gives them
(the pixels of ``cv2.imdecode``, which MXNet's ``unpack_img`` calls, exactly). Like MXNet, an
object used in a new process (fork or pickle, e.g. a DataLoader worker) reopens its files there;
reading goes through a memory map, so keys may be NumPy integers and no file pointer is shared
between processes.
"""
from __future__ import annotations

import os
import weakref
from typing import Any, Callable, List, Optional, TextIO

import numpy as np

from recio import portable
from recio.errors import OutputWriteError, RecordIOError
from recio.image.pixels.codec import COLOR_MODES, DEFAULT_MAX_PIXELS, decode
from recio.image.pixels.encoding import encode
from recio.image.header import IRHeader, pack, unpack as unpack_record
from recio.records.closed import check_open
from recio.records.diagnose import explain_indexed_read, open_checked_index
from recio.records.framing import (
    MAGIC_BYTES,
    MAGIC_LAST_BYTE,
    PADDING,
    SMALL_PAYLOAD,
    WHOLE_HEADERS,
)
from recio.records.index import BY_KEY, warn_repeated_keys
from recio.records.index_format import check_key, format_index
from recio.records.pair import open_pair
from recio.records.reader import RecordReader
from recio.records.writer import RecordWriter
from recio.records.write_errors import write_failed
from recio.storage import is_url

# This process's id, refreshed in a forked child: comparing with it is cheaper than a getpid()
# system call on every read, and still tells when an object crossed into another process.
_PID = os.getpid()


def _refresh_pid() -> None:
    global _PID
    _PID = os.getpid()
    for writer in list(_FAST_WRITERS):  # in a child, writes go through the checks again
        writer._fast = None
    _FAST_WRITERS.clear()


#: the writers of this process whose ``write``/``write_idx`` append to their buffer directly
_FAST_WRITERS: "weakref.WeakSet[MXRecordIO]" = weakref.WeakSet()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_refresh_pid)


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _close_all(files: list) -> None:
    """Close an MX writer's files at interpreter exit, keeping them (MXNet's ``__del__``)."""
    for f in files:
        try:
            f.close()
        except Exception:
            pass


class _IndexLines:
    """The ``.idx`` of an ``MXIndexedRecordIO`` writer: the offsets of the records whose lines
    are not written yet (their keys are the last ones of the writer's ``keys``), formatted
    together by ``recio.records.index_format.format_index`` whenever the records themselves are
    handed to their file, and at ``close()`` (formatting one line a call cost more than the rest of
    ``write_idx``)."""

    def __init__(self, file: Any, keys: list) -> None:
        self.file = file
        self.keys = keys
        self.offsets: List[int] = []

    def drain(self) -> None:
        offsets = self.offsets
        if offsets:
            self.file.write(format_index(self.keys[len(self.keys) - len(offsets):],
                                         offsets).decode())
            offsets.clear()

    def close(self) -> None:
        try:
            self.drain()
        finally:
            self.file.close()

    def discard(self) -> None:
        """Close and delete the ``.idx`` (its ``.rec`` could not be written)."""
        self.offsets.clear()
        try:
            self.file.close()
        except OSError:
            pass  # the buffered lines go with the file
        try:
            os.unlink(self.file.name)
        except OSError:
            pass


class _IndexedRecordSink(RecordWriter):
    """The ``.rec`` writer of an ``MXIndexedRecordIO``: each time it hands its buffered records
    to the file it writes their pending ``.idx`` lines too (so ``write_idx`` checks nothing)."""

    lines: Optional[_IndexLines] = None

    def _drain(self) -> None:
        try:
            super()._drain()
            if self.lines is not None:
                self.lines.drain()
        except OSError as exc:  # a full disk: neither file is left (OutputWriteError too)
            lines = self.lines
            self.abort()
            if lines is not None:
                lines.discard()
            failed = self.path or "" if isinstance(exc, OutputWriteError) or lines is None \
                else lines.file.name  # the .rec's error is typed already; else the .idx's
            raise write_failed(exc, failed) from exc


class MXRecordIO:
    """Sequential RecordIO reader (``flag='r'``) or writer (``flag='w'``), as ``mxnet.recordio``.

    A writer behaves as MXNet's, not as recio's own writers: it writes straight to the final
    name (an existing file is replaced by a new empty one at once), and an object that is
    garbage collected or still open at interpreter exit without ``close()`` is closed and its
    file *kept* with what was written, since ported scripts that never call ``close()`` rely on
    that. So a script that fails half way leaves a short but valid-looking ``.rec``/``.idx``;
    use ``recio.IndexedRecordWriter`` where that matters.

    After ``close()`` every read, write, ``tell`` and ``seek`` raises
    :class:`~recio.errors.ClosedError` naming the file (MXNet crashes or answers "Forbidden
    operation in multiple processes"), and so does pickling; ``open()`` and ``reset()`` open
    it again. An object closed by being pickled (MXNet's way) reopens on its next read.
    """

    #: ``close()`` was called (not undone by ``open()``/``reset()``)
    _closed_by_user = False

    def __init__(self, uri: str, flag: str) -> None:
        self.uri = os.fspath(uri)
        self.flag = flag
        self.pid: Optional[int] = None
        self.is_open = False
        self._reader: Optional[RecordReader] = None
        self._writer: Optional[RecordWriter] = None
        self.open()

    def open(self) -> None:
        """Open the file for the mode given by ``flag``."""
        self._closed_by_user = False
        self._open()
        if self.writable:
            self._speed_up()

    #: the class of a writer's ``.rec`` writer
    _record_writer = RecordWriter

    def _open(self) -> None:
        if self.flag == "w":
            self._writer = self._record_writer(self.uri, atomic=False)
            # at interpreter exit: close (and keep) before the writer's own finalizer, which
            # was made first and so runs later, would warn about an unclosed writer
            self._closing: List[Any] = [self._writer]
            weakref.finalize(self, _close_all, self._closing)
            self.writable = True
        elif self.flag == "r":
            self._reader = RecordReader(self.uri)
            self._read = self._reader.read
            self.writable = False
        else:
            raise ValueError(f"Invalid flag {self.flag}")
        self.pid = _PID
        self.is_open = True

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:
            pass

    def __getstate__(self) -> dict:
        """Pickle as MXNet does: closed, remembering whether to reopen on the other side."""
        check_open(self._closed_by_user, type(self).__name__, self.uri)
        is_open = self.is_open
        self._close()
        state = dict(self.__dict__)
        state["is_open"] = is_open
        state["_reader"] = state["_writer"] = state["_read"] = state["_fast"] = None
        return state

    #: the RecordWriter whose buffer ``write`` and ``write_idx`` append small records to
    #: directly, set while this process owns the open writer: what the checks of ``_append``
    #: would allow. ``close()`` and a fork (``_refresh_pid``) reset it, so the checking path then
    #: raises as MXNet does.
    _fast: Optional[RecordWriter] = None

    def _speed_up(self) -> None:
        self._fast = self._writer
        _FAST_WRITERS.add(self)

    def _slow_down(self) -> None:
        self._fast = None

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        is_open = state["is_open"]
        self.is_open = False
        if is_open:
            self.open()

    def _check_pid(self, allow_reset: bool = False) -> None:
        """Reopen in a new process (readers), as MXNet's ``_check_pid`` does; a closed
        object raises ``ClosedError``."""
        check_open(self._closed_by_user, type(self).__name__, self.uri)
        if self.pid != _PID:
            if allow_reset:
                self.reset()
            else:
                raise RuntimeError("Forbidden operation in multiple processes")

    def close(self) -> None:
        """Close the file (a writer flushes). Any later use but ``open()`` and ``reset()``
        raises ``ClosedError``."""
        self._close()
        self._closed_by_user = True

    def _close(self) -> None:
        if not self.is_open:
            return
        self._slow_down()
        if self._writer is not None:
            self._closing.clear()
            self._writer.close()
            self._writer = None
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self.is_open = False
        self.pid = None

    def reset(self) -> None:
        """Close and reopen: a reader starts again from the first record."""
        self._close()
        self.open()

    def write(self, buf: bytes) -> None:
        """Append one record."""
        writer = self._fast
        if writer is not None and type(buf) is bytes:
            n = len(buf)
            if n < SMALL_PAYLOAD and (buf.find(MAGIC_LAST_BYTE) < 0 or buf.find(MAGIC_BYTES) < 0):
                # a copy of RecordWriter.write's hot path (a whole small record: the framing of
                # recio.records.framing), which would cost one more call per record; tests
                # compare the bytes written both ways with MXNet's
                buffer = writer._buffer
                buffer += WHOLE_HEADERS[n]
                buffer += buf
                if n & 3:
                    buffer += PADDING[n & 3]
                if len(buffer) >= writer._buffer_size:
                    writer._drain()
                return
        self._append(buf)

    def _append(self, buf: bytes) -> int:
        """Append one record and return its offset (checks the mode and the process)."""
        if self.pid != _PID or not self.writable:
            check_open(self._closed_by_user, type(self).__name__, self.uri)
            if not self.writable:
                raise RuntimeError(f"{self.uri}: opened for reading (flag 'r'), cannot write")
            self._check_pid(allow_reset=False)
        assert self._writer is not None  # open in this process: pid == _PID
        return self._writer.write(buf)

    def read(self) -> Optional[bytes]:
        """The next record, or ``None`` at the end."""
        if self.pid != _PID or self.writable:
            check_open(self._closed_by_user, type(self).__name__, self.uri)
            if self.writable:
                raise RuntimeError(f"{self.uri}: opened for writing (flag 'w'), cannot read")
            self._check_pid(allow_reset=True)
        return self._read()

    def tell(self) -> int:
        """Current byte offset (of the next record)."""
        check_open(self._closed_by_user, type(self).__name__, self.uri)
        file = self._writer if self.writable else self._reader
        assert file is not None, f"{self.uri}: tell() on a closed MXRecordIO"
        return file.tell()


class MXIndexedRecordIO(MXRecordIO):
    """Keyed RecordIO with an ``.idx`` file: ``read_idx(key)``, ``write_idx(key, buf)``, ``keys``.

    A reader holds the index as arrays (``recio.records.index.Index``, memory-mapped from the
    ``.idx``'s sidecar cache when there is one, so forked workers share it); ``keys`` and
    ``idx`` are read-only list- and dict-like views of them: what code does with MXNet's list and
    dict (``len``, indexing, slicing, ``in``, ``list()``, ``np.array()``, ``idx[key]``) works.
    """

    _record_writer = _IndexedRecordSink

    def __init__(self, idx_path: str, uri: str, flag: str,
                 key_type: Callable[[Any], Any] = int) -> None:
        self.idx_path = os.fspath(idx_path)
        self.idx: dict = {}
        self.keys: List[Any] = []
        self.key_type = key_type
        self.fidx: Optional[TextIO] = None
        super().__init__(uri, flag)

    def _open(self) -> None:
        self._dense = None
        if self.flag != "r":
            self._open_writing()
            return
        # the .rec and the .idx as one consistent pair, even while a writer replaces them
        # (recio.records.pair); a missing .idx raises MissingIndexError, a FileNotFoundError
        # as MXNet's open(idx_path) raises
        open_pair(self.uri, self.idx_path, self._open_reading, lambda _: self._close_reading())

    def _close_reading(self) -> None:
        """Undo an ``_open_reading`` that met a replacement: its index is forgotten too (the
        next file at that path may even reuse the inode of the one it was read from)."""
        if self._reader is not None:
            self._reader.close()
            self._reader = None
        self._index = None
        self.is_open = False

    def _open_writing(self) -> None:
        super()._open()
        if self.writable:
            assert isinstance(self._writer, _IndexedRecordSink)  # super()._open() made it
            try:
                if is_url(self.idx_path):
                    raise ValueError(f"{self.idx_path}: MXIndexedRecordIO writes local files; "
                                     "write to a URL with recio.IndexedRecordWriter")
                self.fidx = open(self.idx_path, "w", encoding="utf-8", newline="\n")
            except BaseException:  # leave no empty .rec behind
                self._closing.clear()
                self._writer.abort()
                self._writer = None
                self.is_open = False
                raise
            self.idx, self.keys = {}, []
            self._lines = self._writer.lines = _IndexLines(self.fidx, self.keys)
            self._pending = self._lines.offsets  # the offsets whose .idx lines wait
            self._closing.append(self._lines)

    def _open_reading(self, idx_path: str) -> None:
        """Open the ``.rec`` and read the index at ``idx_path`` (``open_pair``'s step)."""
        super()._open()
        self._dense = None  # set below for this index only (never left from another one)
        self.fidx = None
        self._resume = None
        assert self._reader is not None  # super()._open() made it
        self._read_at = self._reader.read_at
        if is_url(idx_path):
            stamp: tuple = (idx_path, self._reader.size)
        else:
            stamp = portable.file_stamp(os.stat(idx_path)) + (self._reader.size,)
        index = getattr(self, "_index", None)
        if index is None or stamp != getattr(self, "_idx_stamp", None):
            # arrays, mapped from the sidecar cache when there is one (records.index_cache); a
            # worker reopening an unchanged index keeps the arrays it shares with the parent
            try:
                index = open_checked_index(self.uri, idx_path, self.key_type,
                                           rec_size=self._reader.size)
            except BaseException:
                self._close_reading()
                raise
            warn_repeated_keys(index, BY_KEY, self.uri)
            self._index, self._idx_stamp = index, stamp
        # list- and dict-like views computed from the arrays on demand (MXNet's list and dict)
        self.keys, self.idx = index.keys_view(), index.offsets_view()
        self._offset_of = index.offset_of
        self._reader.source.use_index(index)  # a remote object: one GET a keyed read
        if index.base == 0:  # the usual 0..n-1 keys: offsets by position, as Python ints
            self._dense = index.memoryviews()[0]

    def _close(self) -> None:
        if not self.is_open:
            return
        lines = self._lines if self.fidx is not None else None
        try:
            super()._close()
            if lines is not None:
                lines.close()
        except OSError as exc:  # a full disk at the end: neither file is left
            if lines is not None:
                lines.discard()
                _unlink_quietly(self.uri)
                raise write_failed(exc, exc.filename if isinstance(exc, OutputWriteError)
                                   else self.idx_path) from exc
            raise
        finally:
            if lines is not None:
                # used only while fidx is open, which the hot write_idx does not check again
                self._lines = self._pending = None  # type: ignore[assignment]
                self.fidx = None

    def __getstate__(self) -> dict:
        state = super().__getstate__()
        state["fidx"] = state["_lines"] = state["_pending"] = None
        # memoryview and bound-method shortcuts are rebuilt by open(); the index pickles as
        # a reopen of its cache when it has one (else as its arrays)
        for name in ("_dense", "_read_at", "_offset_of", "_resume"):
            state.pop(name, None)
        return state

    # After read_idx the next read() continues after that record, as MXNet's seek + read
    # leaves it; read_idx only notes where, and the position is caught up when it matters.
    _resume: Optional[int] = None

    def _catch_up(self) -> None:
        pos, self._resume = self._resume, None
        if self._reader is not None and pos is not None:  # read() and tell() check pos
            self._reader.seek(pos)
            self._reader.read()

    def read(self) -> Optional[bytes]:
        if self._resume is not None and self.pid == _PID:
            self._catch_up()
        return super().read()

    def tell(self) -> int:
        check_open(self._closed_by_user, type(self).__name__, self.uri)
        if self._resume is not None and not self.writable:
            self._catch_up()
        return super().tell()

    def seek(self, idx: Any) -> None:
        """Position the reader at the record of key ``idx``."""
        check_open(self._closed_by_user, type(self).__name__, self.uri)
        if self.writable:
            raise RuntimeError(f"{self.uri}: opened for writing (flag 'w'), cannot seek")
        self._check_pid(allow_reset=True)
        self._resume = None
        assert self._reader is not None  # open in this process after _check_pid
        self._reader.seek(self.idx[idx])

    def read_idx(self, idx: Any) -> bytes:
        """The record of key ``idx`` (NumPy integer keys work)."""
        if self.pid != _PID or self.writable:
            check_open(self._closed_by_user, type(self).__name__, self.uri)
            if self.writable:
                raise RuntimeError(f"{self.uri}: opened for writing (flag 'w'), cannot read")
            self._check_pid(allow_reset=True)
        dense = self._dense
        if dense is not None and type(idx) is int and 0 <= idx < len(dense):  # keys 0..n-1
            pos = dense[idx]
        else:
            pos = self._offset_of(idx)
        self._resume = pos
        try:
            return self._read_at(pos)
        except RecordIOError as exc:  # the index's fault or the .rec's: say which
            raise explain_indexed_read(self._reader, self._index, pos, exc) from None

    def write_idx(self, idx: Any, buf: bytes) -> None:
        """Append a record under key ``idx`` and its ``.idx`` line (written with its record).
        A key the ``.idx`` cannot hold (a tab, a line break...) raises ``RecordIOError``
        naming it (``recio.records.index_format.check_key``)."""
        key = self.key_type(idx)
        if type(key) is not int:  # an integer's line always reads back
            key = check_key(key, self.key_type, self.idx_path)
        writer = self._fast
        if writer is not None and type(buf) is bytes:
            n = len(buf)
            if n < SMALL_PAYLOAD and (buf.find(MAGIC_LAST_BYTE) < 0 or buf.find(MAGIC_BYTES) < 0):
                # the copy of RecordWriter.write's hot path, as in MXRecordIO.write
                buffer = writer._buffer
                pos = writer._start + len(buffer)
                buffer += WHOLE_HEADERS[n]
                buffer += buf
                if n & 3:
                    buffer += PADDING[n & 3]
                self.idx[key] = pos
                self.keys.append(key)
                self._pending.append(pos)
                if len(buffer) >= writer._buffer_size:
                    writer._drain()
                return
        pos = self._append(buf)
        self.idx[key] = pos
        self.keys.append(key)
        self._pending.append(pos)


class LabelArray(np.ndarray):
    """A label vector as MXNet's ``unpack`` gives it (float32, ``flag`` values) whose single
    elements read as Python floats.

    MXNet's ``label[0]`` is a ``numpy.float32``, which recent torch refuses in
    ``torch.tensor(label[0], dtype=torch.long)``, the very line of InsightFace's arcface_torch
    dataset; a Python float of the same value is accepted everywhere a float32 scalar is.
    """

    def __getitem__(self, key: Any) -> Any:
        item = super().__getitem__(key)
        return float(item) if isinstance(item, np.floating) else item


def unpack(s: bytes) -> tuple:
    """Split a record into ``(IRHeader, image bytes)`` as MXNet does: ``header.label`` is a
    float, or a float32 :class:`LabelArray` of ``flag`` labels."""
    header, payload = unpack_record(s)
    if header.flag:
        header = header._replace(label=header.label.view(LabelArray))
    return header, payload


def pack_img(header: IRHeader, img: np.ndarray, quality: int = 95, img_fmt: str = ".jpg") -> bytes:
    """Encode a **BGR** array (as OpenCV/MXNet use) and pack it with ``header``: ``.jpg`` at JPEG
    ``quality``, ``.png`` at compression level ``quality`` clamped to 0-9: the bytes MXNet's
    ``pack_img`` writes (see ``recio.image.pixels.encoding.encode``)."""
    return pack(header, encode(img, img_fmt, quality, bgr=True))


def unpack_img(s: bytes, iscolor: int = -1) -> tuple:
    """Unpack an image record to ``(header, array)`` with ``cv2.imdecode(buf, iscolor)``'s pixels:
    ``iscolor`` 1 -> BGR ``(H, W, 3)``, 0 -> greyscale ``(H, W)``, -1 -> as stored (BGRA with
    alpha, uint16 for a 16-bit grey PNG). As OpenCV 4, flags 1 and 0 apply the EXIF orientation.

    Unlike ``cv2.imdecode``, which returns None, undecodable bytes (or an image declaring more
    than ``recio.image.pixels.codec.DEFAULT_MAX_PIXELS`` pixels) raise
    :class:`~recio.errors.ImageError`.
    """
    if iscolor not in COLOR_MODES:
        raise ValueError(f"iscolor must be 1 (colour), 0 (greyscale) or -1 (unchanged), "
                         f"got {iscolor!r}")
    header, payload = unpack(s)
    return header, decode(payload, int(iscolor), bgr=True, exif_transpose=iscolor != -1,
                          max_pixels=DEFAULT_MAX_PIXELS)


__all__ = ["MXRecordIO", "MXIndexedRecordIO", "IRHeader", "LabelArray", "pack", "unpack",
           "pack_img", "unpack_img"]
