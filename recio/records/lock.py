"""One live writer per set of outputs: a lock that ends with the process holding it.

A pack holds :class:`OutputLock` on ``STEM.pack.lock`` beside its outputs from its first check
to its last rename, so a second pack of the same list (a job launched twice, a second
terminal) is refused at once with a message naming the first (pid, host, since when, its
command) instead of racing it for the same files. Nothing has to clean up after a crash:

* **A local path**: ``fcntl.flock`` on the lock file. The kernel drops the lock when its
  process ends, however it ends (SIGKILL included); the file only names the holder. The
  holder deletes the file when it is done (while still holding it; a process that opened the
  old file meanwhile sees it was replaced and tries again). Where ``flock`` is missing (not
  POSIX) or refused (some network file systems) the file is created exclusively instead, and
  a lock left by a process that is gone (same host) is taken over.
* **A URL** (an object store has no locks): a lease, an object naming its holder and renewed
  every :data:`RENEW_SECONDS` by a thread. It is taken over once not renewed for
  :data:`_LEASE_SECONDS`, or at once when its holder is a process of this host that is gone.
  Taking it writes it, then reads it back :data:`SETTLE_SECONDS` later: of two packs starting
  together only the one whose write came last keeps it. ``check()`` says whether it was lost
  (renewals failed that long and another pack took it), so the holder commits nothing then.
"""
from __future__ import annotations

import errno
import json
import os
import shlex
import socket
import sys
import threading
import time
import uuid
from typing import Any, Dict, Optional, Union

from recio import portable, storage
from recio.errors import OutputBusyError, OutputFolderError
from recio.records.atomic import atomic_open
from recio.records.output_folder import creating
from recio.records.write_errors import folder_write_failed, is_write_only_error
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]

#: the lock of the outputs named by ``STEM``: ``STEM.pack.lock``
_LOCK_SUFFIX = ".pack.lock"
#: a lease in a bucket not renewed for this long is taken over
_LEASE_SECONDS = 60.0
#: ... and is renewed this often
RENEW_SECONDS = 10.0
#: how long a new lease waits before reading itself back
SETTLE_SECONDS = 0.5
#: an exclusive lock file still empty after this long was left by a process that died
#: between creating it and naming itself
_EMPTY_GRACE = 10.0
#: errors of a flock the file system does not support (the fallback is used then)
_NO_FLOCK = {errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL,
             getattr(errno, "ENOTSUP", errno.EOPNOTSUPP)}


def lock_path(stem: PathLike) -> str:
    """``data/train`` -> ``data/train.pack.lock``."""
    return os.fspath(stem) + _LOCK_SUFFIX


def pack_journal_path(stem: PathLike) -> str:
    """``data/train`` -> ``data/train.pack.journal``: the progress an im2rec pack keeps beside
    its outputs until they are all in place (``recio.image.packing.output``), so a ``.rec``
    without its ``.idx`` next to one was left by an interrupted pack."""
    return os.fspath(stem) + ".pack.journal"


def _unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _command() -> str:
    args = [os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python",
            *sys.argv[1:]]
    text = " ".join(shlex.quote(a) for a in args)
    return text if len(text) <= 200 else text[:197] + "..."


