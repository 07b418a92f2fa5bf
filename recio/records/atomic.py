"""Output files of recio's writers, and the one lifecycle every writer shares.

A writer's files are created under temporary names in their final folders and renamed into
place only by ``close()``: data files first, the files that describe them (``.idx``, ``.len``,
...) last, after any old copies of those were removed, so a reader never finds a new ``.rec``
beside a stale index. ``abort()``, an exception inside ``with``, a writer that is garbage
collected or still open at interpreter exit, and a constructor that fails all delete the
temporary files: no output that looks complete appears unless ``close()`` returned.

What survives what: without ``fsync`` a returned ``close()`` survives the process dying (the
data is in the OS's page cache), not an OS crash or power loss, after which a renamed file may
be empty or short. With ``fsync=True`` each file is fsynced before its rename and the folder
after it, so a returned ``close()`` survives those too. A process killed mid-write (SIGKILL,
``os._exit``) can leave temporary files (``.NAME.PID.XXXXXXXX.tmp``) but never a final name.
"""
from __future__ import annotations

import errno
import os
import warnings
import weakref
from contextlib import contextmanager
from typing import (
    Any,
    BinaryIO,
    Callable,
    Dict,
    Iterable,
    Iterator,
    List,
    Optional,
    Sequence,
    Tuple,
    Union,
    cast,
)

from recio import portable, storage
from recio.errors import FileInUseError, OutputExistsError
from recio.records.closed import check_open, refuse_to_pickle
from recio.records.output_folder import creating
from recio.records.temp_files import (
    create_exclusive,
    fsync_folder,
    replace_file,
    temp_name,
    unlink_quietly,
)
from recio.records.write_errors import is_write_only_error, write_failed
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]


def remove_orphaned_temps(stem: PathLike) -> List[str]:
    """Delete the temporary files (``temp_name``) that writers of outputs named ``STEM.*`` or
    ``STEM-*`` left beside them when their process was killed mid-write (the process named in
    the temporary name is gone); returns their paths. For a pack that publishes again what a
    killed run was publishing."""
    import re

    folder, base = os.path.split(os.path.abspath(os.fspath(stem)))
    pattern = re.compile(r"\." + re.escape(base) + r"[-.].*\.(\d+)\.[0-9a-f]{8}\.tmp\Z")
    removed: List[str] = []
    try:
        names = os.listdir(folder)
    except OSError:
        return removed
    for name in names:
        match = pattern.match(name)
        if match and not portable.process_alive(int(match.group(1))):
            unlink_quietly(os.path.join(folder, name))
            removed.append(os.path.join(folder, name))
    return removed


