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
import json
import ntpath
import os
import pathlib
import subprocess

import numpy as np
import pytest
from PIL import Image

from conftest import need
from recio import storage
from recio.errors import ListFileError, ManifestError
from recio.image.tools.extract import _class_folder
from recio.image.list_folder import make_lists
from recio.image.lists import (
    foreign_list_path,
    list_entry,
    list_path_candidates,
    native_list_path,
    read_list,
    read_list_entries,
)
from recio.image.packing.settings import PackSettings
from recio.image.packing.worker import _inside, _read_image_file, _Skip, make_job
from recio.image.packing.pipeline import count_items, pack_list
from recio.image.packing.shards import pack_shards
from recio.mx import recordio as mx_recordio
from recio.records.index import open_index
from recio.records.manifest import load_manifest
from recio.records.source import expand_source


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


# -- .lst paths --------------------------------------------------------------------------------
@pytest.fixture
def photos(tmp_path):
    """ROOT with images in two class folders (one nested), and a secret file beside ROOT."""
    root = tmp_path / "root"
    rng = np.random.default_rng(3)
    for folder, n in (("cat", 3), ("dog/small", 2)):
        (root / folder).mkdir(parents=True)
        for i in range(n):
            Image.fromarray(rng.integers(0, 255, (12 + i, 16, 3), dtype=np.uint8)).save(
                root / folder / f"{i}.jpg", quality=90)
    (tmp_path / "secret.jpg").write_bytes(SENTINEL)
    return tmp_path, root


SENTINEL = b"SECRET-OUTSIDE-ROOT"
#: the photos' list as MXNet's im2rec writes it on Linux (``--list --recursive``, shuffled)
LINUX_LINES = ["2\t0.000000\tcat/2.jpg", "0\t0.000000\tcat/0.jpg",
               "4\t1.000000\tdog/small/1.jpg", "3\t1.000000\tdog/small/0.jpg",
               "1\t0.000000\tcat/1.jpg"]


def _write(path, lines, end="\n", sep="/"):
    path.write_bytes("".join(line.replace("/", sep) + end for line in lines).encode())
    return path


def _outputs(lst):
    stem = str(lst)[:-len(".lst")]
    return pathlib.Path(stem + ".rec").read_bytes(), pathlib.Path(stem + ".idx").read_bytes()


def _tree(folder):
    return {p.relative_to(folder): p.read_bytes() for p in sorted(folder.rglob("*"))
            if p.is_file()}


def test_native_list_path_reads_backslashes_as_the_writer_meant(monkeypatch):
    """On POSIX ``\\`` in a list path is a separator (MXNet on Windows joined with it); on
    Windows, which takes both separators, the path is used as written. Drive and UNC paths can
    be opened on Windows only."""
    assert native_list_path("cat\\1.jpg") == "cat/1.jpg"
    assert native_list_path("..\\..\\etc\\passwd") == "../../etc/passwd"
    assert native_list_path("a/b\\c.jpg") == "a/b/c.jpg"
    assert native_list_path("cat/1.jpg") == "cat/1.jpg"
    for path in ("C:\\data\\a.jpg", "C:/data/a.jpg", "\\\\server\\share\\a.jpg"):
        assert foreign_list_path(path)
    for path in ("c:a.jpg", "cat\\1.jpg", "/data/a.jpg", "..\\a.jpg"):
        assert not foreign_list_path(path)
    monkeypatch.setattr(os, "name", "nt")
    assert native_list_path("cat\\1.jpg") == "cat\\1.jpg"
    assert not foreign_list_path("C:\\data\\a.jpg")
    assert not foreign_list_path("\\\\server\\share\\a.jpg")


@pytest.mark.parametrize("relpath, sep, entry", [
    (ntpath.relpath("C:\\root\\dog\\small\\1.jpg", "C:\\root"), ntpath.sep, "dog/small/1.jpg"),
    (str(pathlib.PureWindowsPath("cat/0.jpg")), "\\", "cat/0.jpg"),
    ("cat/0.jpg", "/", "cat/0.jpg"),
    ("odd\\name.jpg", "/", "odd\\name.jpg"),  # a POSIX file name holding a backslash
])
def test_list_entries_use_slashes_on_every_os(relpath, sep, entry):
    """What a ``.lst`` line holds for a path relative to ROOT: ``/``-separated whatever the OS's
    separator, so a list made on Windows is MXNet's Linux list byte for byte."""
    assert list_entry(relpath, sep) == entry


