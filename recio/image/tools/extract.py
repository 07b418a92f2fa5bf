"""Extracting images: the inverse of im2rec, from a ``.rec`` back to image files and a ``.lst``.

Every record holding an image becomes ``OUT_DIR/<id>.<ext>`` (its bytes untouched; a repeated
id gets ``<id>_1.<ext>``, ``<id>_2.<ext>``, ...), or ``OUT_DIR/<class>/<id>.<ext>`` when a classes
file (``PREFIX.classes.tsv``, written by ``im2rec --list --recursive``) names the record's first
label, so the images land in folders named as the ones they were listed from (the classes file
is copied beside the ``.lst``), and ``OUT_DIR/NAME.lst`` lists
``id, label(s), file name`` in record order, so im2rec ``--pass-through`` (``--pack-label`` for
label vectors) packs the same records again. Records without an image (e.g. a face-recognition
set's header and identity records) are skipped and counted.

Every output name is worked out from the record headers before anything is written: an output
that is the input ``.rec`` or its ``.idx`` is always refused. ``OUT_DIR`` must be new or empty,
so the images never mix with files already there (a folder of photos, an earlier extraction):
without ``force`` a non-empty ``OUT_DIR`` is refused before anything is written. With ``force``
the images are added to it and a file already there under an output's name is replaced, never
silently: ``ExtractResult.replaced`` lists every one (the command counts them). Each file is
written atomically, the ``.lst`` last, so it exists only when every image was extracted.
"""
from __future__ import annotations

import errno
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Set, Union

import numpy as np

from recio import storage
from recio.errors import (
    ImageError,
    NothingFoundError,
    OutputExistsError,
    OutputWriteError,
    plural,
)
from recio.image.header import read_head, unpack_header
from recio.image.lists import (
    classes_path,
    find_classes,
    foreign_list_path,
    format_list_line,
    list_entry,
    native_list_path,
    read_classes,
    write_classes,
)
from recio.image.tools.stats import image_format
from recio.records.atomic import atomic_open, check_outputs
from recio.records.index_format import sibling_index_path
from recio.records.output_folder import creating
from recio.records.reader import RecordReader
from recio.records.write_errors import is_write_only_error

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], Any]]

#: image format (as ``image_format`` names it) -> file extension
_EXTENSIONS = {"jpeg": ".jpg", "png": ".png", "gif": ".gif", "bmp": ".bmp", "webp": ".webp",
               "tiff": ".tiff"}
_PROGRESS_EVERY = 16 << 20


