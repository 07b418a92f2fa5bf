"""Where the operating systems recio runs on differ, decided in one place.

Linux, macOS and Windows differ in a few facilities the readers and writers rely on: reading
at a position without moving a shared file offset (``os.pread``: not on Windows), binary file
descriptors (Windows opens them in text mode unless told), memory-map advice (``madvise``: not
on Windows), ``/proc/self/fd`` and ``fallocate`` (Linux only), asking whether a process is
alive (``os.kill(pid, 0)`` *terminates* the process on Windows), whole-file locks
(``fcntl.flock``) and signal masks (``pthread_sigmask``): POSIX only, and replacing or deleting a file that is open or memory-mapped
(POSIX allows it; Windows refuses).

Every check reads the facility when it is called, not when recio is imported, so a facility
removed later (as the tests' ``RECIO_TEST_REMOVE`` mode does, by deleting ``os.pread`` or the
``mmap.MADV_*`` constants, or by changing what :func:`system` answers) is noticed. The
fallbacks give the same bytes as the fast paths.
"""
from __future__ import annotations

import errno
import mmap
import os
import sys
import tempfile
import threading
from contextlib import contextmanager
from typing import Any, Callable, Iterator, List, Optional

PathLike = Any  # str or os.PathLike[str]

#: the Windows errors of a file that another open handle or memory map keeps in place
#: (ERROR_ACCESS_DENIED, ERROR_SHARING_VIOLATION, ERROR_LOCK_VIOLATION, ERROR_USER_MAPPED_FILE)
_IN_USE_WINERRORS = {5, 32, 33, 1224}


def system() -> str:
    """``sys.platform`` as the platform checks below read it (``"linux"``, ``"darwin"``,
    ``"win32"``); the tests' platform modes replace this function."""
    return sys.platform


def is_windows() -> bool:
    """Windows' file rules apply: an open or mapped file cannot be replaced or deleted."""
    return system() == "win32"


# -- file descriptors ------------------------------------------------------------------------
def open_fd(path: PathLike, flags: int, mode: int = 0o666) -> int:
    """``os.open`` in binary mode everywhere (Windows' ``O_BINARY``: without it ``os.read``
    turns ``\\r\\n`` into ``\\n`` and stops at a Ctrl-Z byte, and ``os.write`` does the
    reverse). Every ``os.open`` in recio goes through here."""
    return os.open(path, flags | getattr(os, "O_BINARY", 0), mode)


def opens_without_blocking() -> bool:
    """``os.O_NONBLOCK`` exists (POSIX): opening a FIFO or a device returns at once. Where it
    does not (Windows), look at what a path is before opening it."""
    return hasattr(os, "O_NONBLOCK")


def nonblocking_read_flags() -> int:
    """Flags that open a file for reading without ever blocking on a FIFO or a device and
    without it becoming a controlling terminal, where the OS has them (POSIX)."""
    return (os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
            | getattr(os, "O_CLOEXEC", 0))


def file_stamp(st: os.stat_result) -> tuple:
    """What tells one version of a file from another: device, inode, size, modification and
    change times. A file renamed over the name has another inode; one rewritten in place
    another size or times. Windows reports a file index as the inode (``os.stat`` and
    ``os.fstat`` alike) and its creation time as ``st_ctime``, which serve the same end."""
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns


def has_pread() -> bool:
    """``os.pread`` exists (POSIX): reads by position that threads may share a descriptor for."""
    return hasattr(os, "pread")


def read_at(fd: int, size: int, offset: int) -> bytes:
    """Up to ``size`` bytes of the open file ``fd`` from byte ``offset`` (fewer at its end),
    without moving its file position: ``os.pread`` where there is one, else a read-only map of
    just that window (no shared offset to race on, between threads or forked processes)."""
    pread = getattr(os, "pread", None)
    if pread is not None:
        return pread(fd, size, offset)
    end = min(offset + size, os.fstat(fd).st_size)
    if end <= offset:
        return b""
    base = offset - offset % mmap.ALLOCATIONGRANULARITY
    with mmap.mmap(fd, end - base, offset=base, access=mmap.ACCESS_READ) as window:
        return window[offset - base:end - base]