def test_a_list_made_on_windows_is_the_list_made_on_linux(golden, photos, tmp_path,
                                                          monkeypatch):
    """``im2rec --list --recursive`` with Windows' separator (``os.sep`` and ``os.path.relpath``
    as Windows has them) writes the same ``.lst`` and classes file bytes as on Linux: for the
    golden images, the list MXNet 1.9.1 wrote on Linux."""
    _, root = photos
    make_lists(tmp_path / "linux", root, recursive=True)
    relpath = os.path.relpath
    monkeypatch.setattr(os, "sep", "\\")
    monkeypatch.setattr(os.path, "relpath",
                        lambda path, start=None: relpath(path, start).replace("/", "\\"))
    make_lists(tmp_path / "windows", root, recursive=True)
    make_lists(tmp_path / "all", golden / "im2rec" / "images", recursive=True)
    monkeypatch.undo()
    for suffix in (".lst", ".classes.tsv"):
        linux = (tmp_path / f"linux{suffix}").read_bytes()
        assert (tmp_path / f"windows{suffix}").read_bytes() == linux and b"\\" not in linux
    assert (tmp_path / "linux.lst").read_text(encoding="utf-8").splitlines() == LINUX_LINES
    assert (tmp_path / "all.lst").read_bytes() == (golden / "im2rec" / "all.lst").read_bytes()


@pytest.mark.parametrize("end, sep", [("\n", "\\"), ("\r\n", "/"), ("\r\n", "\\"), ("\n", "mixed")])
def test_a_windows_list_packs_to_the_bytes_of_the_linux_list(photos, end, sep):
    """A list written on Windows (``\\`` separators, CRLF line ends, or a mix of separators)
    packs to the very ``.rec`` and ``.idx`` bytes the same list with ``/`` and LF gives."""
    tmp, root = photos
    linux = _write(tmp / "linux.lst", LINUX_LINES)
    lines = ([line.replace("/", "\\", 1) for line in LINUX_LINES] if sep == "mixed"
             else [line.replace("/", sep) for line in LINUX_LINES])
    windows = _write(tmp / "windows.lst", lines, end)
    assert (b"\\" in windows.read_bytes()) is (sep != "/")
    assert pack_list(linux, root).packed == 5
    result = pack_list(windows, root)
    assert result.packed == 5 and result.skipped == 0
    assert _outputs(windows) == _outputs(linux)


@pytest.mark.slow
def test_the_command_packs_a_windows_list_like_a_linux_one(script, photos):
    """Through ``im2rec PREFIX ROOT`` (re-encoding, two threads): MXNet's Windows list gives
    the Linux list's files."""
    tmp, root = photos
    _write(tmp / "linux.lst", LINUX_LINES)
    _write(tmp / "windows.lst", LINUX_LINES, "\r\n", "\\")
    for stem in ("linux", "windows"):
        proc = subprocess.run([*script("im2rec"), str(tmp / stem), str(root), "--num-thread",
                               "2", "--quality", "80"], capture_output=True,
                              encoding="utf-8", timeout=120)
        assert proc.returncode == 0 and "packed 5 images" in proc.stdout, proc.stderr
    assert _outputs(tmp / "windows.lst") == _outputs(tmp / "linux.lst")


@pytest.mark.parametrize("path", ["..\\secret.jpg", "cat\\..\\..\\secret.jpg",
                                  "..\\..\\..\\..\\..\\..\\etc\\passwd", "\\etc\\passwd"])
def test_backslash_paths_leaving_root_are_outside_root(photos, path):
    """``..\\..\\etc\\passwd`` leaves ROOT exactly as ``../../etc/passwd`` does: skipped as
    outside ROOT, its bytes never read (and a rooted ``\\etc\\passwd`` is absolute)."""
    tmp, root = photos
    for name, written in (("slash", path.replace("\\", "/")), ("backslash", path)):
        lst = _write(tmp / f"{name}.lst", [f"0\t0\t{written}", "1\t0\tcat/0.jpg"])
        result = pack_list(lst, root, PackSettings(pass_through=True))
        assert result.packed == 1 and result.skips == {"outside_root": 1}, name
        assert SENTINEL not in _outputs(lst)[0] and b"root:" not in _outputs(lst)[0]


