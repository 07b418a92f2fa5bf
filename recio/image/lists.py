"""Image lists (``.lst``): read, write and generate them exactly as MXNet's ``im2rec.py`` does.

A line is ``index \\t label_1 \\t ... \\t label_m \\t relative_path \\n`` with labels printed as
``%f``. Generating a list walks a folder (sorted, optionally recursive: one label per folder that
holds an image), shuffles it with ``random.seed(100); random.shuffle(...)`` and cuts it into
chunks and train/test/val parts; the files are byte-identical to MXNet's for the same options.

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

import difflib
import os
import random
import struct
from collections import Counter
from numbers import Real
from dataclasses import dataclass, field
from typing import (
    Any,
    BinaryIO,
    Callable,
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
from recio.errors import ListFileError, NothingFoundError, plural
from recio.records.atomic import AtomicFile, OutputSet, atomic_open, check_outputs

PathLike = Union[str, "os.PathLike[str]"]

#: extensions im2rec accepts by default (compared with the lower-cased file suffix)
DEFAULT_EXTS: Tuple[str, ...] = (".jpeg", ".jpg", ".png")

#: the record id is a uint64 in the image header, so the index column must fit in one
MAX_INDEX = 2 ** 64 - 1

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
    if not 0 <= index <= MAX_INDEX:
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
    with open(path, "r", encoding=_ENCODING, errors=_ERRORS, newline=None) as fin:
        for number, line in enumerate(fin, 1):
            if not line.strip():
                continue
            yield parse_list_line(line, path, number)


def read_list_entries(path: PathLike
                      ) -> Iterator[Tuple[int, Optional[ListItem], Optional[ListFileError]]]:
    """Every non-blank line of a ``.lst`` as ``(line_number, item, None)``, or
    ``(line_number, None, error)`` for a malformed one: for readers that skip bad lines and go
    on (as MXNet's im2rec does) instead of stopping at the first."""
    with open(path, "r", encoding=_ENCODING, errors=_ERRORS, newline=None) as fin:
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
        _write_list_lines(fout, items)


def _write_list_lines(fout: BinaryIO, items: Sequence[Tuple[int, Sequence[float], str]]) -> None:
    buf: List[str] = []
    for index, labels, relpath in items:
        buf.append(format_list_line(index, labels, relpath))
        if len(buf) >= 4096:
            fout.write("".join(buf).encode(_ENCODING, _ERRORS))
            buf.clear()
    fout.write("".join(buf).encode(_ENCODING, _ERRORS))


def normalize_exts(exts: Sequence[str]) -> Tuple[str, ...]:
    """Lower-case extensions with a leading dot; accepts ``"jpg"``, ``".JPG"``, ``".jpg,.png"``."""
    out: List[str] = []
    for ext in exts:
        for part in str(ext).split(","):
            part = part.strip().lower()
            if not part:
                continue
            part = part if part.startswith(".") else "." + part
            if part not in out:
                out.append(part)
    return tuple(out)


#: characters a ``.lst`` line cannot hold in a path (they end or split the line)
_UNLISTABLE = ("\t", "\r", "\n")


@dataclass
class ImageScan:
    """What walking an image folder found, and what it left out and why."""

    items: List[ListItem] = field(default_factory=list)
    #: ``(folder relative to root, label)`` in label order (recursive walks only)
    mapping: List[Tuple[str, int]] = field(default_factory=list)
    #: images skipped because their path holds a tab, CR or LF (a ``.lst`` cannot hold them)
    unlistable: int = 0
    unlistable_example: Optional[str] = None
    #: folders not entered again: a symlink leading to a folder already walked (a cycle or a
    #: second way into the same folder)
    revisits: int = 0
    revisit_example: Optional[str] = None
    #: without ``recursive``, when root itself holds no image: the images in its sub-folders,
    #: which only ``recursive`` lists
    in_subfolders: int = 0


def _folder_id(path: str) -> Optional[Tuple[int, int]]:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino)