def write_at(fd: int, data: bytes, offset: int) -> int:
    """Write ``data`` at byte ``offset`` of ``fd``: ``os.pwrite``, else a seek and a write (the
    caller owns the descriptor, so nothing else moves its position meanwhile)."""
    pwrite = getattr(os, "pwrite", None)
    if pwrite is not None:
        return pwrite(fd, data, offset)
    os.lseek(fd, offset, os.SEEK_SET)
    return os.write(fd, data)


def has_proc_fd() -> bool:
    """Linux's ``/proc/self/fd`` shows the path an open descriptor really refers to."""
    return system().startswith("linux") and os.path.isdir("/proc/self/fd")


def opened_path(fd: int, path: str) -> str:
    """The real path of the open file ``fd``: its ``/proc/self/fd`` link where there is one,
    else ``path``'s ``realpath``."""
    if has_proc_fd():
        try:
            return os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            pass
    return os.path.realpath(path)


def sync_folder(folder: str) -> None:
    """fsync a folder so a rename in it survives an OS crash; nothing where a folder cannot be
    opened as a file (Windows)."""
    if os.name != "posix" or is_windows():
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


# -- disk space ------------------------------------------------------------------------------
_FALLOCATE: Any = None  # libc's fallocate via ctypes (Linux), False where there is none


def _load_fallocate() -> Any:
    global _FALLOCATE
    func: Any = False
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        func = getattr(libc, "fallocate64", None)  # 64-bit offsets on any word size
        if func is None and ctypes.sizeof(ctypes.c_long) == 8:
            func = libc.fallocate
        if func:
            func.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_int64, ctypes.c_int64]
            func.restype = ctypes.c_int
    except (OSError, AttributeError):
        func = False
    _FALLOCATE = func or False
    return _FALLOCATE


def reserve(fd: int, offset: int, length: int) -> bool:
    """Reserve disk blocks for ``fd[offset:offset + length]`` without changing the file's size
    (Linux ``fallocate`` with ``FALLOC_FL_KEEP_SIZE``); False where that is not supported,
    and then nothing is done: writes allocate their blocks as they go.

    A writer that reserves ahead of what it writes spares the file system allocating blocks
    page by page; it must ``os.ftruncate(fd, size)`` when done to hand back what it did not
    use. Reading the file is unaffected: its size is what was written."""
    if not system().startswith("linux"):
        return False
    func = _FALLOCATE if _FALLOCATE is not None else _load_fallocate()
    return bool(func) and func(fd, 1, offset, length) == 0


# -- memory maps -----------------------------------------------------------------------------
def advise(mapped: Any, advice: str, start: int = 0, length: Optional[int] = None) -> bool:
    """``mapped.madvise(mmap.MADV_<advice>, ...)`` where the OS has that advice (not on
    Windows; macOS lacks some); a hint only, so False and nothing done elsewhere."""
    value = getattr(mmap, "MADV_" + advice, None)
    method: Optional[Callable[..., Any]] = getattr(mapped, "madvise", None)
    if value is None or method is None:
        return False
    try:
        if length is None:
            method(value)
        else:
            method(value, start, length)
    except (OSError, ValueError):  # not supported by this kernel or for this range: just slower
        return False
    return True


# -- processes -------------------------------------------------------------------------------
def process_alive(pid: Any) -> bool:
    """Whether process ``pid`` of this host still runs (True when that cannot be told).

    POSIX asks with signal 0; on Windows ``os.kill`` would terminate the process, so its exit
    code is read instead."""
    if not isinstance(pid, int) or pid <= 0:
        return False
    if os.name == "nt":
        return _windows_process_alive(pid)
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # someone else's process, or no way to ask
        return True
    return True


def _windows_process_alive(pid: int) -> bool:
    import ctypes

    kernel32 = ctypes.windll.kernel32  # type: ignore[attr-defined]
    handle = kernel32.OpenProcess(0x1000, False, pid)  # PROCESS_QUERY_LIMITED_INFORMATION
    if not handle:
        return ctypes.GetLastError() != 87  # type: ignore[attr-defined]  # 87: no such pid
    try:
        code = ctypes.c_ulong()
        if not kernel32.GetExitCodeProcess(handle, ctypes.byref(code)):
            return True
        return code.value == 259  # STILL_ACTIVE
    finally:
        kernel32.CloseHandle(handle)


def boot_id() -> Optional[str]:
    """An id of this boot of the machine (Linux), None where the OS shows none."""
    try:
        with open("/proc/sys/kernel/random/boot_id", encoding="ascii") as f:
            return f.read().strip()
    except OSError:
        return None


