"""Atomic file creation: write under a temporary name in the same folder, rename when complete.

An interrupted or failed writer leaves no file that looks complete under the final name.
"""
from __future__ import annotations

import os
import secrets
from typing import BinaryIO, Iterator, Union
from contextlib import contextmanager

PathLike = Union[str, "os.PathLike[str]"]


class AtomicFile:
    """A binary file opened under a temporary name; ``commit()`` renames it into place."""

    def __init__(self, path: PathLike, mode: str = "wb") -> None:
        self.path = os.fspath(path)
        folder = os.path.dirname(os.path.abspath(self.path))
        while True:  # like mkstemp, but with the umask's permissions rather than 0600
            self.temp_path = os.path.join(
                folder, f".{os.path.basename(self.path)}.{os.getpid()}.{secrets.token_hex(4)}.tmp")
            try:
                fd = os.open(self.temp_path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
                break
            except FileExistsError:
                continue
        self.file: BinaryIO = os.fdopen(fd, mode)
        self.done = False

    def commit(self) -> None:
        """Flush, close and rename to the final name (idempotent)."""
        if self.done:
            return
        self.file.close()
        os.replace(self.temp_path, self.path)
        self.done = True

    def discard(self) -> None:
        """Close and delete the temporary file, leaving any existing final file untouched."""
        if self.done:
            return
        self.file.close()
        try:
            os.unlink(self.temp_path)
        except FileNotFoundError:
            pass
        self.done = True


@contextmanager
def atomic_open(path: PathLike, mode: str = "wb") -> Iterator[BinaryIO]:
    """``with atomic_open(p, "w") as f:`` — ``p`` appears only if the block completes."""
    target = AtomicFile(path, mode)
    try:
        yield target.file
    except BaseException:
        target.discard()
        raise
    target.commit()


__all__ = ["AtomicFile", "atomic_open"]