@dataclass
class ExtractResult:
    """What ``extract_images`` wrote, and what a ``.lst`` could not carry exactly.

    ``vector_labels``: some record has a label vector (re-pack with ``--pack-label``).
    ``inexact_labels``: labels the ``.lst``'s ``%f`` text does not reproduce exactly;
    ``id2_dropped``: records with a nonzero ``id2`` (a ``.lst`` has no column for it);
    ``single_vectors``: 1-element label vectors (im2rec packs a single label as a scalar).
    """

    rec_path: str
    out_dir: str
    lst_path: str
    classes_path: Optional[str] = None
    images: int = 0
    skipped: int = 0
    vector_labels: bool = False
    inexact_labels: int = 0
    id2_dropped: int = 0
    single_vectors: int = 0
    #: files that were already in ``out_dir`` under an output's name, replaced (``force``)
    replaced: List[str] = field(default_factory=list)

    def warnings(self) -> List[str]:
        """One sentence for each way the ``.lst`` differs from the records, and for the files
        it replaced."""
        out = []
        if self.replaced:
            shown = ", ".join(self.replaced[:3]) + (
                ", ... (--json lists them all)" if len(self.replaced) > 3 else "")
            out.append(f"replaced {plural(len(self.replaced), 'existing file')} in "
                       f"{self.out_dir} (--force): {shown}")
        if self.inexact_labels:
            out.append(f"{self.inexact_labels} labels do not survive the .lst's %f format "
                       f"exactly")
        if self.id2_dropped:
            out.append(f"{self.id2_dropped} records have a nonzero id2, which a .lst cannot "
                       f"carry")
        if self.single_vectors:
            out.append(f"{self.single_vectors} records have a 1-element label vector; im2rec "
                       f"packs a single label as a scalar")
        return out

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready summary of the extraction."""
        return {"rec": self.rec_path, "out_dir": self.out_dir, "lst": self.lst_path,
                "classes": self.classes_path,
                "images": self.images, "skipped": self.skipped,
                "vector_labels": self.vector_labels, "replaced": list(self.replaced),
                "warnings": self.warnings()}


def extract_images(rec_path: PathLike, out_dir: PathLike, *, lst_name: Optional[str] = None,
                   force: bool = False, progress: Progress = None) -> ExtractResult:
    """Write every image of ``rec_path`` to ``out_dir`` as ``<id>.<ext>``, plus a ``.lst``.

    ``lst_name`` names the list inside ``out_dir`` (default: the ``.rec``'s name with
    ``.lst``). ``progress(n)``: bytes of the ``.rec`` read since the last call (they add up to
    its size). A damaged ``.rec`` raises ``RecordIOError`` with the byte offset (the images
    extracted before it stay; the ``.lst`` is not written). :class:`OutputExistsError` before
    anything is written when an output would replace the input, or when ``out_dir`` is not
    empty and ``force`` is not given; with ``force``, files replaced are listed in
    ``ExtractResult.replaced``.
    """
    rec_path, out_dir = os.fspath(rec_path), os.fspath(out_dir)
    stem = os.path.splitext(os.path.basename(rec_path))[0]
    result = ExtractResult(rec_path, out_dir, storage.join(out_dir, lst_name or stem + ".lst"))
    inputs = [rec_path, sibling_index_path(rec_path)]
    source_classes = find_classes(rec_path)
    classes = read_classes(source_classes) if source_classes else {}
    if classes:
        result.classes_path = classes_path(result.lst_path)
        assert source_classes is not None  # the classes were read from it
        inputs.append(source_classes)
    planned = [p for p in (result.lst_path, result.classes_path) if p]
    with RecordReader(rec_path) as reader:  # a missing or wrong input is named first
        if not force:
            if reader.size:
                reader.read_at(0)  # NotRecordFileError for a .lst, .idx, image, manifest...
            _check_empty(out_dir)
        images = [storage.join(out_dir, name) for name in _planned_names(reader, classes)]
    if not images:  # nothing written: an empty list would only stand in the way of a retry
        raise NothingFoundError("holds no image record: nothing to extract (nothing was "
                                "written)", rec_path)
    planned += images
    check_outputs(planned, inputs, force=True)  # never over an input, even with force
    result.replaced = [p for p in planned if _exists(p)]
    size = storage.size(rec_path)
    made = [] if storage.is_url(out_dir) or os.path.isdir(out_dir) else [out_dir]
    if not storage.is_url(out_dir):
        if os.path.exists(out_dir) and not os.path.isdir(out_dir):
            kind = storage.file_kind(os.stat(out_dir).st_mode) or "a file"
            raise NotADirectoryError(errno.ENOTDIR, f"is {kind}, not a folder", out_dir)
        with creating(out_dir):
            os.makedirs(out_dir, exist_ok=True)
    lines: List[str] = []
    used: Set[str] = set()
    reported = 0
    written: List[str] = []  # the images this run created (a full disk takes them back)
    try:
        with RecordReader(rec_path) as reader:
            for offset, record in reader.records_with_offsets():
                if progress is not None and offset - reported >= _PROGRESS_EVERY:
                    progress(offset - reported)
                    reported = offset
                line = _extract_one(record, result, used, classes, written, made)
                if line is None:
                    result.skipped += 1
                else:
                    lines.append(line)
        if progress is not None and size > reported:
            progress(size - reported)
        if result.classes_path is not None:
            write_classes(result.classes_path,
                          [(name, label) for label, name in classes.items()])
        with atomic_open(result.lst_path, "wb") as f:  # bytes: "\n" and UTF-8 on every OS
            f.write("".join(lines).encode("utf-8", "surrogateescape"))
    except OSError as exc:
        if isinstance(exc, OutputWriteError) or is_write_only_error(exc):
            _take_back(written, made, result)  # a full disk: the same command runs again
        raise
    return result


def _take_back(written: List[str], made: List[str], result: "ExtractResult") -> None:
    """Delete the images and folders an extraction that could not finish (a full disk)
    created, so that OUT_DIR is as it was and the same command can run again; the files it
    replaced (``--force``) are gone either way."""
    for path in written:
        if path not in result.replaced:
            try:
                os.unlink(path)
            except OSError:
                pass
    for folder in reversed(made):
        try:
            os.rmdir(folder)
        except OSError:
            pass


def _exists(path: str) -> bool:
    return storage.exists(path) if storage.is_url(path) else os.path.lexists(path)


def _check_empty(out_dir: str) -> None:
    """:class:`OutputExistsError` when ``out_dir`` exists and holds anything."""
    if storage.is_url(out_dir):
        held = storage.listdir(out_dir) if storage.isdir(out_dir) else []
    elif os.path.isdir(out_dir):
        held = sorted(os.listdir(out_dir))
    else:
        return
    if held:
        names = [storage.basename(h) if storage.is_url(out_dir) else h for h in held[:3]]
        shown = ", ".join(names) + (", ..." if len(held) > 3 else "")
        raise OutputExistsError(
            f"the folder is not empty ({plural(len(held), 'entry', 'entries')}: {shown}): "
            "the extracted images would be mixed in with what is there; extract into a new or "
            "empty folder", path=out_dir,
            remedy="to extract into it anyway (files of the same names are then replaced, "
                   "and counted)")


def _planned_names(reader: RecordReader, classes: Dict[int, str]) -> Iterator[str]:
    """The file name each image record will get, from the record heads alone (the same
    rule as ``_extract_one``: ``_image_of``, ``_class_folder`` and ``_unique_name``)."""
    used: Set[str] = set()
    # a remote object is streamed once, whole records; a local one is peeked at record heads
    heads = (record for _, record in reader.records_with_offsets()) if reader.source.remote else \
        (read_head(reader, offset) for offset in reader.iter_offsets())
    for head in heads:
        found = _image_of(head)
        if found is not None:
            header, fmt = found
            yield _unique_name(header.id, _EXTENSIONS[fmt], used,
                               _class_folder(header.label, classes))
    reader.reset()


def _class_folder(label: Any, classes: Dict[int, str]) -> str:
    """The folder (relative, ending in ``/``, or "") for a record's first label: its class name
    when that is a plain relative path ("." and anything leaving OUT_DIR: none), read as a
    list's path (``cat\\sub`` from Windows is ``cat/sub``) and written as one (``/``)."""
    first = float(np.atleast_1d(label)[0]) if classes else float("nan")
    name = classes.get(int(first)) if first == first and first.is_integer() else None
    if not name or foreign_list_path(name):
        return ""
    norm = os.path.normpath(native_list_path(name))
    if norm == "." or os.path.isabs(norm) or norm.split(os.sep)[0] == ".." or "\0" in norm \
            or norm.startswith(("/", os.sep)) or os.path.splitdrive(norm)[0]:  # Windows' \x, c:x
        return ""
    return list_entry(norm) + "/"


