"""The one exception hierarchy of recio.

Every error about bad data says *where*: the file, and the byte offset or line number.
``RecordIOError`` is a ``ValueError`` so code that already catches ``ValueError`` keeps working.
"""
from __future__ import annotations

import difflib
import errno
import functools
import inspect
import os
from typing import Any, Callable, Iterable, List, Optional, TypeVar, cast

_Callable = TypeVar("_Callable", bound=Callable[..., Any])


def plural(count: int, noun: str, plural_form: Optional[str] = None) -> str:
    """``"1 malformed line"``, ``"5 malformed lines"``: a count with its noun in agreement,
    for messages (``plural_form`` when adding an s is wrong)."""
    return f"{count:,} {noun if count == 1 else (plural_form or noun + 's')}"


def closest(name: str, choices: Iterable[str], n: int = 1) -> List[str]:
    """The names among ``choices`` nearest to a mistyped ``name`` (``difflib``'s ratio of at
    least 0.6, nearest first; a choice differing only in case comes first)."""
    choices = list(choices)
    same = [c for c in choices if c.lower() == name.lower() and c != name]
    near = difflib.get_close_matches(name, choices, n=n, cutoff=0.6)
    return (same + [c for c in near if c not in same])[:n]


def unknown_names(noun: str, unknown: Iterable[str], known: Iterable[str]) -> str:
    """``"unknown parameter rand_crops (did you mean rand_crop?)"``: each name not among
    ``known``, with the nearest known ones; for the messages of functions that take names
    (``**kwargs``, streams, columns)."""
    known = sorted(known)
    parts = []
    names = sorted(unknown)
    for name in names:
        near = closest(name, known)
        parts.append(name + (f" (did you mean {' or '.join(near)}?)" if near else ""))
    return f"unknown {noun}{'s' if len(names) > 1 else ''} {', '.join(parts)}"


def suggests_keywords(target: _Callable) -> _Callable:
    """Decorate a function or class whose signature names its keyword arguments: a keyword it
    does not take raises ``TypeError`` naming the nearest one ("unknown keyword argument
    rand_crops (did you mean rand_crop?)") on every Python (3.13 says so itself), for code
    ported from MXNet with a name slightly off. A signature with ``**kwargs`` is left as it
    is (such a function checks its own names, with :func:`unknown_names`)."""
    func = target.__init__ if isinstance(target, type) else target  # type: ignore[misc]
    params = inspect.signature(func).parameters
    if any(p.kind is p.VAR_KEYWORD for p in params.values()):
        return target
    names = [n for n, p in params.items() if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)
             and n != "self"]
    owner = target.__name__

    @functools.wraps(func)
    def checked(*args: Any, **kwargs: Any) -> Any:
        unknown = set(kwargs) - set(names)
        if unknown:
            raise TypeError(f"{owner}() got an {unknown_names('keyword argument', unknown, names)}")
        return func(*args, **kwargs)

    if isinstance(target, type):
        target.__init__ = checked  # type: ignore[misc]
        return target
    return cast(_Callable, checked)


class RecordIOError(ValueError):
    """Bad or unreadable record data; carries ``path``, ``offset`` (bytes) and ``line``."""

    def __init__(self, message: str, path: Optional[str] = None,
                 offset: Optional[int] = None, line: Optional[int] = None) -> None:
        self.message = message
        self.path = None if path is None else str(path)
        self.offset = offset
        self.line = line
        where = []
        if self.path is not None:
            where.append(self.path)
        if line is not None:
            where.append(f"line {line}")
        if offset is not None:
            where.append(f"byte {offset}")
        super().__init__(": ".join(where + [message]))

    def __reduce__(self):  # keep path/offset/line when crossing process boundaries
        return (type(self), (self.message, self.path, self.offset, self.line))

    def __str__(self) -> str:  # the message of __init__ (not OSError's, for subclasses of both)
        return Exception.__str__(self)


class IndexFileError(RecordIOError):
    """A malformed ``.idx`` file or one that does not match its ``.rec``."""


class IndexMismatchError(IndexFileError):
    """An ``.idx`` whose offsets do not land on the records of the ``.rec`` it is used with: it
    belongs to another file (or the ``.rec`` was rewritten since). The ``.rec`` itself may be
    healthy; ``path`` is the index."""


