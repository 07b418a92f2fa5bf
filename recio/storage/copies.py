"""An object's bytes where a tool needs them: a local file, a temporary copy, a file object.

``download`` copies an object (one streaming GET) to a local file; ``local_copy`` and
``local_copies`` give local paths for tools that need several passes or a memory map (a URL is
downloaded to a temporary folder, deleted afterwards); ``open_input`` opens either kind for
reading.
"""
from __future__ import annotations

import os
from contextlib import contextmanager
from typing import Any, Iterator, List, Optional, Sequence

from recio.storage.objects import exists
from recio.storage.paths import PathLike, StorageOptions, basename, is_url, local_path
from recio.storage.regular import open_regular
from recio.storage.remote_file import STREAM_BLOCK, RemoteFile

def download(path: PathLike, local: str, storage_options: StorageOptions = None) -> None:
    """Copy the file at ``path`` (an object at a URL: in one streaming GET) to the local file
    ``local``."""
    with open(local, "wb") as out, open_input(path, storage_options) as remote:
        while True:
            block = remote.read(STREAM_BLOCK)
            if not block:
                break
            out.write(block)


@contextmanager
def local_copy(path: PathLike, storage_options: StorageOptions = None) -> Iterator[str]:
    """A local path holding the file at ``path``: the path itself when local; for a URL the
    object downloaded in one streaming GET to a temporary file (``RECIO_STAGING_DIR``, else
    ``TMPDIR``), deleted afterwards. For tools that need several passes or a memory map."""
    with local_copies([os.fspath(path)], storage_options) as (copy,):
        assert copy is not None  # local_copies gives None only for a missing sidecar
        yield copy


@contextmanager
def local_copies(paths: Sequence[str],
                 storage_options: StorageOptions = None) -> Iterator[List[Optional[str]]]:
    """Local paths for ``paths`` (a file and its sidecars, say): a local path as it is; the
    URLs downloaded, each in one streaming GET, into one temporary folder under their own
    names (so sidecars stay beside their file), deleted afterwards. A URL with no object
    gives None (the first one must exist)."""
    import shutil
    import tempfile

    if not any(is_url(p) for p in paths):
        yield [local_path(p) for p in paths]
        return
    folder = tempfile.mkdtemp(prefix=".recio-", dir=os.environ.get("RECIO_STAGING_DIR") or None)
    try:
        out: List[Optional[str]] = []
        for i, path in enumerate(paths):
            if not is_url(path):
                out.append(local_path(path))
            elif i == 0 or exists(path, storage_options):
                copy = os.path.join(folder, basename(path))
                download(path, copy, storage_options)
                out.append(copy)
            else:
                out.append(None)
        yield out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def open_input(path: PathLike, storage_options: StorageOptions = None) -> Any:
    """A binary file for reading: ``open(path, "rb")`` for a local regular file (anything else
    refused without blocking: ``recio.storage.regular``), a :class:`RemoteFile` for a URL."""
    if is_url(path):
        return RemoteFile(os.fspath(path), storage_options)
    return open_regular(path)