def test_allow_outside_root_reads_a_backslash_path_there(photos):
    """With ``allow_outside_root`` a ``..\\`` path is read where it leads, as ``../``."""
    tmp, root = photos
    lst = _write(tmp / "out.lst", ["0\t0\t..\\secret.jpg", "1\t0\tcat\\0.jpg"])
    result = pack_list(lst, root, PackSettings(pass_through=True, allow_outside_root=True))
    assert result.packed == 2 and SENTINEL in _outputs(lst)[0]


@pytest.mark.slow
@pytest.mark.parametrize("path", ["C:\\data\\cat\\0.jpg", "C:/data/cat/0.jpg",
                                  "\\\\server\\share\\cat\\0.jpg", "d:\\x.jpg"])
@pytest.mark.parametrize("extra", [[], ["--allow-outside-root"], ["--num-shards", "2"]])
def test_a_drive_or_unc_path_is_a_one_line_error_and_nothing_is_written(script, photos, path,
                                                                         extra):
    """A Windows absolute path names no file on POSIX: the command stops before writing
    anything, with one line naming the list and line and saying how to make a list that
    packs here (never a traceback, never a pack of the other lines)."""
    tmp, root = photos
    _write(tmp / "win.lst", ["0\t0\tcat/1.jpg", f"1\t0\t{path}", "2\t0\tcat/2.jpg"], "\r\n")
    before = _tree(tmp)
    proc = subprocess.run([*script("im2rec"), str(tmp / "win"), str(root), *extra],
                          capture_output=True, encoding="utf-8", timeout=120)
    assert proc.returncode == 2, proc.stderr
    message = proc.stderr.strip()
    assert len(message.splitlines()) == 1 and "Traceback" not in message
    assert f"{tmp / 'win.lst'}: line 2: " in message and repr(path) in message
    assert "Windows absolute path" in message and "im2rec PREFIX ROOT --list" in message
    assert _tree(tmp) == before


@pytest.mark.parametrize("path, cause", [
    ("cat\\0.jpg", None), ("cat/0.jpg", None), ("..\\secret.jpg", "outside_root"),
    ("\\secret.jpg", "outside_root"), ("C:\\photos\\cat\\0.jpg", "outside_root"),
    ("cat\\9.jpg", "missing"),
])
def test_a_url_root_reads_backslash_paths_as_object_keys(path, cause):
    """Under a URL ROOT (``s3://bucket/photos``; ``memory://`` here) a list path is an object
    key below ROOT: ``\\`` is ``/`` on every OS, and ``..\\``, a rooted or a drive path is
    outside ROOT."""
    fsspec = need("fsspec")
    fsspec.filesystem("memory").pipe("/portable-root/cat/0.jpg", b"cat zero")
    job = make_job("memory://portable-root", PackSettings(pass_through=True))
    if cause is None:
        assert _read_image_file(job, path) == b"cat zero"
    else:
        with pytest.raises(_Skip) as skipped:
            _read_image_file(job, path)
        assert skipped.value.cause == cause


def test_drive_paths_are_refused_by_the_library_too(photos):
    """``pack_list`` and ``pack_shards`` raise :class:`ListFileError` (a ``RecordIOError``)
    before any output exists."""
    tmp, root = photos
    lst = _write(tmp / "win.lst", ["0\t0\tcat\\1.jpg", "1\t0\tC:\\photos\\cat\\0.jpg"])
    before = _tree(tmp)
    with pytest.raises(ListFileError, match="line 2: .*Windows absolute path"):
        pack_list(lst, root)
    with pytest.raises(ListFileError, match="line 2: .*Windows absolute path"):
        pack_shards(lst, root, PackSettings(num_shards=2))
    assert _tree(tmp) == before