class AtomicFile:
    """A binary file opened under a temporary name; ``commit()`` renames it into place.

    ``buffering=0`` gives a raw file (``os.write``/``os.writev`` on ``file.fileno()`` are then
    the same as ``file.write``). ``fsync=True``: ``commit()`` fsyncs the file before the rename
    and the folder after it.
    """

    #: the file is renamed into place (False: it is written at its final name)
    atomic = True
    #: ``discard()`` keeps the temporary file (a resumable partial file)
    keep_on_discard = False
    #: where a URL's object store is reached (``publish`` uploads there)
    storage_options: StorageOptions = None

    def __init__(self, path: PathLike, mode: str = "wb", buffering: int = -1, *,
                 fsync: bool = False, storage_options: StorageOptions = None) -> None:
        self.path = storage.check_output(path)  # no temporary file beside a device or a FIFO
        self.fsync = fsync
        self.storage_options = storage_options
        fd, self.temp_path = create_exclusive(self.path)
        try:
            # binary: the writers open "wb" (a text mode would give a TextIO)
            self.file = cast(BinaryIO, os.fdopen(fd, mode, buffering))
        except BaseException:
            os.close(fd)
            unlink_quietly(self.temp_path)
            raise
        self.done = False

    @classmethod
    def adopt(cls, path: PathLike, temp_path: PathLike, file: BinaryIO, *,
              keep_on_discard: bool = True, fsync: bool = False) -> "AtomicFile":
        """An already open ``file`` at ``temp_path`` that ``commit()`` renames to ``path``;
        ``discard()`` only closes it (``keep_on_discard``), e.g. a resumable ``.partial``."""
        self = cls.__new__(cls)
        self.path, self.temp_path, self.file = os.fspath(path), os.fspath(temp_path), file
        self.fsync, self.done, self.keep_on_discard = fsync, False, keep_on_discard
        return self

    def finish_file(self) -> None:
        """Flush (and fsync when asked) and close the file; nothing is renamed yet."""
        if self.file.closed:
            return
        try:
            try:
                self.file.flush()
                if self.fsync:
                    os.fsync(self.file.fileno())
            finally:
                self.file.close()
        except OSError as exc:  # a full disk, an I/O error: the user's file, not the temp
            raise write_failed(exc, self.path, resumable=self.keep_on_discard) from exc

    def publish(self) -> None:
        """Rename the finished file into place (for a URL: upload it as one object, which
        appears only once complete, then delete the staged copy)."""
        if storage.is_url(self.path):
            storage.upload(self.temp_path, self.path, self.storage_options)
            unlink_quietly(self.temp_path)
        else:
            try:
                replace_file(self.temp_path, self.path)
            except OSError as exc:  # (FileInUseError, not an OSError, passes)
                raise write_failed(exc, self.path, resumable=self.keep_on_discard) from exc
        self.done = True

    def commit(self) -> None:
        """Flush, close and rename to the final name (idempotent)."""
        if self.done:
            return
        try:
            self.finish_file()
            self.publish()
        except BaseException:  # a full disk: no temporary file stays behind
            self.discard()
            raise
        if self.fsync:
            fsync_folder(self.path)

    def discard(self) -> None:
        """Close and delete the temporary file, leaving any existing final file untouched."""
        if self.done:
            return
        self.done = True
        try:
            self.file.close()
        except OSError:
            pass  # a full disk: the buffered bytes go with the file (or the partial ends
            # where its journal says)
        finally:
            if not self.keep_on_discard:
                unlink_quietly(self.temp_path)


class InPlaceFile(AtomicFile):
    """A file written straight at its final name (what MXNet does): ``commit()`` only closes it,
    ``discard()`` closes and deletes it.

    An existing regular file is *replaced* by a new empty one (renamed over it at once, with its
    permission bits) rather than truncated: a process still reading the old file (recio maps it
    into memory) keeps its records instead of faulting on pages that vanished, and on ext4 it
    saves the flush that truncating a file to zero sets up for its ``close``. A symlink, a file
    with other hard links, one owned by someone else or one we may not write is opened as
    ``open(path, "wb")`` would (truncated, or refused), so they keep their identity.
    """

    atomic = False

    def __init__(self, path: PathLike, mode: str = "wb", buffering: int = -1, *,
                 fsync: bool = False) -> None:
        self.path = self.temp_path = storage.check_output(path)  # never a device or a FIFO
        self.fsync = fsync
        self.done = False
        try:
            st = os.lstat(self.path)
        except FileNotFoundError:
            st = None
        if st is not None and _replaceable(st) and os.access(self.path, os.W_OK) \
                and not portable.is_windows():
            fd, temp = create_exclusive(self.path)
            try:
                if hasattr(os, "fchmod"):
                    os.fchmod(fd, st.st_mode & 0o7777)
                replace_file(temp, self.path)
            except BaseException:
                os.close(fd)
                unlink_quietly(temp)
                raise
        else:  # Windows: a file open or mapped elsewhere cannot be replaced (nor truncated)
            try:
                with creating(self.path):
                    fd = portable.open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            except OSError as exc:
                if portable.in_use(exc):
                    raise FileInUseError(path=self.path) from None
                raise
        try:
            self.file = cast(BinaryIO, os.fdopen(fd, mode, buffering))  # binary, as above
        except BaseException:
            os.close(fd)
            raise

    def publish(self) -> None:
        self.done = True


def _replaceable(st: os.stat_result) -> bool:
    import stat

    return (stat.S_ISREG(st.st_mode) and st.st_nlink == 1
            and (not hasattr(os, "geteuid") or st.st_uid == os.geteuid()))


