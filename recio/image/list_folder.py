"""Image lists built from a folder, as MXNet's ``im2rec.py --list`` does (``make_lists``).

Walking the folder (sorted, optionally recursive: one label per folder that holds an image, each
real folder once), im2rec's shuffle (``random.seed(100)``) and its chunk and train/test/val cut,
and the messages for a walk that finds nothing. The ``.lst`` format itself (parse, write, the
paths' portability) is :mod:`recio.image.lists`, which this module writes with.
"""
from __future__ import annotations

import difflib
import os
import random
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterator, List, Optional, Sequence, Tuple

from recio import storage
from recio.errors import ListFileError, NothingFoundError, plural
from recio.image.lists import (
    ListItem,
    PathLike,
    classes_path,
    list_entry,
    prefix_extension,
    write_classes_lines,
    write_list_lines,
)
from recio.records.atomic import AtomicFile, OutputSet, check_outputs

#: extensions im2rec accepts by default (compared with the lower-cased file suffix)
DEFAULT_EXTS: Tuple[str, ...] = (".jpeg", ".jpg", ".png")


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


def _scan_images(root: PathLike, recursive: bool = False, exts: Sequence[str] = DEFAULT_EXTS,
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
        scan.in_subfolders = len(_scan_images(root, True, exts).items)
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
    """Walk ``root`` as im2rec does (see :func:`_scan_images`); returns the items and the
    ``(folder, label)`` mapping."""
    scan = _scan_images(root, recursive, exts)
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


def _list_prefix(prefix: PathLike, chunks: int, train_ratio: float, test_ratio: float) -> str:
    """The PREFIX the lists are named after (``prefix_extension``, the rule pack mode shares):
    ``data/train.lst`` names the one list ``data/train.lst``; a PREFIX ending in ``.rec`` or
    ``.idx``, or in ``.lst`` where several lists are cut, raises ``ListFileError``."""
    given = os.fspath(prefix)
    ext = prefix_extension(given)
    stem = given[:len(given) - len(ext)]
    names = [os.path.basename(name) for name, _ in
             split_items([], stem, chunks, train_ratio, test_ratio)]
    if not ext or (ext.lower() == ".lst" and len(names) == 1):
        return stem
    why = ("PREFIX names files without their extension" if ext.lower() != ".lst" else
           f"PREFIX {os.path.basename(given)} names one list, but these options write "
           f"{len(names)} ({', '.join(names[:3])}{', ...' if len(names) > 3 else ''}), named "
           "after PREFIX without .lst")
    raise ListFileError(f"{why}: did you mean {stem}? Nothing was written", path=given)


def make_lists(prefix: PathLike, root: PathLike, recursive: bool = False,
               exts: Sequence[str] = DEFAULT_EXTS, chunks: int = 1, train_ratio: float = 1.0,
               test_ratio: float = 0.0, shuffle: bool = True, *, force: bool = False,
               progress: Optional[Callable[[int], None]] = None) -> ListResult:
    """im2rec ``--list``: write the ``.lst`` file(s) for ``root`` (and, when ``recursive``,
    ``PREFIX.classes.tsv``, the folder -> label map).

    ``prefix`` names the files without their extension (``data/train`` writes
    ``data/train.lst``); ``data/train.lst`` names that one list, and a PREFIX ending in
    ``.rec`` or ``.idx`` (or in ``.lst`` with ``chunks`` or ratios) raises ``ListFileError``
    ("did you mean data/train?"), the rule ``im2rec PREFIX ROOT`` packs by
    (``recio.image.lists.prefix_extension``).
    Existing files of those names are refused (:class:`OutputExistsError`) unless ``force``.
    All files of one call appear together or not at all: they are written under temporary
    names and renamed when every one is complete. A walk that finds no image writes nothing
    and raises :class:`NothingFoundError` saying what is there instead (images in sub-folders
    without ``recursive``, files with other extensions, an empty folder), so the corrected
    command is not refused because of an empty list.
    """
    prefix = storage.absolute(_list_prefix(prefix, chunks, train_ratio, test_ratio))
    check_outputs(_list_outputs(prefix, chunks, train_ratio, test_ratio, recursive), force=force)
    scan = _scan_images(root, recursive, exts, progress)
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
            write_list_lines(outputs.add(AtomicFile(name)).file, part)
        classes = classes_path(prefix) if recursive else None
        if classes is not None:
            write_classes_lines(outputs.add(AtomicFile(classes)).file, scan.mapping)
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