def _image_of(record: bytes) -> Optional[tuple]:
    """``(header, image format)`` of a record holding an image, else None."""
    try:
        header, body = unpack_header(record)
    except ImageError:
        return None  # shorter than a header, or a label vector running past the record
    fmt = image_format(record, body) if body < len(record) else None
    return None if fmt is None else (header, fmt)


def _extract_one(record: bytes, result: ExtractResult, used: Set[str],
                 classes: Dict[int, str], written: List[str], made: List[str]) -> Optional[str]:
    """Write the image of one record and return its ``.lst`` line (None: no image in it);
    the image's path goes to ``written``, a folder it needed that was not there to ``made``."""
    found = _image_of(record)
    if found is None:
        return None
    header, fmt = found
    body = unpack_header(record)[1]
    labels = (np.asarray(header.label, dtype=np.float32) if header.flag
              else np.array([header.label], dtype=np.float32))
    result.vector_labels = result.vector_labels or header.flag > 1
    result.single_vectors += header.flag == 1
    result.id2_dropped += header.id2 != 0
    name = _unique_name(header.id, _EXTENSIONS[fmt], used, _class_folder(header.label, classes))
    path = storage.join(result.out_dir, name)
    if not storage.is_url(path):
        folder = os.path.dirname(path)
        if not os.path.isdir(folder):
            with creating(folder):
                os.makedirs(folder)
            made.append(folder)
    with atomic_open(path, "wb") as f:
        f.write(memoryview(record)[body:])
    written.append(path)
    result.images += 1
    line = format_list_line(header.id, [float(x) for x in labels], name)
    printed = np.array([float(v) for v in line.split("\t")[1:-1]], dtype=np.float32)
    result.inexact_labels += not np.array_equal(printed, labels)
    return line


def _unique_name(rid: int, ext: str, used: Set[str], folder: str = "") -> str:
    """``<folder><id><ext>``, or ``<folder><id>_<n><ext>`` for the n-th repeat of an id."""
    name = f"{folder}{rid}{ext}"
    n = 1
    while name in used:
        name = f"{folder}{rid}_{n}{ext}"
        n += 1
    used.add(name)
    return name