def test_the_root_check_ignores_case_on_windows(monkeypatch):
    """Windows' paths are case-insensitive: ``C:\\Photos\\cat\\0.jpg`` is inside ROOT
    ``c:\\photos`` (realpath may spell either), ``C:\\photos2\\x.jpg`` is not."""
    monkeypatch.setattr(os, "path", ntpath)
    monkeypatch.setattr(os, "sep", "\\")
    assert _inside("C:\\Photos\\cat\\0.jpg", "c:\\photos")
    assert _inside("C:\\PHOTOS", "c:\\photos")
    assert not _inside("C:\\photos2\\x.jpg", "C:\\photos")
    assert not _inside("D:\\photos\\x.jpg", "C:\\photos")


def test_a_file_name_holding_backslashes_is_used_when_no_separated_path_exists(photos):
    """A Linux file may be named ``x\\1.jpg`` (MXNet's im2rec on Linux lists it so): it is
    packed when ``x/1.jpg`` does not exist; when both exist, the separated path wins (a list
    from Windows means it)."""
    tmp, root = photos
    (root / "x\\1.jpg").write_bytes(b"literal")
    lst = _write(tmp / "lit.lst", ["0\t0\tx\\1.jpg"])
    assert pack_list(lst, root, PackSettings(pass_through=True)).packed == 1
    assert b"literal" in _outputs(lst)[0]
    (root / "x").mkdir()
    (root / "x" / "1.jpg").write_bytes(b"separated")
    assert pack_list(lst, root, PackSettings(pass_through=True, force=True)).packed == 1
    rec = _outputs(lst)[0]
    assert b"separated" in rec and b"literal" not in rec


def test_crlf_lists_read_like_lf_lists(tmp_path):
    """MXNet on Windows wrote lists in text mode (CRLF): every reader gives the LF items."""
    lf = _write(tmp_path / "lf.lst", LINUX_LINES)
    crlf = _write(tmp_path / "crlf.lst", LINUX_LINES, "\r\n")
    assert list(read_list(crlf)) == list(read_list(lf))
    assert list(read_list_entries(crlf)) != [] and [
        (n, item) for n, item, _ in read_list_entries(crlf)] == [
        (n, item) for n, item, _ in read_list_entries(lf)]
    assert count_items(crlf) == count_items(lf) == 5


def test_crlf_indexes_read_like_lf_indexes(photos):
    """An ``.idx`` MXNet's ``MXIndexedRecordIO`` wrote on Windows (text mode: CRLF) gives the
    same keys, offsets and records as the LF one, through recio's index and MXNet's API."""
    tmp, root = photos
    lst = _write(tmp / "p.lst", LINUX_LINES)
    pack_list(lst, root, PackSettings(pass_through=True))
    rec, idx = str(tmp / "p.rec"), tmp / "p.idx"
    lf = idx.read_bytes()
    crlf = tmp / "crlf.idx"
    crlf.write_bytes(lf.replace(b"\n", b"\r\n"))
    assert crlf.read_bytes() != lf
    want = open_index(idx, rec_size=os.path.getsize(rec))
    got = open_index(crlf, rec_size=os.path.getsize(rec))
    assert got.key_array().tolist() == want.key_array().tolist() == [2, 0, 4, 3, 1]
    assert got.offsets.tolist() == want.offsets.tolist()
    lf_io = mx_recordio.MXIndexedRecordIO(str(idx), rec, "r")
    crlf_io = mx_recordio.MXIndexedRecordIO(str(crlf), rec, "r")
    assert crlf_io.keys == lf_io.keys
    assert [crlf_io.read_idx(k) for k in crlf_io.keys] == [lf_io.read_idx(k) for k in lf_io.keys]
    lf_io.close()
    crlf_io.close()


def test_mx_image_iter_reads_a_windows_imglist(photos):
    """``mx.image.ImageIter(path_imglist=..., path_root=...)`` takes MXNet's Windows list
    (CRLF, ``\\``): the same keys, labels and files as the Linux list, and the same batch."""
    import recio.mx as mx

    tmp, root = photos
    seen, batches = [], []
    for name, end, sep in (("linux", "\n", "/"), ("windows", "\r\n", "\\")):
        lst = _write(tmp / f"{name}.lst", LINUX_LINES, end, sep)
        it = mx.image.ImageIter(batch_size=5, data_shape=(3, 8, 8), path_imglist=str(lst),
                                path_root=str(root), resize=8)
        seen.append([(key, label.asnumpy().tolist(), it.read_image(path))
                     for key, (label, path) in sorted(it.imglist.items())])
        batch = it.next()
        batches.append((batch.data[0].asnumpy(), batch.label[0].asnumpy()))
    assert seen[0] == seen[1] and len(seen[0]) == 5
    np.testing.assert_array_equal(batches[0][0], batches[1][0])
    np.testing.assert_array_equal(batches[0][1], batches[1][1])
    assert sorted(batches[0][1].tolist()) == [0, 0, 0, 1, 1]


