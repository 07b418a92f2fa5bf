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
streaming reads), ``copies`` (local copies and ``open_input``). The names below are its API:
``__all__`` for users, the rest for recio's own modules (which call ``storage.absolute``...).
"""
from __future__ import annotations

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
    PathLike,
    StorageOptions,
    absolute,
    basename,
    dirname,
    is_url,
    is_windows_absolute,
    join,
    local_path,
    parse_size,
    url_scheme,
)
from recio.storage.regular import (
    check_output,
    check_regular,
    file_kind,
    open_regular,
    open_regular_fd,
)
from recio.storage.remote_file import STREAM_BLOCK, RemoteFile, coalesce

__all__ = ["RemoteFile", "is_url", "url_scheme", "filesystem", "info", "size", "exists", "isfile",
           "isdir", "listdir", "glob", "read_bytes", "remove", "move", "upload", "download",
           "parse_size", "STREAM_BLOCK"]
