"""Image lists (``.lst``): read, write and generate them exactly as MXNet's ``im2rec.py`` does.

A line is ``index \\t label_1 \\t ... \\t label_m \\t relative_path \\n`` with labels printed as
``%f``. Generating a list walks a folder (sorted, optionally recursive: one label per folder that
holds an image), shuffles it with ``random.seed(100); random.shuffle(...)`` and cuts it into
chunks and train/test/val parts; the files are byte-identical to MXNet's for the same options.
"""
from __future__ import annotations

import os
import random
import struct
from numbers import Real
from typing import Dict, Iterator, List, NamedTuple, Optional, Sequence, Tuple, Union

from recio.errors import ListFileError
from recio.records.atomic import atomic_open

PathLike = Union[str, "os.PathLike[str]"]

#: extensions im2rec accepts by default (compared with the lower-cased file suffix)
DEFAULT_EXTS: Tuple[str, ...] = (".jpeg", ".jpg", ".png")

#: the record id is a uint64 in the image header, so the index column must fit in one
MAX_INDEX = 2 ** 64 - 1

# paths are written and read back byte for byte even when they are not valid UTF-8
_ENCODING, _ERRORS = "utf-8", "surrogateescape"


class ListItem(NamedTuple):
    """One ``.lst`` line: ``index`` (the record key and id), its float labels and relative path."""

    index: int
    labels: Tuple[float, ...]
    path: str


def format_list_line(index: int, labels: Union[Sequence[float], float], path: str) -> str:
    """MXNet's ``.lst`` line: ``"%d\\t" + "%f\\t" * len(labels) + "%s\\n"``."""
    if isinstance(labels, Real):
        labels = (labels,)
    return "%d\t%s%s\n" % (index, "".join("%f\t" % label for label in labels), path)


def parse_list_line(line: str, path: Optional[PathLike] = None,
                    line_number: Optional[int] = None) -> ListItem:
    """Parse one ``.lst`` line; raises :class:`ListFileError` naming the file and line."""
    fields = [field.strip() for field in line.strip().split("\t")]
    where = {"path": None if path is None else os.fspath(path), "line": line_number}
    if len(fields) < 3:
        raise ListFileError(
            f"expected at least 3 tab-separated fields (index, label(s), path), found "
            f"{len(fields)}: {line.strip()[:80]!r}; fix or delete this line", **where)
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
        bad = next(x for x in labels if not _fits_float32(x))
        raise ListFileError(f"label {bad!r} is too large for float32, the type record headers "
                            f"store labels in", **where) from None
    if not fields[-1]:
        raise ListFileError("the image path (last field) is empty", **where)
    if "\0" in fields[-1]:
        raise ListFileError(f"the image path {fields[-1][:80]!r} contains a NUL character",
                            **where)
    return ListItem(index, labels, fields[-1])


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


def read_list_numbered(path: PathLike) -> Iterator[Tuple[int, ListItem]]:
    """Like :func:`read_list`, but yields ``(line_number, item)`` (for error reports)."""
    with open(path, "r", encoding=_ENCODING, errors=_ERRORS, newline=None) as fin:
        for number, line in enumerate(fin, 1):
            if line.strip():
                yield number, parse_list_line(line, path, number)


def write_list(path: PathLike, items: Sequence[Tuple[int, Sequence[float], str]]) -> None:
    """Write ``(index, labels, path)`` items as a ``.lst`` file, atomically."""
    with atomic_open(path, "wb") as fout:
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


