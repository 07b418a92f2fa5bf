"""Image lists (``.lst``): parse and write them exactly as MXNet's ``im2rec.py`` does.

A line is ``index \\t label_1 \\t ... \\t label_m \\t relative_path \\n`` with labels printed as
``%f``. Also here: the ``PREFIX.classes.tsv`` folder -> label map written beside the lists.
Generating lists from a folder (walk, shuffle, chunk and train/test/val cut, byte-identical to
MXNet's) is :mod:`recio.image.list_folder`.

Lists travel between operating systems (made on a Windows workstation, packed on a Linux
server), so their paths are read as the system that wrote them meant:

* Written: always with ``/`` and ``\\n`` (UTF-8, bytes), on every OS: MXNet's format on Linux, and
  a list made on Windows packs anywhere.
* Read: lines may end in ``\\r\\n`` (MXNet on Windows wrote its lists in text mode). On POSIX a
  ``\\`` in a path is a separator, as on Windows where MXNet's ``os.path.join`` put it there:
  ``cat\\1.jpg`` is ``cat/1.jpg`` and ``..\\x.jpg`` is ``../x.jpg`` (and so outside ROOT). Only
  when no file exists at that path is a file whose name holds the backslashes itself (legal on
  Linux, and listed so by MXNet there) used instead, and then, for a path that is not UTF-8,
  its cp1252 reading (MXNet on Windows wrote the ANSI code page; :func:`list_path_candidates`).
  A Windows absolute path (``C:\\data\\a.jpg``, ``C:/data/a.jpg``, ``\\\\server\\share\\a.jpg``)
  names no file on POSIX: packing refuses such a list at its first one, before writing
  anything. On Windows both separators and drive paths are native (an absolute one is outside
  ROOT, as on POSIX, unless ``--allow-outside-root``).
"""
from __future__ import annotations

import os
import struct
from numbers import Real
from typing import (
    Any,
    BinaryIO,
    Dict,
    Iterator,
    List,
    NamedTuple,
    Optional,
    Sequence,
    Tuple,
    Union,
)

from recio import storage
from recio.errors import ListFileError
from recio.records.atomic import atomic_open
from recio.storage import open_regular

PathLike = Union[str, "os.PathLike[str]"]

#: the record id is a uint64 in the image header, so the index column must fit in one
_MAX_INDEX = 2 ** 64 - 1

# paths are written and read back byte for byte even when they are not valid UTF-8
_ENCODING, _ERRORS = "utf-8", "surrogateescape"


#: UTF-16's byte-order marks as read with ``surrogateescape`` (PowerShell 5 writes UTF-16 LE)
_UTF16_BOMS = ("\udcff\udcfe", "\udcfe\udcff")


class ListItem(NamedTuple):
    """One ``.lst`` line: ``index`` (the record key and id), its float labels and relative path."""

    index: int  # type: ignore[assignment]  # shadows tuple.index(): MXNet's name for the field
    labels: Tuple[float, ...]
    path: str


def format_list_line(index: int, labels: Union[Sequence[float], float], path: str) -> str:
    """MXNet's ``.lst`` line: ``"%d\\t" + "%f\\t" * len(labels) + "%s\\n"``."""
    values = (labels,) if isinstance(labels, (float, Real)) else labels
    return "%d\t%s%s\n" % (index, "".join("%f\t" % label for label in values), path)


def parse_list_line(line: str, path: Optional[PathLike] = None,
                    line_number: Optional[int] = None) -> ListItem:
    """Parse one ``.lst`` line; raises :class:`ListFileError` naming the file and line."""
    fields = [field.strip() for field in line.strip().split("\t")]
    where: Dict[str, Any] = {"path": None if path is None else os.fspath(path), "line": line_number}
    if line.startswith(_UTF16_BOMS) or "\0\t" in line or "\t\0" in line:
        raise ListFileError("the list is UTF-16 (as Windows PowerShell's '>' and Out-File "
                            "write it), not UTF-8: save it as UTF-8 without BOM", **where)
    if len(fields) < 3:
        raise ListFileError(f"{_too_few_fields(line, len(fields))}: {line.strip()[:80]!r}; fix "
                            "or delete this line", **where)
    if fields[0].startswith("\ufeff"):  # MXNet's im2rec skips this line too
        raise ListFileError("the line starts with a byte-order mark (BOM, as Notepad or Excel "
                            "save 'UTF-8 with BOM'): save the list as UTF-8 without BOM",
                            **where)
    try:
        index = int(fields[0])
    except ValueError:
        raise ListFileError(f"the index (first field) must be an integer, not {fields[0][:40]!r}",
                            **where) from None
    if not 0 <= index <= _MAX_INDEX:
        raise ListFileError(f"the index {index} is outside 0..2**64-1 (it becomes the uint64 "
                            "record id)", **where)
    try:
        labels = tuple(float(field) for field in fields[1:-1])
    except ValueError:
        bad = next(f for f in fields[1:-1] if not _is_float(f))
        raise ListFileError(f"labels (the fields between index and path) must be numbers, "
                            f"not {bad[:40]!r}", **where) from None
    try:  # labels are stored as float32 in the record header
        struct.pack("<%df" % len(labels), *labels)
    except OverflowError:
        big = next(x for x in labels if not _fits_float32(x))
        raise ListFileError(f"label {big!r} is too large for float32, the type record headers "
                            f"store labels in", **where) from None
    if not fields[-1]:
        raise ListFileError("the image path (last field) is empty", **where)
    if "\0" in fields[-1]:
        raise ListFileError(f"the image path {fields[-1][:80]!r} contains a NUL character",
                            **where)
    return ListItem(index, labels, fields[-1])