def _walk_once(root: str, scan: ImageScan) -> Iterator[Tuple[str, List[str]]]:
    """``os.walk(root, followlinks=True)`` in sorted order that enters each real folder once:
    a symlink to a folder already walked (a cycle, a link to a parent, a second link to the
    same folder) is counted in ``scan.revisits`` and not entered."""
    seen = {_folder_id(root)}
    for folder, dirs, files in os.walk(root, followlinks=True):
        dirs.sort()
        keep = []
        for name in dirs:
            ident = _folder_id(os.path.join(folder, name))
            if ident is None or ident in seen:
                scan.revisits += 1
                if scan.revisit_example is None:
                    scan.revisit_example = os.path.relpath(os.path.join(folder, name), root)
                continue
            seen.add(ident)
            keep.append(name)
        dirs[:] = keep
        files.sort()
        yield folder, files


def _listable(relpath: str, scan: ImageScan) -> bool:
    if any(c in relpath for c in _UNLISTABLE):
        scan.unlistable += 1
        if scan.unlistable_example is None:
            scan.unlistable_example = relpath
        return False
    return True


def scan_images(root: PathLike, recursive: bool = False, exts: Sequence[str] = DEFAULT_EXTS,
                progress: Optional[Callable[[int], None]] = None) -> ImageScan:
    """Walk ``root`` as im2rec does, and count what cannot be listed.

    With ``recursive``, folders and files are walked in sorted order following symlinks (as
    MXNet's ``os.walk(followlinks=True)``) but each real folder only once, so a symlink cycle
    ends; each folder holding an image gets the next label. Otherwise only ``root``'s files are
    listed, with label 0 (and images in sub-folders are counted). Paths with a tab, CR or LF are
    skipped and counted. ``progress(n)`` is called with the number of files looked at.
    """
    root = os.path.abspath(os.fspath(root))
    if not os.path.isdir(root):
        raise NotADirectoryError(20, "not a directory", root)
    exts = normalize_exts(exts)
    scan = ImageScan()
    folders: dict = {}
    walk = _walk_once(root, scan) if recursive else iter([(root, sorted(os.listdir(root)))])
    for folder, files in walk:
        for name in files:
            full = os.path.join(folder, name)
            if os.path.splitext(name)[1].lower() in exts and os.path.isfile(full):
                relpath = list_entry(os.path.relpath(full, root))
                if not _listable(relpath, scan):
                    continue
                label = folders.setdefault(folder, len(folders)) if recursive else 0
                scan.items.append(ListItem(len(scan.items), (float(label),), relpath))
        if progress is not None:
            progress(len(files))
    scan.mapping = [(list_entry(os.path.relpath(folder, root)), label)
                    for folder, label in folders.items()]
    if not recursive and not scan.items:
        scan.in_subfolders = len(scan_images(root, True, exts).items)
    return scan


def _nothing_listed(scan: ImageScan, root: PathLike, recursive: bool,
                    exts: Sequence[str] = DEFAULT_EXTS) -> str:
    """Why a walk of ``root`` that listed nothing found nothing, and what to pass instead
    (``--recursive``, ``--exts``): for the message of a list that would be empty."""
    wanted = ", ".join(normalize_exts(exts))
    if scan.unlistable:
        return (f"every image's path holds a tab, CR or LF, which a .lst line cannot hold "
                f"(e.g. {scan.unlistable_example!r}): rename them")
    if not recursive and scan.in_subfolders:
        return (f"no file with extensions {wanted} directly in it, but "
                f"{plural(scan.in_subfolders, 'image')} in its sub-folders: add --recursive "
                "(each folder of images gets its own label)")
    here, below = _extensions(os.fspath(root))
    others = here + below if recursive else here
    if others:
        return (f"no file with extensions {wanted}{'' if recursive else ' directly in it'}, "
                f"but {_other_files(others)}{_exts_hint(others, '')}")
    if below:
        return (f"no file directly in it; its sub-folders hold {_other_files(below)}"
                f"{_exts_hint(below, '--recursive ')}")
    return "the folder and its sub-folders hold no files"