class OutputLock:
    """The lock at ``path`` (:func:`lock_path`): ``with OutputLock(path):`` holds it or raises
    :class:`~recio.errors.OutputBusyError` naming the live process that holds it.

    A folder that refuses the lock file (read-only, no permission) raises
    :class:`~recio.errors.OutputFolderError` naming ``output``, the user's file the lock guards
    (default: the lock's own path), with ``remedy`` as its advice when given."""

    def __init__(self, path: PathLike, storage_options: StorageOptions = None, *,
                 output: Optional[PathLike] = None, remedy: Optional[str] = None) -> None:
        self.path = storage.absolute(path)
        self.storage_options = storage_options
        self.output, self.remedy = output, remedy
        self.info: Dict[str, Any] = {}
        self.lost: Optional[Dict[str, Any]] = None
        self._fd: Optional[int] = None
        self._exclusive = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    # -- what a holder says about itself ---------------------------------------------------
    def _me(self) -> Dict[str, Any]:
        return {"pid": os.getpid(), "host": socket.gethostname(),
                "since": time.strftime("%Y-%m-%d %H:%M:%S"), "command": _command(),
                "token": uuid.uuid4().hex, "renewed": time.time()}

    def _busy(self, holder: Optional[Dict[str, Any]], took_over: bool = False) -> OutputBusyError:
        holder = holder or {}
        if holder.get("pid") is not None:
            who = (f"pid {holder['pid']} on {holder.get('host', '?')}, since "
                   f"{holder.get('since', '?')}: {holder.get('command', '?')}")
        else:
            who = "it has not named itself yet"
        if took_over:
            return OutputBusyError(f"another pack took over these outputs ({who}) while this one "
                                   "could not renew its lease; nothing was published",
                                   path=self.path)
        what = ("wait for it to end or stop it, then run again" if not storage.is_url(self.path)
                else f"wait for it to end or stop it; a lease it stops renewing expires after "
                     f"{_LEASE_SECONDS:.0f} s")
        return OutputBusyError(f"another pack is writing these outputs ({who}); {what}",
                               path=self.path)

    # -- acquire / release -----------------------------------------------------------------
    def acquire(self) -> "OutputLock":
        """Take the lock, or raise :class:`OutputBusyError` at once (never waits)."""
        self.info = self._me()
        try:
            if storage.is_url(self.path):
                self._take_lease()
            else:
                with creating(self.output or self.path, self.remedy):
                    if not portable.has_file_locks() or not self._take_flock():
                        # Windows: no flock, and no deleting a file still open (see release)
                        self._take_exclusive()
        except OutputFolderError:
            raise  # a read-only or forbidden folder, said in the user's terms already
        except OSError as exc:  # a full disk: said of the outputs' folder
            if is_write_only_error(exc):
                raise folder_write_failed(exc, self.path) from exc
            raise
        return self

    def release(self) -> None:
        """Give the lock up and delete its file or object (never raises for the object: a
        lease left behind expires, or is taken over at once on this host)."""
        if storage.is_url(self.path):
            self._stop.set()
            if self._thread is not None:
                self._thread.join()
                self._thread = None
            try:
                if (self._read_lease() or {}).get("token") == self.info.get("token"):
                    storage.remove(self.path, self.storage_options)
            except (OSError, ValueError):
                pass
            return
        if self._fd is not None:
            try:
                os.unlink(self.path)  # while still holding it (see the module docstring)
            except FileNotFoundError:
                pass
            os.close(self._fd)
            self._fd = None
        elif self._exclusive:
            if _read_json(self.path).get("token") == self.info.get("token"):
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
            self._exclusive = False

    def check(self) -> None:
        """Raise :class:`OutputBusyError` when another pack took this lock over (a lease whose
        renewals failed for :data:`_LEASE_SECONDS`); call before publishing anything."""
        if self.lost is not None:
            raise self._busy(self.lost, took_over=True)

    def __enter__(self) -> "OutputLock":
        return self.acquire()

    def __exit__(self, *exc: Any) -> None:
        self.release()

    # -- a local file ----------------------------------------------------------------------
    def _take_flock(self) -> bool:
        """flock the file; False when this file system cannot (use the fallback)."""
        flags = os.O_RDWR | getattr(os, "O_CLOEXEC", 0)
        while True:
            try:
                fd, created = portable.open_fd(self.path, flags | os.O_CREAT | os.O_EXCL), True
            except FileExistsError:
                try:
                    fd, created = portable.open_fd(self.path, flags), False
                except FileNotFoundError:
                    continue  # deleted meanwhile by the holder releasing it
            try:
                locked = portable.lock_file(fd, wait=False)
            except OSError as exc:
                os.close(fd)
                if exc.errno in _NO_FLOCK:
                    if created:  # the fallback creates it itself
                        os.unlink(self.path)
                    return False
                raise
            if not locked:
                holder = _read_fd(fd)
                os.close(fd)
                raise self._busy(holder)
            try:
                current = os.stat(self.path)
            except FileNotFoundError:
                current = None
            opened = os.fstat(fd)
            if current is None or (current.st_dev, current.st_ino) != (opened.st_dev,
                                                                       opened.st_ino):
                os.close(fd)  # its holder deleted it while we waited: take the new one
                continue
            data = json.dumps(self.info).encode()
            try:
                os.ftruncate(fd, 0)
                portable.write_at(fd, data, 0)
            except OSError:  # a full disk: no lock is left (acquire names the folder)
                os.close(fd)
                _unlink_quietly(self.path)
                raise
            self._fd = fd
            return True

    def _take_exclusive(self) -> None:
        """The fallback: create the file exclusively; a holder that is gone is replaced."""
        for _ in range(3):
            try:
                fd = portable.open_fd(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
            except FileExistsError:
                holder = _read_json(self.path)
                if not self._stale_file(holder):
                    raise self._busy(holder) from None
                try:
                    os.unlink(self.path)
                except FileNotFoundError:
                    pass
                continue
            with os.fdopen(fd, "wb") as f:
                f.write(json.dumps(self.info).encode())
            self._exclusive = True
            return
        raise self._busy(_read_json(self.path))

    def _stale_file(self, holder: Dict[str, Any]) -> bool:
        if not holder:
            try:
                return time.time() - os.path.getmtime(self.path) > _EMPTY_GRACE
            except FileNotFoundError:
                return True
        return (holder.get("host") == socket.gethostname()
                and not portable.process_alive(holder.get("pid")))

    # -- a lease in a bucket -----------------------------------------------------------------
    def _read_lease(self) -> Optional[Dict[str, Any]]:
        try:
            data = storage.read_bytes(self.path, self.storage_options)
        except FileNotFoundError:
            return None
        try:
            found = json.loads(data.decode("utf-8"))
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def _write_lease(self) -> None:
        with atomic_open(self.path, "wb", storage_options=self.storage_options) as out:
            out.write(json.dumps(self.info).encode())

    def _take_lease(self) -> None:
        holder = self._read_lease()
        if holder is not None and not self._stale_lease(holder):
            raise self._busy(holder)
        self._write_lease()
        time.sleep(SETTLE_SECONDS)
        holder = self._read_lease()
        if (holder or {}).get("token") != self.info["token"]:
            raise self._busy(holder)  # another pack wrote after us: it keeps the lease
        self._stop.clear()
        self._thread = threading.Thread(target=self._renew, name="recio-lease", daemon=True)
        self._thread.start()

    def _stale_lease(self, holder: Dict[str, Any]) -> bool:
        if holder.get("host") == socket.gethostname() and \
                not portable.process_alive(holder.get("pid")):
            return True
        renewed = holder.get("renewed")
        return not isinstance(renewed, (int, float)) or time.time() - renewed > _LEASE_SECONDS

    def _renew(self) -> None:
        while not self._stop.wait(RENEW_SECONDS):
            try:
                holder = self._read_lease()
                if (holder or {}).get("token") != self.info["token"]:
                    self.lost = holder or {}
                    return
                self.info["renewed"] = time.time()
                self._write_lease()
            except (OSError, ValueError):
                continue  # the network: try again at the next renewal


def _read_fd(fd: int) -> Dict[str, Any]:
    try:
        data = portable.read_at(fd, 4096, 0)
        found = json.loads(data.decode("utf-8")) if data else {}
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _read_json(path: str) -> Dict[str, Any]:
    try:
        fd = portable.open_fd(path, os.O_RDONLY)
    except OSError:
        return {}
    try:
        return _read_fd(fd)
    finally:
        os.close(fd)