def _too_few_fields(line: str, tabbed: int) -> str:
    """Why a line has fewer than 3 tab-separated fields: other separators (spaces, commas),
    or fields missing."""
    text = line.strip()
    words, cells = text.split(), text.split(",")
    if len(words) >= 3 and words[0].isdigit():
        return ("fields must be separated by tabs, not spaces (index<TAB>label<TAB>path; "
                "a path may hold spaces)")
    if "\t" not in text and len(cells) >= 3 and cells[0].strip().isdigit():
        return "fields must be separated by tabs, not commas (index<TAB>label<TAB>path)"
    return (f"expected at least 3 tab-separated fields (index, label(s), path), found "
            f"{tabbed}")


def _fits_float32(value: float) -> bool:
    try:
        struct.pack("<f", value)
    except OverflowError:
        return False
    return True


def _is_float(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def read_list(path: PathLike) -> Iterator[ListItem]:
    """Stream the items of a ``.lst`` file; a malformed line raises :class:`ListFileError`.

    Blank lines are ignored (MXNet skips them too); any other line with fewer than three fields,
    a non-integer index or a non-numeric label is an error with the file and line number.
    """
    with open_regular(path, "r", encoding=_ENCODING, errors=_ERRORS, newline=None) as fin:
        for number, line in enumerate(fin, 1):
            if not line.strip():
                continue
            yield parse_list_line(line, path, number)


def read_list_entries(path: PathLike
                      ) -> Iterator[Tuple[int, Optional[ListItem], Optional[ListFileError]]]:
    """Every non-blank line of a ``.lst`` as ``(line_number, item, None)``, or
    ``(line_number, None, error)`` for a malformed one: for readers that skip bad lines and go
    on (as MXNet's im2rec does) instead of stopping at the first."""
    with open_regular(path, "r", encoding=_ENCODING, errors=_ERRORS, newline=None) as fin:
        for number, line in enumerate(fin, 1):
            if line.strip():
                try:
                    yield number, parse_list_line(line, path, number), None
                except ListFileError as exc:
                    yield number, None, exc


def native_list_path(path: str) -> str:
    """A ``.lst`` path as this OS names the file: on POSIX ``\\`` is a separator (``cat\\1.jpg`` is
    ``cat/1.jpg``); on Windows, which takes both separators, the path as written. A reader that
    finds no file there tries the others of :func:`list_path_candidates`."""
    return path if os.name == "nt" else path.replace("\\", "/")


def list_path_candidates(path: str) -> Iterator[str]:
    """The names a ``.lst`` path may mean on this OS, the likeliest first; a reader opens the
    first that exists. :func:`native_list_path`, then ``path`` as written (a POSIX file name
    holding ``\\``); for a path that is not UTF-8 (read as bytes, ``surrogateescape``), the
    same two of its bytes read as Windows' ANSI code page cp1252 (MXNet's im2rec on Windows
    wrote its lists in the locale's encoding: ``caf\\xe9\\1.jpg`` is ``café/1.jpg``)."""
    yield from _as_written(path)
    windows = _from_cp1252(path)  # only reached when none of the above exists
    if windows is not None:
        yield from _as_written(windows)


def _as_written(path: str) -> Iterator[str]:
    native = native_list_path(path)
    yield native
    if native != path:
        yield path


def _from_cp1252(path: str) -> Optional[str]:
    """``path``'s bytes read as cp1252 when they are not UTF-8 (else None)."""
    if not any("\udc80" <= c <= "\udcff" for c in path):  # surrogateescape's stand-ins
        return None
    try:
        return path.encode(_ENCODING, _ERRORS).decode("cp1252")
    except UnicodeDecodeError:  # a byte cp1252 leaves undefined: not written in cp1252
        return None


def foreign_list_path(path: str) -> bool:
    """True for a list path this OS cannot open at all: on POSIX a Windows drive or UNC path
    (``C:\\data\\a.jpg``, ``\\\\server\\share\\a.jpg``)."""
    return os.name != "nt" and storage.is_windows_absolute(path)


def list_entry(relpath: str, sep: Optional[str] = None) -> str:
    """The path a ``.lst`` line holds for ``relpath`` (relative to ROOT, as this OS's
    ``os.path.relpath`` gives it, or as one whose separator is ``sep``): ``/``-separated on
    every OS, so a list made on Windows packs on Linux and is byte-identical to one made there.
    On POSIX, where ``\\`` is a legal character of a file name, the path is kept as it is."""
    sep = sep or os.sep
    return relpath if sep == "/" else relpath.replace(sep, "/")


def write_list(path: PathLike, items: Sequence[Tuple[int, Sequence[float], str]]) -> None:
    """Write ``(index, labels, path)`` items as a ``.lst`` file, atomically."""
    with atomic_open(path, "wb") as fout:
        write_list_lines(fout, items)


def write_list_lines(fout: BinaryIO, items: Sequence[Tuple[int, Sequence[float], str]]) -> None:
    """The ``.lst`` lines of ``items`` into the open binary file ``fout`` (in blocks)."""
    buf: List[str] = []
    for index, labels, relpath in items:
        buf.append(format_list_line(index, labels, relpath))
        if len(buf) >= 4096:
            fout.write("".join(buf).encode(_ENCODING, _ERRORS))
            buf.clear()
    fout.write("".join(buf).encode(_ENCODING, _ERRORS))


#: suffix of the folder -> label map ``im2rec --list --recursive`` writes beside its lists
_CLASSES_SUFFIX = ".classes.tsv"
#: the files im2rec names after a PREFIX, which a PREFIX itself leaves out
_PREFIX_EXTENSIONS = (".lst", ".rec", ".idx")


def prefix_extension(prefix: PathLike) -> str:
    """The extension of one of im2rec's own files (:data:`_PREFIX_EXTENSIONS`, any case) that
    ``prefix`` ends with, or "". The one PREFIX rule of list and pack modes: a PREFIX names
    files without their extension (``data/train`` -> ``data/train.lst``, ``.rec``, ``.idx``);
    one ending in ``.lst`` names that one list (``data/train.lst``: PREFIX ``data/train``
    writing or packing only that list); one ending in ``.rec`` or ``.idx`` is refused with
    "did you mean data/train?"."""
    stem, ext = os.path.splitext(os.fspath(prefix))
    return ext if ext.lower() in _PREFIX_EXTENSIONS and storage.basename(stem) else ""


def classes_path(path: PathLike) -> str:
    """``PREFIX.classes.tsv`` for a prefix or any file named after it (``PREFIX.rec``,
    ``PREFIX.lst``, ``PREFIX_train.lst``'s prefix is ``PREFIX_train``)."""
    path = os.fspath(path)
    ext = prefix_extension(path)
    return path[:len(path) - len(ext)] + _CLASSES_SUFFIX


def find_classes(rec_path: PathLike) -> Optional[str]:
    """The classes file that names ``rec_path``'s labels: ``X.classes.tsv`` beside ``X.rec``,
    or for a list part (``P_train.rec``, ``P_3_val.rec``, ``P_3.rec``) the ``P.classes.tsv``
    written with the whole list; ``None`` when there is none."""
    stem = os.path.splitext(os.fspath(rec_path))[0]
    candidates = [stem]
    for suffix in ("_train", "_val", "_test"):
        if stem.endswith(suffix):
            stem = stem[:-len(suffix)]
            candidates.append(stem)
            break
    head, _, tail = stem.rpartition("_")
    if head and tail.isdigit():
        candidates.append(head)
    for candidate in candidates:
        if os.path.isfile(candidate + _CLASSES_SUFFIX):
            return candidate + _CLASSES_SUFFIX
    return None


def write_classes(path: PathLike, mapping: Sequence[Tuple[str, int]]) -> None:
    """Write ``label<TAB>folder`` lines (the ``(folder, label)`` pairs of
    :func:`~recio.image.list_folder.make_lists`), atomically. Folder names are written as stored
    (tab, CR and LF cannot occur in them: such folders are never listed)."""
    with atomic_open(path, "wb") as f:
        write_classes_lines(f, mapping)


def write_classes_lines(f: BinaryIO, mapping: Sequence[Tuple[str, int]]) -> None:
    """The classes file's header and ``label<TAB>folder`` lines into the open binary file ``f``."""
    f.write(b"label\tclass\n")
    for folder, label in mapping:
        f.write(f"{label}\t{folder}\n".encode(_ENCODING, _ERRORS))


def read_classes(path: PathLike) -> Dict[int, str]:
    """``{label: class name}`` from a classes file; :class:`ListFileError` naming the line
    when one is malformed."""
    out: Dict[int, str] = {}
    with open_regular(path) as f:
        for number, raw in enumerate(f, 1):
            line = raw.decode(_ENCODING, _ERRORS).rstrip("\r\n")
            if number == 1 and line == "label\tclass" or not line:
                continue
            label, sep, name = line.partition("\t")
            try:
                if not sep:
                    raise ValueError
                out[int(label)] = name
            except ValueError:
                raise ListFileError("expected 'label<TAB>class name' with an integer label, "
                                    f"found {line[:80]!r}", path=os.fspath(path),
                                    line=number) from None
    return out