class OutputSet:
    """The files one writer produces, committed together or discarded together.

    ``files[0]`` is the data file; the rest describe it and are renamed last, after any old
    copies of them (and the ``obsolete`` paths, e.g. a previous run's error report) were
    deleted. Creating the set is all or nothing: if one file cannot be created, those already
    created are deleted and the error is raised.
    """

    def __init__(self, files: Sequence[AtomicFile] = ()) -> None:
        self.files: List[AtomicFile] = list(files)
        self.obsolete: List[str] = []
        self.done = False

    @classmethod
    def create(cls, specs: Iterable[tuple], *, atomic: bool = True, fsync: bool = False,
               storage_options: StorageOptions = None) -> "OutputSet":
        """Open one file per ``(path, mode, buffering)``; all or none. A URL is always
        written atomically (staged, then uploaded)."""
        made: List[AtomicFile] = []
        try:
            for path, mode, buffering in specs:
                if atomic or storage.is_url(os.fspath(path)):
                    made.append(AtomicFile(path, mode, buffering, fsync=fsync,
                                           storage_options=storage_options))
                else:
                    made.append(InPlaceFile(path, mode, buffering, fsync=fsync))
        except BaseException:
            cls(made).discard()
            raise
        return cls(made)

    def add(self, target: AtomicFile) -> AtomicFile:
        """Add a file created by the caller (renamed after those already in the set)."""
        self.files.append(target)
        return target

    @property
    def atomic(self) -> bool:
        """True when every file is renamed into place (nothing shows before ``commit``)."""
        return all(f.atomic for f in self.files)

    @property
    def fsync(self) -> bool:
        return any(f.fsync for f in self.files)

    def commit(self) -> None:
        """Finish every file, then rename them in order: data first, descriptions last."""
        if self.done:
            return
        try:
            for f in self.files:
                f.finish_file()
            if portable.is_windows() and not any(storage.is_url(f.path) for f in self.files):
                _publish_windows([(f.temp_path, f.path) for f in self.files if f.atomic],
                                 self.obsolete)
                for f in self.files:
                    f.done = True
            else:
                for f in self.files[1:]:
                    if f.atomic:  # never a new data file beside an old index
                        _remove(f.path, f.storage_options)
                options = self.files[0].storage_options if self.files else None
                for path in self.obsolete:
                    _remove(path, options)
                for f in self.files:
                    f.publish()
        except BaseException:
            self.discard()
            raise
        self.done = True
        if self.fsync:  # one fsync for each folder that holds a renamed file
            folders = {os.path.dirname(os.path.abspath(f.path)): f.path for f in self.files
                       if not storage.is_url(f.path)}
            for path in folders.values():
                fsync_folder(path)

    def discard(self) -> None:
        """Close and delete every file not yet renamed into place (the first error is raised
        after all were tried)."""
        self.done = True
        error: Optional[BaseException] = None
        for f in self.files:
            try:
                f.discard()
            except BaseException as exc:  # keep going: the others must go too
                error = error or exc
        if error is not None:
            raise error


def _reap(outputs: OutputSet, what: str, salvage: Optional[Callable[[], Any]]) -> None:
    """The finalizer of a writer that was never closed (it holds no reference to the writer)."""
    if outputs.done:
        return
    if not outputs.files:  # a borrowed file object: only the buffered bytes are lost
        dropped = salvage() if salvage is not None else 0
        if dropped:
            warnings.warn(f"{what} was not closed: {dropped} buffered bytes were never written "
                          f"to its file (call close())", ResourceWarning, stacklevel=2)
        return
    if outputs.atomic:
        outputs.discard()
        warnings.warn(f"{what} was not closed: its temporary files were deleted and nothing "
                      f"was written under the final names (call close(), or use a with block)",
                      ResourceWarning, stacklevel=2)
        return
    note = "it was closed as written"  # written in place (MXNet's way): keep it, like a file
    try:
        if salvage is not None:
            salvage()
        outputs.commit()
    except Exception:
        outputs.discard()
        note = "closing it failed, so it was deleted"
    warnings.warn(f"{what} was not closed; {note}", ResourceWarning, stacklevel=2)


