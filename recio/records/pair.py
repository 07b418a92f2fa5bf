"""A ``.rec`` and its ``.idx`` opened as one pair: the rule every reader by key follows.

Every recio writer publishes a pair in one order (``recio.records.atomic.OutputSet.commit``):
the old ``.idx`` is removed, the new ``.rec`` renamed into place, the new ``.idx`` renamed in
last. While a pair is replaced the names therefore show the old pair, a ``.rec`` with no
``.idx``, or the new pair; never a new ``.rec`` beside the old ``.idx``. But a reader opens
the two files at two moments, and a replacement may fall between them. So ``open_pair``:

1. opens the ``.idx`` and holds it open (its inode cannot be reused meanwhile), noting its
   identity (device, inode, size, modification and change times: ``portable.file_stamp``);
2. opens the ``.rec`` and reads the ``.idx`` (the caller's ``open_both``);
3. checks that the ``.idx`` path still names the held file, unchanged.

If it does, the ``.rec`` opened in step 2 is the one published with that ``.idx``: a newer
``.rec`` is renamed in only after the held ``.idx`` was removed, which step 3 would see. If it
does not, or the ``.idx`` disagreed with the ``.rec`` while either name changed, everything is
closed and opened again, a few times with short waits; a pair that keeps changing raises
``IndexChangedError`` naming both files. A ``.rec`` without its ``.idx`` (mid-replacement, or
left by a pack killed between its renames) is never numbered ``0..n-1`` in its place, which
would answer another record for a key: after the same short waits it raises
``MissingIndexError``, saying how to finish the pack or write the index. Only a caller that
asks for positions (``IndexedRecordReader(..., scan=True)``) gets them. URLs (objects are
uploaded whole, the index last) are opened once, without the identity check.
"""
from __future__ import annotations

import os
import stat
import time
from typing import Any, Callable, Optional, TypeVar, Union

from recio import portable, storage
from recio.errors import IndexChangedError, MissingIndexError, NotRecordFileError, RecordIOError
from recio.records.index_format import sibling_index_path
from recio.records.lock import pack_journal_path
from recio.records.sniff import not_a_record_file

T = TypeVar("T")

#: waits (seconds) between the tries of ``open_pair``: a writer's renames take microseconds,
#: so a pair still changing after these (about 0.13 s in all) is being rewritten over and over
_WAITS = (0.0, 0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.064)


def missing_index_error(rec_path: str, idx_path: str,
                        positions: str = "") -> Union[MissingIndexError, NotRecordFileError]:
    """The error of a reader by key whose ``.rec`` has no ``.idx`` (one wording): what to do,
    including finishing the im2rec pack that left it (its journal is beside it).
    ``positions``: how this caller asks for keys ``0..n-1`` instead, when it can. A file
    that is plainly no ``.rec`` (a manifest, an image) gets its ``NotRecordFileError``."""
    other = not_a_record_file(rec_path)  # a manifest, an image...: say that instead
    if other is not None:
        return other
    stem = os.path.splitext(rec_path)[0]
    journal = pack_journal_path(stem)
    if not storage.is_url(rec_path) and os.path.exists(journal):
        todo = (f"an interrupted im2rec pack left {rec_path} without its index "
                f"({os.path.basename(journal)} is beside it): finish it by running that "
                "im2rec command again with --resume")
    else:
        todo = (f"if {rec_path} is being replaced, open it again once that is done; else "
                f"write its index with `recio index {rec_path}` (--key id for im2rec's keys)")
    instead = f" ({positions})" if positions else ""
    return MissingIndexError(
        f"not found: {rec_path} has no index beside it, and a reader by key does not number "
        f"its records 0..n-1 in its place{instead}; {todo}", path=idx_path, rec_path=rec_path)


def _stamp(path: str) -> Optional[tuple]:
    try:
        return portable.file_stamp(os.stat(path))
    except OSError:
        return None


def open_pair(rec_path: str, idx_path: Optional[str], open_both: Callable[[str], T],
              close: Callable[[T], Any], *, positions: str = "",
              storage_options: Any = None, shard_cache: Any = None) -> T:
    """``open_both(idx)`` (open the ``.rec``, read the index ``idx``) so that what it read is
    one consistent pair (the module's rule), retried while the pair is being replaced;
    ``close(result)`` undoes an attempt that saw a replacement. ``idx_path`` None: the
    ``.idx`` beside the ``.rec``, which must exist (``MissingIndexError``, whose message
    offers ``positions``). Raises ``IndexChangedError`` when the pair kept changing."""
    idx = sibling_index_path(rec_path) if idx_path is None else os.fspath(idx_path)
    if storage.is_url(idx) or storage.is_url(rec_path):
        if idx_path is None and not ((shard_cache is not None and shard_cache.knows(idx))
                                     or storage.exists(idx, storage_options)):
            raise missing_index_error(rec_path, idx, positions)
        return open_both(idx)
    changed: Optional[BaseException] = None
    for wait in _WAITS:
        if wait:
            time.sleep(wait)
        held = _hold(idx)
        if held is None:  # no .idx (yet): mid-replacement, or never written
            if not os.path.exists(rec_path):
                return open_both(idx)  # the .rec is missing: its own error says so
            changed = None
            continue
        fd, before = held
        if fd < 0:  # not a regular file: no identity to check (the reader says what it is)
            return open_both(idx)
        rec_before = _stamp(rec_path)
        try:
            try:
                result = open_both(idx)
            except (RecordIOError, FileNotFoundError) as exc:
                # the two disagree (or one vanished) while a writer replaces them: try again
                if _stamp(idx) == before and _stamp(rec_path) == rec_before:
                    raise
                changed = exc
                continue
            if _stamp(idx) == before:
                return result
            close(result)
            changed = None
        finally:
            os.close(fd)
    if not os.path.exists(idx):
        raise missing_index_error(rec_path, idx, positions)
    raise IndexChangedError(
        f"was replaced again and again while {rec_path} was opened with it (another process "
        f"is writing them), so no consistent pair could be read in {len(_WAITS)} tries; "
        "open them again once the writer has finished", path=idx) from changed


def _hold(idx: str) -> Optional[tuple]:
    """``(descriptor, stamp)`` of the ``.idx`` opened for reading (without blocking on a FIFO
    or a device); ``(-1, None)`` for a file that is not a regular one; None when there is
    none."""
    try:
        if not portable.opens_without_blocking():
            st = os.stat(idx)
            if not stat.S_ISREG(st.st_mode):
                return -1, None
        fd = portable.open_fd(idx, portable.nonblocking_read_flags())
    except FileNotFoundError:
        return None
    except OSError:
        return -1, None  # unreadable: the reader's own open says why
    st = os.fstat(fd)
    if not stat.S_ISREG(st.st_mode):
        os.close(fd)
        return -1, None
    return fd, portable.file_stamp(st)
