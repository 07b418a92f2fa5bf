"""The file system behind a URL: fsspec's, looked up once per call, with one-line errors.

``filesystem`` finds the fsspec file system of a URL (saying what to install when it is
missing); ``translated`` turns whatever fsspec and its backends raise into ``FileNotFoundError``,
``PermissionError`` or :class:`~recio.errors.StorageError` naming the URL. On top of them, the
whole-object operations (``info``, ``size``, ``exists``, ``listdir``, ``glob``, ``read_bytes``,
``remove``, ``upload``, ``move``, ``remove_tree``), each of which takes a local path too.
"""
from __future__ import annotations

import errno
import os
from contextlib import contextmanager
from typing import Any, Dict, Iterator, List, Optional, Tuple

from recio.errors import StorageError
from recio.optional import require
from recio.storage.paths import PathLike, StorageOptions, is_url, local_path, url_scheme
from recio.storage.regular import open_regular

# -- the file system behind a URL -----------------------------------------------------------
def filesystem(url: str, storage_options: StorageOptions = None) -> Tuple[Any, str]:
    """``(fsspec file system, path inside it)`` for ``url``; ``ImportError`` saying what to
    install when fsspec or the scheme's backend is missing."""
    fsspec = require("fsspec", feature=f"reading {url_scheme(url)}:// URLs")
    # no listings cache: other processes (Ray tasks, a second machine) write the same bucket,
    # and a listing cached before their writes makes fsspec call their objects missing, or
    # folders (s3fs's info answers from a parent's cached listing)
    options = {"use_listings_cache": False, **(storage_options or {})}
    try:
        return fsspec.core.url_to_fs(url, **options)
    except ImportError as exc:
        raise ImportError(f"{url_scheme(url)}:// URLs need a backend for fsspec: "
                          f"pip install 'recio[remote]' (s3fs), or gcsfs for gs:// "
                          f"({exc})") from exc
    except ValueError as exc:
        raise StorageError(f"cannot open this URL: {_one_line(exc)}", url) from exc


def _one_line(exc: BaseException, limit: int = 300) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


def missing(path: PathLike) -> FileNotFoundError:
    """The error for nothing at ``path``, worded as every missing file or object is."""
    if is_url(path):
        return FileNotFoundError(errno.ENOENT, "no such object (or bucket)", os.fspath(path))
    return FileNotFoundError(errno.ENOENT, "No such file", os.fspath(path))


@contextmanager
def translated(url: str, action: str = "reading", offset: Optional[int] = None) -> Iterator[None]:
    """Turn what fsspec and its backends raise into one-line errors naming ``url``."""
    try:
        yield
    except (StorageError, ImportError):
        raise
    except FileNotFoundError as exc:
        raise missing(url) from exc
    except PermissionError as exc:
        raise PermissionError(errno.EACCES, f"access denied while {action} "
                                            f"({_one_line(exc, 200)})", url) from exc
    except IsADirectoryError as exc:
        raise IsADirectoryError(errno.EISDIR, "is a folder, not an object", url) from exc
    except Exception as exc:  # network, server and protocol errors of any backend
        raise StorageError(f"{action} failed: {type(exc).__name__}: {_one_line(exc)}; check "
                           f"the URL, the endpoint and the credentials, then retry",
                           url, offset) from exc


def info(url: str, storage_options: StorageOptions = None) -> Dict[str, Any]:
    """fsspec's ``info`` of ``url`` (``size``, ``type``)."""
    fs, path = filesystem(url, storage_options)
    with translated(url, "looking up"):
        return fs.info(path)


def size(path: PathLike, storage_options: StorageOptions = None) -> int:
    """Bytes in the file or object at ``path``."""
    if is_url(path):
        return int(info(os.fspath(path), storage_options)["size"])
    return os.path.getsize(local_path(path))


def _test(path: PathLike, storage_options: StorageOptions, name: str) -> bool:
    """``os.path.<name>(path)`` for a local path, fsspec's ``<name>`` for a URL."""
    if is_url(path):
        fs, inner = filesystem(os.fspath(path), storage_options)
        with translated(os.fspath(path), "looking up"):
            return bool(getattr(fs, name)(inner))
    return bool(getattr(os.path, name)(local_path(path)))


