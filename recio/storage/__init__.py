"""Where recio's files live: local paths, and URLs of object stores read through fsspec.

A *URL* is ``scheme://...`` with a scheme other than ``file``: ``s3://``, ``gs://``,
``http(s)://``, ``memory://`` and whatever else fsspec knows (``pip install 'recio[remote]'``
brings fsspec and s3fs; gcsfs for ``gs://``). ``file://`` URLs are local paths and take the
local code (memory maps, ``pread``); on Windows ``file:///C:/data/x.rec`` is ``C:/data/x.rec``.
A scheme has two or more characters, so a Windows path (``C:\\data\\x.rec``, ``C:/data/x.rec``,
``C://data``, ``c:x.rec``, ``\\\\server\\share\\x.rec``) is never a URL. Credentials and endpoints
come from ``storage_options`` (passed to fsspec, e.g. ``{"endpoint_url": ...}`` for S3) or the
standard environment (``AWS_ENDPOINT_URL``, ``AWS_ACCESS_KEY_ID``, ...; fsspec's ``FSSPEC_S3_...``).

This module is the one owner of how bytes cross the network:

* :class:`RemoteFile` reads an object by byte ranges. A read that continues where the last one
  ended (or starts a fresh file) opens one streaming GET to the end of the object (or the
  ``stream_end`` given), filled ahead by a thread in blocks of :data:`STREAM_BLOCK`, so a scan
  costs one request; any other read is one ranged GET (``prefetch(start, end)`` first makes a
  keyed read exactly one GET of the record's bytes); ``prefetch_many`` coalesces neighbouring
  ranges and runs the GETs concurrently; ``stream_into(buffer)`` reads the whole object in
  one streaming GET through a small buffer the caller reuses (to copy it into a file). It
  reopens its connection after ``fork`` and pickles as its URL.
* :func:`upload` puts a finished local file at a URL in one object write: an object store shows
  an object only once its upload completed, so the writers' promise (complete or absent) holds.
* Errors become one-line exceptions naming the URL: ``FileNotFoundError``, ``PermissionError``,
  or :class:`~recio.errors.StorageError` (network, server, a connection dropped mid-read).

The package, by job: ``paths`` (what a path or URL is, no I/O), ``regular`` (the one rule that
a local path recio opens is a regular file: FIFOs, devices, sockets and directories refused
without blocking), ``objects`` (the file system
behind a URL, its errors, whole-object operations), ``remote_file`` (``RemoteFile``: ranged and
streaming reads), ``copies`` (local copies and ``open_input``). Its exports are its API, for users
and for recio's own modules (which call ``storage.absolute``...), each loaded on first use.
"""
from __future__ import annotations

import typing as _typing

from recio._lazy import lazy_exports as _lazy_exports

if _typing.TYPE_CHECKING:  # what a type checker sees; _LAZY says the same (tests/meta/test_lazy.py)
    from recio.storage.copies import download, local_copies, local_copy, open_input
    from recio.storage.objects import (
        exists,
        filesystem,
        glob,
        info,
        isdir,
        isfile,
        listdir,
        missing,
        move,
        read_bytes,
        remove,
        remove_tree,
        size,
        upload,
    )
    from recio.storage.paths import (
        absolute,
        basename,
        dirname,
        is_url,
        is_windows_absolute,
        join,
        local_path,
        parse_size,
        PathLike,
        StorageOptions,
        url_scheme,
    )
    from recio.storage.regular import (
        check_output,
        check_regular,
        file_kind,
        open_regular,
        open_regular_fd,
    )
    from recio.storage.remote_file import STREAM_BLOCK, coalesce, RemoteFile

#: exported name -> the module that defines it, imported on first use
_LAZY = {
    "RemoteFile": "recio.storage.remote_file",
    "is_url": "recio.storage.paths",
    "url_scheme": "recio.storage.paths",
    "filesystem": "recio.storage.objects",
    "info": "recio.storage.objects",
    "size": "recio.storage.objects",
    "exists": "recio.storage.objects",
    "isfile": "recio.storage.objects",
    "isdir": "recio.storage.objects",
    "listdir": "recio.storage.objects",
    "glob": "recio.storage.objects",
    "read_bytes": "recio.storage.objects",
    "remove": "recio.storage.objects",
    "move": "recio.storage.objects",
    "upload": "recio.storage.objects",
    "download": "recio.storage.copies",
    "parse_size": "recio.storage.paths",
    "STREAM_BLOCK": "recio.storage.remote_file",
    "local_copies": "recio.storage.copies",
    "local_copy": "recio.storage.copies",
    "open_input": "recio.storage.copies",
    "missing": "recio.storage.objects",
    "remove_tree": "recio.storage.objects",
    "PathLike": "recio.storage.paths",
    "StorageOptions": "recio.storage.paths",
    "absolute": "recio.storage.paths",
    "basename": "recio.storage.paths",
    "dirname": "recio.storage.paths",
    "is_windows_absolute": "recio.storage.paths",
    "join": "recio.storage.paths",
    "local_path": "recio.storage.paths",
    "check_output": "recio.storage.regular",
    "check_regular": "recio.storage.regular",
    "file_kind": "recio.storage.regular",
    "open_regular": "recio.storage.regular",
    "open_regular_fd": "recio.storage.regular",
    "coalesce": "recio.storage.remote_file",
}

__all__ = list(_LAZY)

if not _typing.TYPE_CHECKING:  # a checker reads the imports above: a name not there is an error
    __getattr__, __dir__ = _lazy_exports(__name__, _LAZY, submodules=(
        "copies", "objects", "paths", "regular", "remote_file"))