def near_folders(path: PathLike) -> List[str]:
    """Folders beside ``path`` (a folder that does not exist) whose names are near its name,
    nearest first, written as ``path`` was: for "did you mean photos?" after a typo."""
    parent, name = os.path.split(os.path.normpath(os.fspath(path)))
    try:
        folders = [d for d in os.listdir(parent or ".")
                   if os.path.isdir(os.path.join(parent or ".", d))]
    except OSError:
        return []
    return [os.path.join(parent, d) for d in difflib.get_close_matches(name, folders, n=3,
                                                                       cutoff=0.6)]


def _other_files(found: "Counter[str]") -> str:
    shown = ", ".join(f"{n:,} {ext or 'without extension'}" for ext, n in found.most_common(4))
    more = ", ..." if len(found) > 4 else ""
    return f"{plural(sum(found.values()), 'other file')} ({shown}{more})"


def _exts_hint(found: "Counter[str]", extra: str) -> str:
    exts = [ext for ext, _ in found.most_common() if ext][:4]
    return f": add {extra}--exts {','.join(exts)} if they are images" if exts else ""


def _extensions(root: str) -> Tuple["Counter[str]", "Counter[str]"]:
    """Lower-cased extensions of the files directly in ``root``, and of those below it."""
    here: Counter = Counter()
    below: Counter = Counter()
    for folder, files in _walk_once(root, ImageScan()):
        counter = here if folder == root else below
        for name in files:
            if os.path.isfile(os.path.join(folder, name)):
                counter[os.path.splitext(name)[1].lower()] += 1
    return here, below


def list_images(root: PathLike, recursive: bool = False, exts: Sequence[str] = DEFAULT_EXTS
                ) -> Tuple[List[ListItem], List[Tuple[str, int]]]:
    """Walk ``root`` as im2rec does (see :func:`scan_images`); returns the items and the
    ``(folder, label)`` mapping."""
    scan = scan_images(root, recursive, exts)
    return scan.items, scan.mapping


def _shuffle_items(items: List[ListItem], seed: int = 100) -> None:
    """Shuffle in place exactly as im2rec's ``random.seed(100); random.shuffle(list)``."""
    random.Random(seed).shuffle(items)


def split_items(items: Sequence[ListItem], prefix: str, chunks: int = 1,
                train_ratio: float = 1.0, test_ratio: float = 0.0
                ) -> List[Tuple[str, Sequence[ListItem]]]:
    """im2rec's chunk and train/test/val cut: a list of ``(file name, items)`` to write.

    ``chunks`` consecutive chunks of ``ceil(N / chunks)`` items (``PREFIX_i`` when > 1); in each,
    with ``cs = ceil(N / chunks)``, ``_test`` takes the first ``int(cs * test_ratio)`` items,
    ``_train`` the next ``int(cs * train_ratio)``, ``_val`` the rest; ``train_ratio == 1`` writes
    ``PREFIX.lst`` only.
    """
    if chunks < 1:
        raise ValueError(f"chunks must be at least 1, got {chunks}")
    if not (0.0 <= train_ratio <= 1.0 and 0.0 <= test_ratio <= 1.0):
        raise ValueError("train and test ratios must lie between 0 and 1")
    size = (len(items) + chunks - 1) // chunks
    out: List[Tuple[str, Sequence[ListItem]]] = []
    for i in range(chunks):
        chunk = items[i * size:(i + 1) * size]
        name = prefix + ("_%d" % i if chunks > 1 else "")
        sep = int(size * train_ratio)
        sep_test = int(size * test_ratio)
        if train_ratio == 1.0:
            out.append((name + ".lst", chunk))
            continue
        if test_ratio:
            out.append((name + "_test.lst", chunk[:sep_test]))
        if train_ratio + test_ratio < 1.0:
            out.append((name + "_val.lst", chunk[sep_test + sep:]))
        out.append((name + "_train.lst", chunk[sep_test:sep_test + sep]))
    return out