@pytest.mark.parametrize("name, folder", [
    ("cat", "cat/"), ("dog\\small", "dog/small/"), ("dog/small", "dog/small/"),
    ("C:\\cats", ""), ("\\\\server\\cats", ""), ("..\\up", ""), ("/abs", ""), (".", ""),
])
def test_extract_class_folders_are_list_paths(name, folder):
    """``recio extract``'s class folders come from a classes file (perhaps written on
    Windows): read as a list path, written with ``/``; an absolute or ``..`` one is not used
    (the image lands in OUT_DIR itself)."""
    assert _class_folder(1.0, {1: name}) == folder


@pytest.mark.slow
@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-le", "utf-16-be"])
def test_a_utf16_list_says_so(script, photos, encoding):
    """Windows PowerShell's ``>`` writes UTF-16: such a list is no list of UTF-8 lines, and the
    pack's one-line error says what the file is and how to save it (not "the index must be an
    integer, not '\\x000\\x00'"), writing nothing."""
    tmp, root = photos
    (tmp / "ps.lst").write_bytes("".join(line.replace("/", "\\") + "\r\n"
                                         for line in LINUX_LINES).encode(encoding))
    before = _tree(tmp)
    proc = subprocess.run([*script("im2rec"), str(tmp / "ps"), str(root)], capture_output=True,
                          encoding="utf-8", timeout=120)
    assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert "line 1: the list is UTF-16" in proc.stderr and "save it as UTF-8" in proc.stderr
    assert _tree(tmp) == before


def test_a_cp1252_list_from_windows_finds_the_utf8_names(photos):
    """MXNet's im2rec on Windows wrote lists in the ANSI code page (cp1252 in Western Europe
    and the Americas): ``caf\\xe9\\1.jpg`` is no UTF-8. Where no file has those bytes as its
    name, the cp1252 reading names the image (``café/1.jpg``, UTF-8 on Linux), and the pack
    equals the UTF-8 list's. A file whose name has the very bytes (Latin-1 names on Linux) is
    still found first."""
    tmp, root = photos
    (root / "café").mkdir()
    (root / "café" / "1.jpg").write_bytes((root / "cat" / "1.jpg").read_bytes())
    lines = ["0\t0.000000\tcafé/1.jpg", "1\t0.000000\tcat/0.jpg"]
    utf8 = _write(tmp / "utf8.lst", lines)
    cp1252 = tmp / "cp1252.lst"
    cp1252.write_bytes("".join(line.replace("/", "\\") + "\r\n" for line in lines)
                       .encode("cp1252"))
    assert b"caf\xe9\\1.jpg" in cp1252.read_bytes()
    assert pack_list(utf8, root).packed == 2
    assert pack_list(cp1252, root).packed == 2
    assert _outputs(cp1252) == _outputs(utf8)
    (root / os.fsdecode(b"caf\xe9")).mkdir()
    (root / os.fsdecode(b"caf\xe9") / "1.jpg").write_bytes(b"latin-1 name")
    assert pack_list(cp1252, root, PackSettings(pass_through=True, force=True)).packed == 2
    assert b"latin-1 name" in _outputs(cp1252)[0]


