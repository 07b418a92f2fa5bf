"""The one rule for what recio opens as a file: a regular file, or a one-line refusal.

A FIFO (named pipe), a socket, a character device (``/dev/zero``, ``/dev/null``, a terminal),
a block device (``/dev/sda``, ``/dev/loop0``) or a directory given where a file is read or
written is refused with :class:`~recio.errors.NotRegularFileError`, naming the path and what it
is, before anything could wait or be written: opening a FIFO for reading waits for a writer,
a device reads forever (or nothing at all), and an output renamed into place over a device
would replace the device.

* Readers open local files with :func:`open_regular` (or :func:`open_regular_fd`): the open
  itself cannot block (``O_NONBLOCK`` where the OS has it; where it has not, Windows, the path
  is looked at first), and what was opened is checked with ``fstat``, so a path swapped for a
  FIFO between a look and the open is refused too.
* :func:`check_regular` looks at a path without opening it (a missing path passes: the open
  that follows says it is missing).
* Writers and commands check every output with :func:`check_output` before they create a
  temporary file beside it, so nothing is written beside a device or a FIFO either.

URLs are objects, never special files: these functions pass them through.
"""
from __future__ import annotations

import os
import stat
from typing import Any, Optional

from recio.errors import NotRegularFileError
from recio.portable import nonblocking_read_flags, open_fd, opens_without_blocking
from recio.storage.paths import PathLike, is_url, local_path


def file_kind(mode: int) -> Optional[str]:
    """What a file of ``st_mode`` ``mode`` is when it is not a regular file (``"a directory"``,
    ``"a FIFO"``, ``"a socket"``, ``"a character device"``, ``"a block device"``), else None."""
    if stat.S_ISREG(mode):
        return None
    if stat.S_ISDIR(mode):
        return "a directory"
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    return "not a regular file"


_WHAT = {"a FIFO": "a FIFO (named pipe)"}


def _not_regular(path: PathLike, kind: str, output: bool = False) -> NotRegularFileError:
    """The refusal of ``path``, which is ``kind`` (``file_kind``), given as an input or (with
    ``output``) as an output."""
    what = _WHAT.get(kind, kind)
    rule = ("an output must be a regular file or a new name; nothing was written" if output
            else "recio reads regular files only")
    return NotRegularFileError(f"is {what}, not a regular file: {rule}", path=os.fspath(path),
                               kind=kind)


def check_regular(path: PathLike, output: bool = False) -> None:
    """Raise :class:`~recio.errors.NotRegularFileError` when the local ``path`` exists and is
    not a regular file (symlinks followed). A missing path, or one that cannot be looked at,
    passes: opening it says what is wrong. Never opens anything."""
    if is_url(path):
        return
    name = local_path(path)
    try:
        st = os.stat(name)
    except (OSError, ValueError):  # also through a folder not made yet: ``new/../fifo``
        try:
            st = os.stat(os.path.abspath(name))
        except (OSError, ValueError):
            return
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise _not_regular(path, kind, output)


def open_regular_fd(path: PathLike) -> int:
    """A read-only descriptor of the local regular file ``path``, opened without ever blocking;
    :class:`~recio.errors.NotRegularFileError` (nothing left open) when it is anything else.
    ``OSError`` as ``os.open`` raises it for a missing or unreadable file."""
    name = local_path(path)
    if not opens_without_blocking():  # no O_NONBLOCK (Windows): look before opening
        check_regular(name)
    try:
        fd = open_fd(name, nonblocking_read_flags())
    except OSError:  # a socket cannot be opened at all (ENXIO): say what it is
        check_regular(name)
        raise
    try:
        kind = file_kind(os.fstat(fd).st_mode)
        if kind is not None:
            raise _not_regular(path, kind)
        if opens_without_blocking():  # a regular file: reads as usual from here on
            os.set_blocking(fd, True)
    except BaseException:
        os.close(fd)
        raise
    return fd


def open_regular(path: PathLike, mode: str = "rb", **kwargs: Any) -> Any:
    """``open(path, mode, **kwargs)`` for reading a local regular file (``mode`` ``"rb"`` or a
    text mode ``"r"``), refusing anything else without blocking (:func:`open_regular_fd`)."""
    if any(c in mode for c in "wax+"):
        raise ValueError(f"open_regular reads files; mode {mode!r} writes")
    fd = open_regular_fd(path)
    try:
        return open(fd, mode, **kwargs)
    except BaseException:
        os.close(fd)
        raise


def check_output(path: PathLike) -> str:
    """``path`` as a local path (``local_path``; a URL as it is), after refusing to write it
    when it exists and is not a regular file (a device, a FIFO, a socket, a directory): a
    writer's file would be renamed over it, or written into it, and nothing must be created
    beside it either."""
    check_regular(path, output=True)
    return local_path(path)
