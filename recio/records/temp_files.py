"""The temporary files recio's writers write under, beside their outputs: their names
(``.NAME.PID.XXXXXXXX.tmp``, and back from such a name to the output it stands for), creating
one, renaming one into place, deleting one. ``recio.records.atomic`` builds every writer's
lifecycle on these.
"""
from __future__ import annotations

import os
import re
import secrets
from typing import Optional, Union

from recio import portable, storage
from recio.errors import FileInUseError, OutputFolderError
from recio.records.output_folder import creating
from recio.records.write_errors import is_write_only_error, write_failed

PathLike = Union[str, "os.PathLike[str]"]


def temp_name(path: str) -> str:
    """``data/a.rec`` -> ``data/.a.rec.PID.XXXXXXXX.tmp``: a new name beside ``path``."""
    return os.path.join(os.path.dirname(os.path.abspath(path)),
                        f".{os.path.basename(path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")


def output_of_temp(path: str) -> Optional[str]:
    """The output a writer's temporary name (``temp_name``) stands for, or None when
    ``path`` is not one: what a message names instead of the temporary file."""
    folder, name = os.path.split(path)
    match = re.fullmatch(r"\.(.+)\.\d+\.[0-9a-f]{8}\.tmp", name)
    return os.path.join(folder, match.group(1)) if match else None


def create_exclusive(path: str) -> tuple:
    """``(fd, temp path)`` of a new file beside ``path``; like mkstemp, but with the umask's
    permissions rather than 0600. For a URL the file is staged in the local temporary folder
    (``RECIO_STAGING_DIR``, else ``TMPDIR``) and uploaded by ``publish()``."""
    if storage.is_url(path):
        import tempfile

        return tempfile.mkstemp(prefix=f".{storage.basename(path)}.", suffix=".tmp",
                                dir=os.environ.get("RECIO_STAGING_DIR") or None)
    while True:
        temp = temp_name(path)
        try:
            with creating(path):  # a read-only or forbidden folder: said of the user's file
                return portable.open_fd(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL), temp
        except FileExistsError:
            continue
        except OutputFolderError:
            raise
        except OSError as exc:
            if is_write_only_error(exc):  # a full or read-only disk: name the user's file
                raise write_failed(exc, path) from exc
            raise


def fsync_folder(path: PathLike) -> None:
    """fsync the folder holding ``path`` so a rename in it survives an OS crash (POSIX only)."""
    if not storage.is_url(path):
        portable.sync_folder(os.path.dirname(os.path.abspath(os.fspath(path))))


def replace_file(source: str, target: str, held: Optional[str] = None) -> None:
    """Rename ``source`` over ``target``. Where the OS refuses because a file is open or
    memory-mapped (Windows), raises :class:`FileInUseError` naming ``held`` (default:
    ``target``), the user's file that something holds."""
    try:
        os.replace(source, target)
    except OSError as exc:
        if portable.in_use(exc):
            raise FileInUseError(path=held or target) from None
        raise


def unlink_quietly(path: str) -> None:
    try:
        os.unlink(path)
    except FileNotFoundError:
        pass