def test_list_path_candidates_in_order(monkeypatch):
    """The names a list path may mean, likeliest first, each once: the separated path, the
    path as written, then the same two read as cp1252 (only for a path that is not UTF-8)."""
    raw = os.fsdecode(b"caf\xe9\\1.jpg")
    assert list(list_path_candidates("cat\\1.jpg")) == ["cat/1.jpg", "cat\\1.jpg"]
    assert list(list_path_candidates("cat/1.jpg")) == ["cat/1.jpg"]
    assert list(list_path_candidates("café\\1.jpg")) == ["café/1.jpg", "café\\1.jpg"]
    assert list(list_path_candidates(raw)) == [raw.replace("\\", "/"), raw, "café/1.jpg",
                                               "café\\1.jpg"]
    assert list(list_path_candidates(os.fsdecode(b"\x81.jpg"))) == [os.fsdecode(b"\x81.jpg")]
    monkeypatch.setattr(os, "name", "nt")
    assert list(list_path_candidates(raw)) == [raw, "café\\1.jpg"]


@pytest.mark.slow
def test_the_golden_list_written_on_windows_packs_to_mxnets_bytes(script, golden, tmp_path):
    """The golden list as MXNet on Windows would have written it (``\\``, CRLF), packed on
    Linux with the golden options, gives the very ``.rec`` and ``.idx`` MXNet 1.9.1 wrote."""
    src = golden / "im2rec"
    text = (src / "all.lst").read_bytes()
    assert b"/" in text
    (tmp_path / "all.lst").write_bytes(text.replace(b"/", b"\\").replace(b"\n", b"\r\n"))
    proc = subprocess.run([*script("im2rec"), str(tmp_path / "all"), str(src / "images"),
                           "--resize", "32", "--quality", "90"], capture_output=True,
                          encoding="utf-8", timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "all.rec").read_bytes() == (src / "all.rec").read_bytes()
    assert (tmp_path / "all.idx").read_bytes() == (src / "all.idx").read_bytes()


# -- sources and manifests --------------------------------------------------------------------
def test_sources_with_drive_like_names_are_local_files(tmp_path, monkeypatch):
    """An InputSplit source never splits on ``:`` nor takes a drive letter for a scheme: on
    POSIX ``C:\\data\\a.rec`` is a (strange but legal) local file name and ``C:/data`` (or
    ``C://data``) a local folder, whether named alone, in an ``a;b`` list, as a folder or as
    a glob (on Windows they are the drive paths they look like, the same code path: local, not
    fsspec)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "C:\\data\\a.rec").write_bytes(b"a")
    (tmp_path / "C:" / "data").mkdir(parents=True)
    for name in ("b.rec", "c.rec"):
        (tmp_path / "C:" / "data" / name).write_bytes(b"b")
    assert expand_source("C:\\data\\a.rec;C:/data/b.rec") == ["C:\\data\\a.rec",
                                                             "C:/data/b.rec"]
    assert expand_source("C:/data") == ["C:/data/b.rec", "C:/data/c.rec"]
    assert expand_source("C://data/b.rec") == ["C://data/b.rec"]  # once taken for scheme "c"
    assert expand_source(["C:/data/*.rec", "C:\\data\\a.rec"]) == [
        "C:/data/b.rec", "C:/data/c.rec", "C:\\data\\a.rec"]
    with pytest.raises(FileNotFoundError):
        expand_source("D:\\missing.rec")  # a missing local file, never an unknown scheme


def _manifest_naming(rec):
    return json.dumps({"format": "recio.shards", "version": 1, "checksum": "crc32", "shards": [
        {"rec": rec, "idx": "x.idx", "rec_crc32": "0", "idx_crc32": "0", "records": 1,
         "rec_bytes": 1, "idx_bytes": 1}]})


@pytest.mark.parametrize("rec", ["C:\\data\\x.rec", "C:/data/x.rec", "\\\\server\\s\\x.rec",
                                 "\\x.rec", "..\\x.rec", "/x.rec"])
def test_a_manifest_naming_a_windows_path_is_refused(tmp_path, rec):
    """A manifest's shards are file names beside it; a drive, UNC or rooted Windows path (or
    ``..\\``) would lead elsewhere on Windows and names nothing on POSIX: a one-line
    ``ManifestError`` naming the manifest."""
    path = tmp_path / "set.manifest.json"
    path.write_text(_manifest_naming(rec), encoding="utf-8")
    with pytest.raises(ManifestError, match="must be a file name beside the manifest"):
        load_manifest(path)
    path.write_text(_manifest_naming("x-00000.rec"), encoding="utf-8")
    assert load_manifest(path).shards[0].rec == str(tmp_path / "x-00000.rec")
