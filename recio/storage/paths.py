"""Local paths and URLs told apart and taken apart, without touching any file or server.

What is a URL (``scheme://``, two or more characters, so a Windows drive is never one), the
local path of a ``file://`` URL, and joining, splitting and absolutising either kind the way
its own world does; ``parse_size`` reads the sizes users type (``64MB``, ``2GiB``).
"""
from __future__ import annotations

import os
import re
from typing import Any, Dict, Optional, Union

PathLike = Union[str, "os.PathLike[str]"]
StorageOptions = Optional[Dict[str, Any]]

#: ``scheme://``; a scheme of one letter is a Windows drive (``C://data``), not a URL
_URL = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]+)://")
#: an absolute Windows path: a drive and a separator (``C:\\``, ``C:/``) or a UNC share (``\\\\``)
_WINDOWS_ABSOLUTE = re.compile(r"^(?:[A-Za-z]:[\\/]|\\\\)")


# dd's convention: KB/MB/GB are powers of 1000, K/M/G and KiB/MiB/GiB powers of 1024
_SIZE_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "TB": 10**12, "K": 2**10,
               "M": 2**20, "G": 2**30, "T": 2**40, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30,
               "TIB": 2**40}


def parse_size(text: Union[str, int]) -> int:
    """A byte count written for people: ``"32MB"`` -> 32000000, ``"32M"``/``"32MiB"`` ->
    33554432, ``"600"`` (or 600) -> 600. ``ValueError`` saying how to write one otherwise."""
    if isinstance(text, int) and not isinstance(text, bool):
        value = text
    else:
        match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", str(text))
        unit = match.group(2).upper() if match else None
        if match is None or unit not in _SIZE_UNITS:
            raise ValueError(f"{text!r} is not a size: use e.g. 600, 64K, 32MB, 32MiB, 50GB")
        value = int(float(match.group(1)) * _SIZE_UNITS[unit])
    if value < 1:
        raise ValueError(f"{text!r}: a size needs at least 1 byte")
    return value


def url_scheme(path: Any) -> Optional[str]:
    """The scheme of a URL (``"s3"``), or None for a local path."""
    if not isinstance(path, str):
        return None
    match = _URL.match(path)
    return match.group(1).lower() if match else None


def is_url(path: Any) -> bool:
    """True for a remote URL (any ``scheme://`` except ``file://``, which is a local path)."""
    scheme = url_scheme(path)
    return scheme is not None and scheme != "file"


def is_windows_absolute(path: Any) -> bool:
    """True for a path that is absolute on Windows: a drive and a separator (``C:\\data``,
    ``C:/data``) or a UNC share (``\\\\server\\share``): written for Windows, it cannot be opened
    on POSIX (where ``C:\\data`` would be a relative file name). A drive-relative ``c:x.rec``
    is not absolute (and on POSIX a legal file name)."""
    return isinstance(path, str) and _WINDOWS_ABSOLUTE.match(path) is not None


def local_path(path: PathLike) -> str:
    """``path`` as a string, with ``file://`` removed (a local path stays as it is):
    ``file:///data/x`` is ``/data/x``, and on Windows ``file:///C:/data/x`` is ``C:/data/x``."""
    text = os.fspath(path)
    if url_scheme(text) == "file":
        text = text[len("file://"):]
        if os.name == "nt" and is_windows_absolute(text[1:]) and text[:1] == "/":
            text = text[1:]
    return text


def absolute(path: PathLike) -> str:
    """A local path made absolute (``file://`` removed); a URL as it is."""
    text = local_path(path)
    return text if is_url(text) else os.path.abspath(text)


def join(folder: str, name: str) -> str:
    """``folder/name`` for a local folder or a URL."""
    if is_url(folder):
        return folder.rstrip("/") + "/" + name
    return os.path.join(folder, name)


def dirname(path: str) -> str:
    """The folder part of a local path or URL."""
    if is_url(path):
        return path.rsplit("/", 1)[0]
    return os.path.dirname(path)


def basename(path: str) -> str:
    """The last part of a local path or URL."""
    return path.rstrip("/").rsplit("/", 1)[-1] if is_url(path) else os.path.basename(path)