#: suffix of the folder -> label map ``im2rec --list --recursive`` writes beside its lists
_CLASSES_SUFFIX = ".classes.tsv"


def classes_path(path: PathLike) -> str:
    """``PREFIX.classes.tsv`` for a prefix or any file named after it (``PREFIX.rec``,
    ``PREFIX.lst``, ``PREFIX_train.lst``'s prefix is ``PREFIX_train``)."""
    path = os.fspath(path)
    stem, ext = os.path.splitext(path)
    return (stem if ext.lower() in (".rec", ".idx", ".lst") else path) + _CLASSES_SUFFIX


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
    """Write ``label<TAB>folder`` lines (the ``(folder, label)`` pairs of :func:`make_lists`),
    atomically. Folder names are written as stored (tab, CR and LF cannot occur in them: such
    folders are never listed)."""
    with atomic_open(path, "wb") as f:
        _write_classes_lines(f, mapping)


def _write_classes_lines(f: BinaryIO, mapping: Sequence[Tuple[str, int]]) -> None:
    f.write(b"label\tclass\n")
    for folder, label in mapping:
        f.write(f"{label}\t{folder}\n".encode(_ENCODING, _ERRORS))


def read_classes(path: PathLike) -> Dict[int, str]:
    """``{label: class name}`` from a classes file; :class:`ListFileError` naming the line
    when one is malformed."""
    out: Dict[int, str] = {}
    with open(path, "rb") as f:
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


@dataclass
class ListResult:
    """What ``im2rec --list`` wrote, and what it left out."""

    #: ``(folder, label)`` pairs im2rec prints (recursive walks)
    mapping: List[Tuple[str, int]]
    #: ``(list file, number of lines)`` in the order written
    written: List[Tuple[str, int]]
    #: the ``PREFIX.classes.tsv`` written (recursive walks), else None
    classes_path: Optional[str]
    scan: ImageScan
    #: images in no list: train + test ratios over 1, or each part's size rounded down with
    #: no val list to take the rest (MXNet's arithmetic, kept for byte-identical lists)
    ratio_dropped: int = 0
    ratio_sum: float = 1.0
    train_ratio: float = 1.0
    #: with ratios over 1: how many fewer images the train lists hold than the ratio asked for
    train_shortfall: int = 0

    def warnings(self) -> List[str]:
        """One sentence per thing left out, for the command to print."""
        scan, out = self.scan, []
        if scan.unlistable:
            out.append(f"skipped {scan.unlistable} image(s) whose path holds a tab, CR or LF, "
                       f"which a .lst line cannot hold (e.g. {scan.unlistable_example!r}); "
                       "rename them to list them")
        if scan.revisits:
            out.append(f"did not enter {scan.revisits} symlinked folder(s) already walked "
                       f"(a cycle or a second link to the same folder, e.g. "
                       f"{scan.revisit_example!r}); each folder is listed once")
        if self.ratio_sum > 1 and self.train_ratio == 1.0:
            out.append("--test-ratio is ignored with --train-ratio 1 (as in MXNet): every "
                       "image is in PREFIX.lst; lower --train-ratio to make a test list")
        elif self.ratio_sum > 1:
            out.append(f"--train-ratio + --test-ratio is {self.ratio_sum:g}, over 1: the train "
                       f"list(s) hold {self.train_shortfall} image(s) fewer than the ratio asks "
                       "(as in MXNet, train gets what is left after test); make the ratios sum "
                       "to at most 1")
        if self.ratio_dropped:
            out.append(f"{self.ratio_dropped} image(s) are in no list: each part's size is "
                       "rounded down and ratios summing to 1 leave no val list for the rest "
                       "(as in MXNet); lower --train-ratio slightly to get a val list")
        return out

    def to_dict(self) -> dict:
        return {"lists": [{"path": p, "images": n} for p, n in self.written],
                "classes_path": self.classes_path,
                "classes": [{"folder": f, "label": label} for f, label in self.mapping],
                "skipped": {"unlistable_path": self.scan.unlistable,
                            "folder_revisit": self.scan.revisits,
                            "in_no_list": self.ratio_dropped},
                "train_shortfall": self.train_shortfall,
                "warnings": self.warnings()}