class ManagedWriter:
    """The lifecycle of every recio writer: ``close()`` commits, ``abort()`` discards.

    A subclass creates its :class:`OutputSet`, then calls ``_begin``; it implements ``_finish``
    (write what is still buffered and any trailer, before the files are renamed) and ``_drop``
    (forget what is buffered). ``with`` commits on success and aborts on an exception. A writer
    garbage collected, or still open at interpreter exit, without ``close()`` has its temporary
    files deleted and emits ``ResourceWarning`` (files written in place are closed as written
    instead, after ``salvage()``; for a borrowed file object, ``salvage()`` returns how many
    bytes it dropped).
    """

    closed = True
    _outputs: OutputSet
    __getstate__ = refuse_to_pickle  # its files are open, half written, in this process

    def _begin(self, outputs: OutputSet, what: str,
               salvage: Optional[Callable[[], Any]] = None) -> None:
        self._outputs = outputs
        self.closed = False
        self._finalizer = weakref.finalize(self, _reap, outputs, what, salvage)

    def _finish(self) -> None:
        """Write buffered data and trailers (the files are then committed)."""

    def _drop(self) -> None:
        """Forget buffered data (the files are then discarded)."""

    def close(self) -> Any:
        """Write what is buffered and rename the files into place (data first, index last).

        If that fails, the files are discarded and the error is raised.
        """
        if self.closed:
            return None
        if not self._finalizer.alive:  # reaped at interpreter exit while still referenced
            self.closed = True
            return None
        self.hand_over().commit()  # each step discards the files if it fails
        return None

    def hand_over(self) -> OutputSet:
        """Finish writing and give up the files, finished but not yet renamed: ``close()``
        commits them at once; an owner may instead commit or discard them together with others
        (``ShardWriter``: no shard appears before every shard is complete). The writer is
        closed; the returned set is then the only thing that can make the files appear. If
        finishing fails, the files are discarded and the error is raised."""
        check_open(self.closed, "writer", getattr(self, "path", None))
        try:
            self._finish()
            for f in self._outputs.files:
                f.finish_file()
        except BaseException:
            self.abort()
            raise
        self._finalizer.detach()
        self.closed = True
        return self._outputs

    def abort(self) -> None:
        """Stop without producing any output: the temporary files are deleted (a file written
        in place is deleted too; a borrowed file object keeps what was already handed to it)."""
        if self.closed:
            return
        self.closed = True
        self._finalizer.detach()
        try:
            self._drop()
        finally:
            self._outputs.discard()

    def __enter__(self):
        return self

    def __exit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if exc_type is None:
            self.close()
        else:
            self.abort()


def _remove(path: str, storage_options: StorageOptions) -> None:
    if storage.is_url(path):
        storage.remove(path, storage_options)
    else:
        unlink_quietly(path)


def _identity(path: str) -> Optional[tuple]:
    if storage.is_url(path):
        return None
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return (st.st_dev, st.st_ino)


def check_outputs(outputs: Iterable[PathLike], inputs: Iterable[PathLike] = (), *,
                  force: bool = False, storage_options: StorageOptions = None) -> None:
    """The one rule for what a command may write over: never one of its ``inputs`` (the same
    path, a symlink or a hard link to it), and an existing file only with ``force=True``.

    Call it with every output path before anything is written; raises ``OutputExistsError``
    naming the first path refused (``NotRegularFileError``: a device, a FIFO, force or not).
    """
    wanted = [storage.check_output(p) for p in outputs]
    taken: Dict[Any, str] = {}  # the inputs by real path and by (device, inode)
    for path in (storage.local_path(p) for p in inputs):
        taken[_real(path)] = path
        ident = _identity(path)
        if ident is not None:
            taken[ident] = path
    for path in wanted:
        source = taken.get(_real(path)) or taken.get(_identity(path) or ())
        if source is not None:
            same = "" if os.path.abspath(source) == os.path.abspath(path) else f" ({source})"
            raise OutputExistsError(f"is an input of this command{same}; write the output "
                                    "elsewhere", path=path)
    if force:
        return
    existing = [p for p in wanted if (storage.exists(p, storage_options) if storage.is_url(p)
                                       else os.path.lexists(p))]
    if existing:
        more = (f" ({len(existing) - 1} more output file(s) exist too)"
                if len(existing) > 1 else "")
        raise OutputExistsError("already exists", path=existing[0], remedy="to replace it",
                                note=more)