class MissingIndexError(IndexFileError, FileNotFoundError):
    """A reader by key given a ``.rec`` whose ``.idx`` is not there. It never numbers the
    records ``0..n-1`` in its place (a ``.rec`` from im2rec is keyed by image id, in no file
    order, so positions would answer another record for a key): ``path`` is the missing
    index, ``rec_path`` the ``.rec``. Also a ``FileNotFoundError`` (``errno`` ENOENT,
    ``filename`` the index), as MXNet's ``MXIndexedRecordIO`` raises for a missing index."""

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None,
                 line: Optional[int] = None, rec_path: Optional[str] = None) -> None:
        super().__init__(message, path, offset, line)
        self.rec_path = rec_path
        self.errno, self.strerror, self.filename = errno.ENOENT, message, self.path


    def __reduce__(self):
        return (type(self), (self.message, self.path, self.offset, self.line, self.rec_path))


class IndexChangedError(IndexFileError):
    """A ``.rec`` and its ``.idx`` that kept being replaced while a reader opened them (another
    process is writing them): the reader could not see one consistent pair in a few tries and
    reads neither. ``path`` is the index; the message names both files. Open them again once
    the writer has finished."""


class OutputWriteError(RecordIOError, OSError):
    """An output file that could not be written: the disk is full (``errno`` ENOSPC), a quota
    is used up (EDQUOT), the file system is read-only (EROFS) or failed (EIO), ... ``path``
    is the user's file (never the temporary name it was written under); the ``OSError`` the
    OS raised is ``__cause__``, and ``errno``/``strerror``/``filename`` are its. Nothing
    that looks complete was left under ``path``: the writer's temporary files were deleted, or
    kept as the resumable partial output when ``resumable`` (``im2rec --resume``). Both a
    ``RecordIOError`` and an ``OSError``, so ``except OSError`` still catches it."""

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None,
                 line: Optional[int] = None, error_number: Optional[int] = None,
                 resumable: bool = False) -> None:
        super().__init__(message, path, offset, line)
        self.errno, self.filename, self.resumable = error_number, self.path, resumable
        self.strerror = os.strerror(error_number) if error_number is not None else message


    def __reduce__(self):
        return (type(self), (self.message, self.path, self.offset, self.line, self.errno,
                             self.resumable))


class ListFileError(RecordIOError):
    """A malformed ``.lst`` image-list line."""


class ImageError(RecordIOError):
    """An image that cannot be decoded, encoded or is too large."""


class TruncatedFileError(RecordIOError):
    """A ``.rec`` that ends inside a record: it was cut short (a copy or download that stopped,
    a full disk). ``offset`` is the head of the record the end of the file cuts; the records
    before it are intact, and ``recio repair`` copies them into a new file."""


class NotRecordFileError(RecordIOError):
    """A file given where a ``.rec`` was expected that is something else: a shard set's
    manifest, an ``.idx``, a ``.lst``, an image, a CBF file... (the message says which)."""


class OutputExistsError(RecordIOError):
    """An output that would replace one of the command's inputs (always refused) or an existing
    file (refused unless the caller passes ``force=True``, the CLI's ``--force``).

    ``remedy`` says what forcing does for the second kind (``"to replace it"``): the message
    then says ``pass force=True <remedy>`` before ``note``, and :meth:`for_command` says it with
    a command's flag instead."""

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None,
                 line: Optional[int] = None, remedy: Optional[str] = None,
                 note: str = "") -> None:
        self.detail, self.remedy, self.note = message, remedy, note
        super().__init__(message + (f"; pass force=True {remedy}" if remedy else "") + note,
                         path, offset, line)

    def for_command(self, flag: str = "--force") -> str:
        """The message as a command prints it: the option to type, not the keyword
        argument."""
        if self.remedy is None:
            return str(self)
        where = f"{self.path}: " if self.path is not None else ""
        return f"{where}{self.detail}; use {flag} {self.remedy}{self.note}"

    def __reduce__(self):
        return (type(self), (self.detail, self.path, self.offset, self.line, self.remedy,
                             self.note))