def list_images(root: PathLike, recursive: bool = False, exts: Sequence[str] = DEFAULT_EXTS
                ) -> Tuple[List[ListItem], List[Tuple[str, int]]]:
    """Walk ``root`` as im2rec does; returns the items and the ``(folder, label)`` mapping.

    With ``recursive``, ``os.walk(followlinks=True)`` with sorted folders and files, and each
    folder holding an image gets the next label; otherwise only ``root``'s files, label 0.
    """
    root = os.path.abspath(os.fspath(root))
    if not os.path.isdir(root):
        raise NotADirectoryError(20, "not a directory", root)
    exts = normalize_exts(exts)
    items: List[ListItem] = []
    folders: dict = {}
    if recursive:
        for folder, dirs, files in os.walk(root, followlinks=True):
            dirs.sort()
            files.sort()
            for name in files:
                full = os.path.join(folder, name)
                if os.path.splitext(name)[1].lower() in exts and os.path.isfile(full):
                    label = folders.setdefault(folder, len(folders))
                    items.append(ListItem(len(items), (float(label),),
                                          os.path.relpath(full, root)))
    else:
        for name in sorted(os.listdir(root)):
            full = os.path.join(root, name)
            if os.path.splitext(name)[1].lower() in exts and os.path.isfile(full):
                items.append(ListItem(len(items), (0.0,), os.path.relpath(full, root)))
    mapping = [(os.path.relpath(folder, root), label) for folder, label in folders.items()]
    return items, mapping


def shuffle_items(items: List[ListItem], seed: int = 100) -> None:
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


def make_lists(prefix: PathLike, root: PathLike, recursive: bool = False,
               exts: Sequence[str] = DEFAULT_EXTS, chunks: int = 1, train_ratio: float = 1.0,
               test_ratio: float = 0.0, shuffle: bool = True
               ) -> Tuple[List[Tuple[str, int]], List[Tuple[str, int]]]:
    """im2rec ``--list``: write the ``.lst`` file(s) for ``root``.

    Returns ``(mapping, written)``: the ``(folder, label)`` pairs im2rec prints, and the
    ``(file, number of lines)`` written.
    """
    items, mapping = list_images(root, recursive, exts)
    if shuffle:
        shuffle_items(items)
    written = []
    for name, part in split_items(items, os.path.abspath(os.fspath(prefix)), chunks,
                                  train_ratio, test_ratio):
        write_list(name, part)
        written.append((name, len(part)))
    return mapping, written


#: suffix of the folder -> label map ``im2rec --list --recursive`` writes beside its lists
CLASSES_SUFFIX = ".classes.tsv"


def classes_path(path: PathLike) -> str:
    """``PREFIX.classes.tsv`` for a prefix or any file named after it (``PREFIX.rec``,
    ``PREFIX.lst``, ``PREFIX_train.lst``'s prefix is ``PREFIX_train``)."""
    path = os.fspath(path)
    stem, ext = os.path.splitext(path)
    return (stem if ext.lower() in (".rec", ".idx", ".lst") else path) + CLASSES_SUFFIX


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
        if os.path.isfile(candidate + CLASSES_SUFFIX):
            return candidate + CLASSES_SUFFIX
    return None


def write_classes(path: PathLike, mapping: Sequence[Tuple[str, int]]) -> None:
    """Write ``label<TAB>folder`` lines (the ``(folder, label)`` pairs of :func:`make_lists`),
    atomically. Folder names are written as stored (tab, CR and LF cannot occur in them: such
    folders are never listed)."""
    with atomic_open(path, "wb") as f:
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


def count_lines(path: PathLike, block: int = 1 << 20) -> int:
    """Number of non-empty-terminated lines in a file, counted without decoding it."""
    count = 0
    last = b"\n"
    with open(path, "rb") as f:
        block = min(block, os.fstat(f.fileno()).st_size + 1)  # no large buffer for a small file
        while True:
            data = f.read(block)
            if not data:
                break
            count += data.count(b"\n")
            last = data[-1:]
    return count + (last != b"\n")


__all__ = ["DEFAULT_EXTS", "ListItem", "format_list_line", "parse_list_line", "read_list",
           "read_list_numbered", "write_list", "normalize_exts", "list_images", "shuffle_items",
           "split_items", "make_lists", "count_lines", "CLASSES_SUFFIX", "classes_path",
           "find_classes", "write_classes", "read_classes"]