def exists(path: PathLike, storage_options: StorageOptions = None) -> bool:
    """Whether a file, folder or object exists at ``path``."""
    return _test(path, storage_options, "exists")


def isfile(path: PathLike, storage_options: StorageOptions = None) -> bool:
    """Whether ``path`` is a file (an object, for a URL)."""
    return _test(path, storage_options, "isfile")


def isdir(path: PathLike, storage_options: StorageOptions = None) -> bool:
    """Whether ``path`` is a folder (a prefix holding objects, for a URL)."""
    return _test(path, storage_options, "isdir")


def _as_url(url: str, fs: Any, inner: str) -> str:
    """The URL of ``inner`` (a path fsspec returned) in the scheme ``url`` was given in."""
    return fs.unstrip_protocol(inner) if url_scheme(url) else inner


def listdir(folder: str, storage_options: StorageOptions = None) -> List[str]:
    """The files (objects) directly in ``folder``, as full paths or URLs, in name order."""
    if not is_url(folder):
        folder = local_path(folder)
        return sorted(os.path.join(folder, n) for n in os.listdir(folder))
    fs, inner = filesystem(folder, storage_options)
    with translated(folder, "listing"):
        found = fs.ls(inner, detail=True)
    return sorted(_as_url(folder, fs, e["name"]) for e in found if e.get("type") == "file")


def glob(pattern: str, storage_options: StorageOptions = None) -> List[str]:
    """Files matching ``pattern`` (a URL pattern for a URL), in name order."""
    if not is_url(pattern):
        import glob as local_glob

        return sorted(p for p in local_glob.glob(local_path(pattern)) if os.path.isfile(p))
    fs, inner = filesystem(pattern, storage_options)
    with translated(pattern, "listing"):
        found = fs.glob(inner, detail=True)
    return sorted(_as_url(pattern, fs, name) for name, e in found.items()
                  if e.get("type") == "file")


def read_bytes(path: PathLike, storage_options: StorageOptions = None) -> bytes:
    """The whole file at ``path`` (for small files: manifests, lists, indexes)."""
    if is_url(path):
        url = os.fspath(path)
        fs, inner = filesystem(url, storage_options)
        with translated(url):
            return fs.cat_file(inner)
    with open_regular(path) as f:
        return f.read()


def remove(path: PathLike, storage_options: StorageOptions = None) -> None:
    """Delete the file or object at ``path`` if it exists."""
    if is_url(path):
        url = os.fspath(path)
        fs, inner = filesystem(url, storage_options)
        with translated(url, "deleting"):
            if fs.exists(inner):
                fs.rm_file(inner)
        return
    try:
        os.unlink(local_path(path))
    except FileNotFoundError:
        pass


def upload(local: str, url: str, storage_options: StorageOptions = None) -> None:
    """Put the finished local file ``local`` at ``url`` as one object (visible only once the
    upload completed)."""
    fs, inner = filesystem(url, storage_options)
    with translated(url, "uploading"):
        fs.put_file(local, inner)


def move(source: PathLike, target: PathLike, storage_options: StorageOptions = None) -> None:
    """Give the finished file ``source`` the name ``target`` (replacing it): a rename for local
    paths (one file system), a copy on the server then a delete for objects in one store."""
    if is_url(source) or is_url(target):
        src_fs, src = filesystem(os.fspath(source), storage_options)
        _, dst = filesystem(os.fspath(target), storage_options)
        with translated(os.fspath(target), "moving"):
            src_fs.mv(src, dst)
        return
    os.replace(local_path(source), local_path(target))


def remove_tree(folder: PathLike, storage_options: StorageOptions = None) -> None:
    """Delete ``folder`` and everything in it, if it exists (a URL: every object under it)."""
    if is_url(folder):
        url = os.fspath(folder)
        fs, inner = filesystem(url, storage_options)
        with translated(url, "deleting"):
            if fs.exists(inner):
                fs.rm(inner, recursive=True)
        return
    import shutil

    shutil.rmtree(local_path(folder), ignore_errors=True)
