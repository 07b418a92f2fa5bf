"""An output whose folder refuses new files, said in the user's terms.

A writer creates its files under names the user never gave (``.train.rec.4242.6f42b951.tmp``,
``train.pack.lock``, a staging folder). When the folder refuses them (a read-only file system,
``EROFS``; a folder this user may not write in, ``EACCES``/``EPERM``), :func:`creating` turns
the ``OSError`` into :class:`~recio.errors.OutputFolderError`, which names the user's output and
its folder and says what to do, before anything was written. Other failures (a full disk, an
I/O error) pass through unchanged: what to do about those is not the folder's business.

Kept apart from the writers (``recio.records.atomic``, ``recio.records.lock``) so that the
rule is written once and every place that creates an output's file uses it.
"""
from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from typing import Iterator, Optional, Union

from recio import portable
from recio.errors import OutputFolderError, RecordIOError

PathLike = Union[str, "os.PathLike[str]"]

#: how a folder refuses a new file: a read-only file system, or no permission to write in it
_REFUSALS = frozenset({errno.EROFS, errno.EACCES, errno.EPERM})


def refused(exc: BaseException) -> bool:
    """True for an ``OSError`` by which a folder refused a new file (:data:`_REFUSALS`); not
    Windows refusing a file that a program holds open (``portable.in_use``: its own error)."""
    return (isinstance(exc, OSError) and not isinstance(exc, RecordIOError)
            and exc.errno in _REFUSALS and not portable.in_use(exc))


def refusal(exc: OSError, output: PathLike, remedy: Optional[str] = None) -> OutputFolderError:
    """The :class:`OutputFolderError` for ``exc``, raised while creating a file of ``output``
    (the user's path) in its folder. ``remedy`` replaces the default advice (write it
    elsewhere, or make the folder writable)."""
    output = os.fspath(output)
    folder = os.path.dirname(os.path.abspath(output))
    if exc.errno == errno.EROFS:
        why = f"its folder {folder} is on a read-only file system"
        todo = "write it to a folder on a writable disk (or remount this one read-write)"
    elif exc.filename is not None and os.path.abspath(os.fspath(exc.filename)) == \
            os.path.abspath(output) and os.path.lexists(output):
        why = "this user may not write it (permission denied)"
        todo = f"make it writable (chmod u+w {output}) or write to another file"
    else:
        why = f"this user may not create files in its folder {folder} (permission denied)"
        todo = "write it to a folder you can write to (or get write permission on this one)"
    return OutputFolderError(f"cannot be written: {why}; {remedy or todo}", path=output,
                             folder=folder, error_number=exc.errno)


@contextmanager
def creating(output: PathLike, remedy: Optional[str] = None) -> Iterator[None]:
    """``with creating(output):`` around the creation of a file (temporary, lock, folder) for
    the user's ``output``: a refusal by its folder becomes :func:`refusal`'s
    :class:`OutputFolderError`; every other error passes through."""
    try:
        yield
    except OSError as exc:
        if refused(exc):
            raise refusal(exc, output, remedy) from exc
        raise
