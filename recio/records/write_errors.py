"""Errors of outputs that cannot be written, said one way: the user's file, never a name of
recio's own, and the OS's ``errno`` kept (``recio.errors.OutputWriteError``).

A full disk (ENOSPC), a quota (EDQUOT), a file too large (EFBIG), a read-only (EROFS) or
failing (EIO) file system: every writer turns the ``OSError`` into ``write_failed``'s error;
a command's own files beside its outputs (a lock, a staging folder) into
``folder_write_failed``'s. What to do about each is the CLI's (``recio.cli.common``).
"""
from __future__ import annotations

import errno
import os
from typing import Union

from recio.errors import OutputWriteError

PathLike = Union[str, "os.PathLike[str]"]

#: errors of a write that are never an input's: a full disk or quota, a file too large for
#: the file system, a read-only file system
_WRITE_ONLY_ERRNOS = frozenset(getattr(errno, name) for name in ("ENOSPC", "EDQUOT", "EFBIG",
                                                                   "EROFS")
                               if hasattr(errno, name))


def write_failed(exc: OSError, path: PathLike, *, resumable: bool = False) -> OutputWriteError:
    """The error to raise (``from exc``) when writing the output ``path`` failed with ``exc``:
    a full disk or quota, an I/O error, a read-only file system... One wording for every
    writer: it names the user's file (never its temporary name) and keeps the OS's ``errno``.
    ``resumable``: the partial output was kept for a resume (im2rec's), else nothing was left
    under the final name."""
    if isinstance(exc, OutputWriteError):  # named already; kept, or now kept to resume
        if exc.resumable or not resumable:
            return exc
        path = exc.path or path
        exc = exc.__cause__ if isinstance(exc.__cause__, OSError) else OSError(
            exc.errno, exc.strerror)
    what = exc.strerror or str(exc) or type(exc).__name__
    kept = ("the output written so far is kept, to resume from" if resumable
            else "nothing was left under this name")
    return OutputWriteError(f"cannot write it ({what}); {kept}", path=os.fspath(path),
                            error_number=exc.errno, resumable=resumable)


def folder_write_failed(exc: OSError, inside: PathLike) -> OutputWriteError:
    """``write_failed`` for a file of a command's own beside its outputs (a lock, a staging
    folder's progress) that the user never named: said of the folder that holds them."""
    cause = exc.__cause__ if isinstance(exc, OutputWriteError) and \
        isinstance(exc.__cause__, OSError) else exc
    folder = os.path.dirname(os.path.abspath(os.fspath(inside)))
    return OutputWriteError(f"cannot write the outputs in this folder "
                            f"({cause.strerror or cause}); nothing was left", path=folder,
                            error_number=cause.errno)


def is_write_only_error(exc: BaseException) -> bool:
    """Whether ``exc`` is an ``OSError`` only a write raises (a full disk or quota, a file too
    large, a read-only file system): one raised inside a block that also reads inputs is
    still the output's."""
    return isinstance(exc, OSError) and not isinstance(exc, OutputWriteError) and \
        exc.errno in _WRITE_ONLY_ERRNOS