class NothingFoundError(RecordIOError):
    """A job that found nothing to do where the user expected work: ``im2rec --list`` that
    found no image, a pack whose images are (nearly) all missing (most likely the wrong ROOT)
    or whose lists hold no image line. Nothing was written."""


class OutputBusyError(OutputExistsError):
    """Outputs another live process is writing: it holds their lock (``PREFIX.pack.lock``),
    which the message names (pid, host, command). The lock dies with that process."""


class FileInUseError(OutputBusyError):
    """An output that cannot be replaced or deleted because a program has it open or
    memory-mapped: Windows refuses what POSIX allows (a reader keeps the old file). The outputs
    written together with it were left as they were; close the readers of ``path`` (a recio
    reader: ``close()`` or ``with``) and run again."""

    def __init__(self, message: str = ("is open or memory-mapped in a program, and Windows "
                                       "cannot replace or delete such a file; the outputs "
                                       "written with it were left as they were: close what "
                                       "reads it, then run again"),
                 path: Optional[str] = None, offset: Optional[int] = None,
                 line: Optional[int] = None, remedy: Optional[str] = None,
                 note: str = "") -> None:
        super().__init__(message, path, offset, line, remedy, note)


class InterruptedPackError(OutputExistsError):
    """An interrupted pack's progress where a new pack would write: continue it
    (``resume=True``, ``--resume``) or discard it and start over (``force=True``,
    ``--force``); it is never discarded unasked."""


class PackSettingsError(RecordIOError):
    """Pack settings that are out of range or do not go together (``num_shards`` with
    ``shard_size``, ``checksums`` without either, ``workers`` below 1...), refused when the
    settings are made, before anything is read or written. :meth:`for_command` says it with
    the command's options (``--num-shards``) instead of the keyword arguments."""

    def __init__(self, message: str, command: Optional[str] = None) -> None:
        super().__init__(message)
        self.command = command

    def __reduce__(self):
        return (type(self), (self.message, self.command))

    def for_command(self) -> str:
        """The message as ``im2rec`` prints it: the options to type."""
        return self.command or self.message


class NotRegularFileError(RecordIOError):
    """A path given where a file is read or written that is something else: a directory, a FIFO
    (named pipe), a socket, a character device (``/dev/zero``, ``/dev/null``) or a block
    device. It is refused before anything could wait or be written: opening a FIFO waits for a
    writer, a device reads forever (or nothing), and an output renamed over a device would
    replace it. ``kind`` says what the path is (``"a FIFO"``, ``"a character device"``...)."""

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None,
                 line: Optional[int] = None, kind: str = "") -> None:
        self.kind = kind
        super().__init__(message, path, offset, line)

    def __reduce__(self):
        return (type(self), (self.message, self.path, self.offset, self.line, self.kind))


class ClosedError(RecordIOError):
    """A reader, writer, split, dataset or iterator used after ``close()`` (or pickled after
    it): ``I/O on a closed reader: PATH``. ``what`` names the object (``"reader"``, ``"writer"``,
    ``"InputSplit"``...), ``path`` its file."""

    def __init__(self, what: str = "reader", path: Optional[str] = None) -> None:
        self.what = what
        super().__init__(f"I/O on a closed {what}: {path if path is not None else '(no file)'}")
        self.path = None if path is None else str(path)

    def __reduce__(self):
        return (type(self), (self.what, self.path))


class ConcurrentUseError(RecordIOError):
    """A reader's sequential position (``read()``, ``read_batch()``, iterating it) used by two
    threads at once, or by two iterations at once: records would be handed out twice or
    skipped, so the second use is refused. Give each thread its own reader, or read by offset
    or key (``read_at``, ``reader[key]``), which any number of threads may share."""