def _real(path: str) -> str:
    return path.rstrip("/") if storage.is_url(path) else os.path.realpath(path)


def publish_staged(files: Sequence[Tuple[str, str]],
                   storage_options: StorageOptions = None) -> None:
    """Move finished files made elsewhere (a staging folder) to their final paths, ``(staged,
    final)`` with the data file first, in ``OutputSet.commit``'s order: the old copies of the
    files that describe it (all but the first) are removed first, then each is renamed into
    place (a local path, on the same file system) or uploaded (a URL: an object appears only
    once complete)."""
    if portable.is_windows() and not any(storage.is_url(final) for _, final in files):
        _publish_windows(files, ())
        return
    for _, final in files[1:]:
        _remove(final, storage_options)
    for staged, final in files:
        if storage.is_url(final):
            storage.upload(staged, final, storage_options)
        else:
            replace_file(staged, final)


def set_aside(paths: Iterable[str]) -> List[Tuple[str, str]]:
    """Rename each existing file of ``paths`` to a temporary name beside it, so that new files
    can take the names where a file in use cannot be replaced (Windows): ``(temporary name,
    path)`` of each. All or none: if one is held, :class:`FileInUseError` names it after the
    ones already moved were put back. :func:`drop_aside` deletes them once the new files are
    in place; :func:`_put_back` restores them."""
    aside: List[Tuple[str, str]] = []
    try:
        for path in paths:
            if os.path.lexists(path) and not os.path.isdir(path):
                temp = temp_name(path)
                replace_file(path, temp, held=path)
                aside.append((temp, path))
    except BaseException:
        _put_back(aside)
        raise
    return aside


def _put_back(aside: Sequence[Tuple[str, str]]) -> None:
    """Return the files :func:`set_aside` moved to their names."""
    for temp, path in reversed(aside):
        os.replace(temp, path)


def drop_aside(aside: Sequence[Tuple[str, str]]) -> None:
    """Delete the old files :func:`set_aside` moved (one still held stays, under its
    temporary name, for :func:`remove_orphaned_temps`)."""
    for temp, _ in aside:
        try:
            os.unlink(temp)
        except OSError:
            pass


def _publish_windows(files: Sequence[Tuple[str, str]], obsolete: Iterable[str]) -> None:
    """Rename finished local files ``(staged, final)`` into place where an open or mapped file
    cannot be replaced or deleted (Windows): every existing final file (and ``obsolete`` path)
    is first set aside, which fails at once if a program holds it; then the staged files take
    their names and the old ones are deleted. If any step fails, the old files are put back
    and :class:`FileInUseError` names the one in use: all the outputs change, or none."""
    for _, final in files:
        if os.path.isdir(final) and not os.path.islink(final):  # as os.replace refuses it
            raise IsADirectoryError(errno.EISDIR, "is a folder, not a file", final)
    aside = set_aside([final for _, final in files] + list(obsolete))
    placed: List[str] = []
    try:
        for staged, final in files:
            replace_file(staged, final)
            placed.append(final)
    except BaseException:
        for final in placed:
            unlink_quietly(final)
        _put_back(aside)
        raise
    drop_aside(aside)


@contextmanager
def atomic_open(path: PathLike, mode: str = "wb", *, fsync: bool = False,
                storage_options: StorageOptions = None) -> Iterator[BinaryIO]:
    """``with atomic_open(p, "w") as f:`` — ``p`` appears only if the block completes (a URL:
    uploaded when the block completes)."""
    target = AtomicFile(path, mode, fsync=fsync, storage_options=storage_options)
    try:
        yield target.file
    except BaseException as exc:
        target.discard()
        if is_write_only_error(exc):  # the block's write to the file: name the user's file
            raise write_failed(cast(OSError, exc), target.path) from exc
        raise
    target.commit()