def _list_outputs(prefix: PathLike, chunks: int = 1, train_ratio: float = 1.0,
                  test_ratio: float = 0.0, recursive: bool = False) -> List[str]:
    """Every file ``make_lists`` would write for these options (lists, then classes)."""
    names = [name for name, _ in split_items([], storage.absolute(prefix), chunks,
                                             train_ratio, test_ratio)]
    return names + ([classes_path(storage.absolute(prefix))] if recursive else [])


def make_lists(prefix: PathLike, root: PathLike, recursive: bool = False,
               exts: Sequence[str] = DEFAULT_EXTS, chunks: int = 1, train_ratio: float = 1.0,
               test_ratio: float = 0.0, shuffle: bool = True, *, force: bool = False,
               progress: Optional[Callable[[int], None]] = None) -> ListResult:
    """im2rec ``--list``: write the ``.lst`` file(s) for ``root`` (and, when ``recursive``,
    ``PREFIX.classes.tsv``, the folder -> label map).

    Existing files of those names are refused (:class:`OutputExistsError`) unless ``force``.
    All files of one call appear together or not at all: they are written under temporary
    names and renamed when every one is complete. A walk that finds no image writes nothing
    and raises :class:`NothingFoundError` saying what is there instead (images in sub-folders
    without ``recursive``, files with other extensions, an empty folder), so the corrected
    command is not refused because of an empty list.
    """
    prefix = storage.absolute(prefix)
    check_outputs(_list_outputs(prefix, chunks, train_ratio, test_ratio, recursive), force=force)
    scan = scan_images(root, recursive, exts, progress)
    if not scan.items:
        raise NothingFoundError(f"no image to list: {_nothing_listed(scan, root, recursive, exts)}"
                                "; nothing was written", path=os.fspath(root))
    items = list(scan.items)
    if shuffle:
        _shuffle_items(items)
    parts = split_items(items, prefix, chunks, train_ratio, test_ratio)
    outputs = OutputSet()
    try:
        for name, part in parts:
            _write_list_lines(outputs.add(AtomicFile(name)).file, part)
        classes = classes_path(prefix) if recursive else None
        if classes is not None:
            _write_classes_lines(outputs.add(AtomicFile(classes)).file, scan.mapping)
        outputs.commit()
    except BaseException:
        outputs.discard()
        raise
    written = [(name, len(part)) for name, part in parts]
    return ListResult(scan.mapping, written, classes, scan,
                      ratio_dropped=len(items) - sum(n for _, n in written),
                      ratio_sum=train_ratio + test_ratio, train_ratio=train_ratio,
                      train_shortfall=_train_shortfall(len(items), chunks, train_ratio, parts))


def _train_shortfall(total: int, chunks: int, train_ratio: float,
                     parts: Sequence[Tuple[str, Sequence[ListItem]]]) -> int:
    """How many fewer images the train lists hold than ``int(chunk size * train_ratio)`` per
    chunk (only ever non-zero when the ratios sum over 1)."""
    if train_ratio == 1.0:  # one list per chunk, no train part
        return 0
    size = (total + chunks - 1) // chunks
    filled = (total + size - 1) // size if size else 0
    held = sum(len(items) for name, items in parts if name.endswith("_train.lst"))
    return max(0, filled * int(size * train_ratio) - held)


__all__ = ["ListItem", "format_list_line", "parse_list_line", "read_list", "read_list_entries",
           "write_list", "native_list_path", "list_path_candidates", "foreign_list_path",
           "list_entry", "normalize_exts", "list_images", "ImageScan", "ListResult", "split_items",
           "make_lists", "classes_path", "write_classes", "read_classes", "scan_images"]