class OutputFolderError(RecordIOError, OSError):
    """An output whose folder refuses new files: it is on a read-only file system (``errno``
    EROFS), or this user may not create files in it (EACCES, EPERM). ``path`` is the user's
    output (never the temporary or lock name recio would have created), ``folder`` its folder;
    the message says what to do. Raised before anything was written
    (``recio.records.output_folder``). Also an ``OSError`` (``errno``, ``filename``), as the
    error of the refused ``open`` was."""

    def __init__(self, message: str, path: Optional[str] = None, offset: Optional[int] = None,
                 line: Optional[int] = None, folder: Optional[str] = None,
                 error_number: Optional[int] = None) -> None:
        RecordIOError.__init__(self, message, path, offset, line)
        self.folder = folder
        self.errno, self.filename = error_number, self.path
        self.strerror = message

    def __str__(self) -> str:  # RecordIOError's "path: message", not OSError's "[Errno n] ..."
        return Exception.__str__(self)

    def __reduce__(self):
        return (type(self), (self.message, self.path, self.offset, self.line, self.folder,
                             self.errno))


class ManifestError(RecordIOError):
    """A shard set's manifest that is malformed, or a shard that does not match it."""


class ChecksumError(RecordIOError):
    """A record whose bytes differ from the checksum written beside them (``offset`` is the
    record's byte offset in its shard)."""


class StorageError(RecordIOError):
    """A remote object that could not be read or written: the network, the server or the
    credentials failed, or a connection dropped mid-read (``offset``: where reading stopped)."""


class CBFError(RecordIOError):
    """A malformed CNTK Binary Format file."""


class SequenceError(RecordIOError):
    """A malformed sequence record or sample-count sidecar."""


class CTFError(SequenceError):
    """A CNTK Text Format file that CNTK 2.7's reader refuses (or reads as undefined data), or
    a malformed ctf2bin stream-header file; ``line`` is 1-based, ``offset`` the byte in the file
    where the problem was found."""


class MissingKeyError(KeyError):
    """A key that a file's index does not hold (``reader[key]``, ``read_idx``). A ``KeyError``,
    so ``key in reader`` and ``reader.get(key)`` work as for any mapping, and ``args[0]`` (and
    ``key``) is the key asked for; its message says what keys the file has, with an example
    ("no record with key 0 in a.rec: its 2,000 keys are ids from 1 to 4,711 ..."), made only
    when it is shown. ``path`` is the index."""

    def __init__(self, key: Any, message: Any = None, path: Optional[str] = None) -> None:
        super().__init__(key)
        self.key, self.path = key, path
        self._message = message  # the text, or a function making it

    @property
    def message(self) -> str:
        if callable(self._message):
            self._message = self._message()
        return self._message if self._message is not None else f"no record with key {self.key!r}"

    def __str__(self) -> str:
        return self.message

    def __reduce__(self):
        return (type(self), (self.key, self.message, self.path))


class DuplicateKeyWarning(UserWarning):
    """An ``.idx`` in which a key appears on several lines. Readers then do what MXNet does
    (the last line of a key wins), so the records of the earlier lines cannot be read by key;
    the warning names the key and how many lines hold it. Make it an error with
    ``warnings.simplefilter("error", recio.errors.DuplicateKeyWarning)``."""


class SkippedRecordWarning(RuntimeWarning):
    """A record a reader left out and went on without: its image nothing can decode (the
    ``on_undecodable="skip"`` policy of every image reader, ``recio.image.undecodable``), or
    its labels do not fit ``label_width``. The message names the file, the record (its key, or
    its place in a stream), its byte offset and why, and what came in its place if anything;
    the reader counts it in ``num_skipped``. Python shows each distinct message once; make
    them errors with ``warnings.simplefilter("error", recio.errors.SkippedRecordWarning)``, or
    pass ``on_undecodable="raise"``."""


__all__ = ["RecordIOError", "IndexFileError", "IndexMismatchError", "MissingIndexError",
           "IndexChangedError", "OutputWriteError", "ListFileError", "ImageError",
           "TruncatedFileError", "NotRecordFileError", "NotRegularFileError", "ClosedError",
           "ConcurrentUseError", "OutputExistsError", "OutputBusyError", "FileInUseError",
           "OutputFolderError", "MissingKeyError", "InterruptedPackError", "NothingFoundError",
           "PackSettingsError",
           "ManifestError", "ChecksumError", "StorageError", "CBFError", "SequenceError",
           "CTFError", "DuplicateKeyWarning", "SkippedRecordWarning"]