def end_with_parent(parent: int) -> None:
    """Make this worker process end when its parent (pid ``parent``) does, even by SIGKILL,
    where the OS can (Linux ``PR_SET_PDEATHSIG``); elsewhere an orphaned worker ends when it
    next hands back its work."""
    if not system().startswith("linux") or sys.platform == "win32":  # (this: for type checkers)
        return
    import ctypes
    import signal

    try:
        ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # 1: PR_SET_PDEATHSIG (linux/prctl.h)
    except (OSError, AttributeError):  # no prctl in this libc: orphans end on their own
        return
    if os.getppid() != parent:  # the parent died before the line above took effect
        os._exit(1)


# -- whole-file locks ------------------------------------------------------------------------
def has_file_locks() -> bool:
    """POSIX whole-file locks (``fcntl.flock``) exist here: Linux and macOS, not Windows."""
    if sys.platform == "win32":  # (this: for type checkers; system() for the tests' modes)
        return False
    return system() != "win32"


def lock_file(fd: int, *, shared: bool = False, wait: bool = True) -> bool:
    """Lock the file of ``fd`` (``flock``), shared or exclusive. With ``wait=False``, False when
    another process holds a lock in the way. ``OSError`` where the file system cannot lock;
    call only where :func:`has_file_locks`."""
    if sys.platform == "win32":
        raise OSError(errno.ENOSYS, "no POSIX file locks on Windows")
    import fcntl

    try:
        fcntl.flock(fd, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
                    | (0 if wait else fcntl.LOCK_NB))
    except OSError as exc:
        if not wait and exc.errno in (errno.EAGAIN, errno.EACCES, errno.EWOULDBLOCK):
            return False
        raise
    return True


def unlock_file(fd: int) -> None:
    """Release the lock :func:`lock_file` took on ``fd`` (nothing where there are none)."""
    if sys.platform == "win32":
        return
    import fcntl

    try:
        fcntl.flock(fd, fcntl.LOCK_UN)
    except OSError:
        pass


# -- signal masks ----------------------------------------------------------------------------
def has_signal_mask() -> bool:
    """A thread can hold (block) signals until it releases them: POSIX, not Windows."""
    if sys.platform == "win32":  # (this: for type checkers)
        return False
    import signal

    return hasattr(signal, "pthread_sigmask")


def hold_signal(sig: int) -> Any:
    """Hold ``sig`` in this thread (and the processes it starts); returns the mask to give
    :func:`restore_signal_mask`. Call only where :func:`has_signal_mask`."""
    if sys.platform == "win32":
        raise OSError(errno.ENOSYS, "no signal mask on Windows")
    import signal

    return signal.pthread_sigmask(signal.SIG_BLOCK, {sig})


def release_signal(sig: int) -> None:
    """Stop holding ``sig`` in this thread (nothing where there is no signal mask)."""
    if sys.platform != "win32" and has_signal_mask():
        import signal

        signal.pthread_sigmask(signal.SIG_UNBLOCK, {sig})


def restore_signal_mask(previous: Any) -> None:
    """Give this thread back the mask :func:`hold_signal` returned."""
    if sys.platform != "win32":
        import signal

        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


# -- replacing files -------------------------------------------------------------------------
def in_use(exc: OSError) -> bool:
    """``exc`` is Windows refusing to replace, delete or truncate a file because an open
    handle or a memory map (of this process or another) keeps it."""
    if not isinstance(exc, PermissionError):
        return False
    winerror = getattr(exc, "winerror", None)
    return winerror in _IN_USE_WINERRORS if winerror is not None else is_windows()


_STDERR_LOCK = threading.Lock()


@contextmanager
def native_messages() -> Iterator[List[str]]:
    """The lines C libraries write to file descriptor 2 while the block runs (libjpeg's
    "Corrupt JPEG data: ..." warnings, which no Python API reports), collected into the list
    the block gets instead of reaching the terminal. Blocks run one at a time; what other
    threads write to stderr meanwhile is collected too, so use it in a single-threaded
    checker only."""
    lines: List[str] = []
    with _STDERR_LOCK, tempfile.TemporaryFile() as caught:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(caught.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            caught.seek(0)
            lines += caught.read().decode("utf-8", "replace").splitlines()
