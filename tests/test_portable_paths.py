"""Paths written on one OS and used on another (issue 33, deliverable 4).

* A URL is never mistaken for a Windows path nor a Windows path for a URL: ``C:\\data``,
  ``C:/data``, ``C://data`` and ``\\\\server\\share`` are local paths; ``s3://``, ``gs://``,
  ``http(s)://`` are URLs; ``file:///C:/x`` is ``C:/x`` on Windows.
* ``.lst`` files written by MXNet's im2rec on Windows (``cat\\1.jpg``, CRLF line ends) pack on
  Linux to the very bytes the same list with ``/`` and LF gives; a drive or UNC path, which no
  POSIX system can open, is a one-line error naming the list and line, with nothing written.
* Lists are written with ``/`` on every OS.

Windows itself cannot run here: where the behaviour depends on the OS the tests set
``os.name`` (as the code reads it) and use ``ntpath``/``PureWindowsPath`` for Windows' path
rules.
"""
import os

import pytest

from recio import storage


@pytest.mark.parametrize("path", [
    "C:\\data\\x.rec", "C:/data/x.rec", "c:x.rec", "\\\\server\\share\\x.rec", "C://data/x.rec",
    "D:", "x.rec", "/data/x.rec", "data/x.rec", "s3:x.rec",
])
def test_windows_and_posix_paths_are_never_urls(path):
    """A drive letter looks like a one-letter scheme (``C:``); a scheme needs two or more
    characters, so no Windows path, not even ``C://data``, is taken for a URL (which would send
    it to fsspec instead of the local code)."""
    assert storage.url_scheme(path) is None
    assert not storage.is_url(path)
    assert storage.local_path(path) == path


@pytest.mark.parametrize("url, scheme", [
    ("s3://bucket/key.rec", "s3"), ("gs://bucket/key.rec", "gs"),
    ("http://host/x.rec", "http"), ("https://host/x.rec", "https"),
    ("memory://x.rec", "memory"), ("S3://bucket/k", "s3"), ("git+ssh://h/x", "git+ssh"),
])
def test_urls_keep_their_scheme(url, scheme):
    """Every real scheme (two or more characters) is still a URL."""
    assert storage.url_scheme(url) == scheme
    assert storage.is_url(url)


@pytest.mark.parametrize("url, posix, windows", [
    ("file:///data/x.rec", "/data/x.rec", "/data/x.rec"),
    ("file:///C:/data/x.rec", "/C:/data/x.rec", "C:/data/x.rec"),
    ("file:///c:\\data\\x.rec", "/c:\\data\\x.rec", "c:\\data\\x.rec"),
    ("file://C:/data/x.rec", "C:/data/x.rec", "C:/data/x.rec"),
    ("file:///C:", "/C:", "/C:"),
])
def test_file_urls_become_the_local_path_of_this_os(monkeypatch, url, posix, windows):
    """``file:///C:/x`` names ``C:/x`` on Windows (``/C:/x`` is no path there); on POSIX the
    part after ``file://`` is the path as it is. A ``file://`` URL is local, never a URL."""
    assert storage.url_scheme(url) == "file" and not storage.is_url(url)
    assert storage.local_path(url) == posix
    monkeypatch.setattr(os, "name", "nt")
    assert storage.local_path(url) == windows


@pytest.mark.parametrize("path, expected", [
    ("C:\\data\\x.rec", True), ("C:/data/x.rec", True), ("z:\\x", True),
    ("\\\\server\\share\\x.rec", True), ("\\\\?\\C:\\x.rec", True),
    ("c:x.rec", False), ("C:", False), ("x\\y.rec", False), ("\\x.rec", False),
    ("/data/x.rec", False), ("s3://b/k", False), ("CD:\\x", False), ("1:\\x", False),
])
def test_windows_absolute_paths_are_recognised(path, expected):
    """Drive-absolute (``C:\\``, ``C:/``) and UNC (``\\\\server``) paths are the ones no POSIX
    system can open; a drive-relative ``c:x.rec`` or a rooted ``\\x.rec`` is not absolute on
    Windows either (Python 3.13's ``ntpath.isabs`` agrees)."""
    assert storage.is_windows_absolute(path) is expected
