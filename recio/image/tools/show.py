"""A thumbnail grid of a record file's images with their keys, labels and class names.

Records are chosen in ``.idx`` order (the first N images), in a seeded random order, by key, or
by label (first label position). Records without an image (the header and identity records of a
face-recognition set) and images that cannot be decoded (any other record whose payload no
decoder reads) are skipped and counted, never drawn as blanks, so the grid shows N real images
whenever the file holds them; each undecodable one is named (``GridResult.undecodable``, as
``recio.image.undecodable`` names it).
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Union

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from recio.errors import ImageError, RecordIOError
from recio.image.pixels.codec import decode
from recio.image.header import read_head, unpack_header
from recio.image.lists import find_classes, read_classes
from recio.image.tools.repack import record_kind
from recio.image.undecodable import skipped_text, undecodable
from recio.records.atomic import atomic_open, check_outputs
from recio.records.index_format import key_text, sibling_index_path
from recio.records.indexed import IndexedRecordReader

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], None]]

#: height of the caption strip under each tile, in pixels
CAPTION = 24
_BACKGROUND = (32, 32, 32)
_TEXT = (235, 235, 235)


@dataclass
class Tile:
    """One drawn record: its key, labels and class name (when a classes file names it)."""

    key: Any
    label: List[float]
    class_name: Optional[str] = None


@dataclass
class Skipped:
    """An undecodable record the grid passed over: its key, byte offset and the error naming
    it."""

    key: Any
    offset: int
    error: ImageError


@dataclass
class GridResult:
    """What :func:`draw_grid` drew and what it passed over."""

    path: str
    tiles: List[Tile] = field(default_factory=list)
    skipped_not_image: int = 0
    looked_at: int = 0
    classes_path: Optional[str] = None
    #: each undecodable record passed over, in the order met
    undecodable: List[Skipped] = field(default_factory=list)

    @property
    def skipped_undecodable(self) -> int:
        return len(self.undecodable)

    def to_dict(self) -> Dict[str, Any]:
        return {"path": self.path, "classes_path": self.classes_path,
                "tiles": [{"key": t.key, "label": t.label, "class": t.class_name}
                          for t in self.tiles],
                "records_looked_at": self.looked_at,
                "skipped": {"not_an_image": self.skipped_not_image,
                            "undecodable": self.skipped_undecodable},
                "undecodable": [{"key": s.key, "offset": s.offset,
                                 "message": skipped_text(str(s.error))}
                                for s in self.undecodable]}


def _positions(n_records: int, randomly: bool, seed: Optional[int]) -> Iterator[int]:
    if not randomly:
        yield from range(n_records)
        return
    yield from np.random.default_rng(seed).permutation(n_records).tolist()


def _caption(tile: Tile) -> str:
    label = ",".join(f"{v:g}" for v in tile.label)
    return f"{tile.key}: {label}" + (f" {tile.class_name}" if tile.class_name else "")


def _thumbnail(pixels: np.ndarray, size: int) -> Image.Image:
    """The image scaled (up or down) to fit a ``size`` square, keeping its aspect ratio."""
    img = Image.fromarray(pixels)
    scale = size / max(img.width, img.height)
    target = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    return img.resize(target, Image.Resampling.BICUBIC) if target != img.size else img


def draw_grid(rec_path: PathLike, out_path: PathLike, *, count: int = 16,
              keys: Optional[Sequence[Any]] = None, label: Optional[float] = None,
              randomly: bool = False, seed: Optional[int] = None, columns: Optional[int] = None,
              tile_size: int = 128, idx_path: Optional[PathLike] = None, force: bool = False,
              progress: Progress = None) -> GridResult:
    """Draw ``count`` images of ``rec_path`` as a grid into ``out_path`` (PNG, or JPEG by its
    name), each captioned ``key: label(s) class``.

    ``keys`` draws exactly those records (a missing key is an error naming it); ``label`` only
    records whose first label equals it; ``randomly`` picks records in a permutation seeded by
    ``seed`` instead of ``.idx`` order. ``out_path`` is never an input and an existing file is
    replaced only with ``force``. ``progress(1)`` is called for each record looked at.
    """
    out_path = os.fspath(out_path)
    rec_path = os.fspath(rec_path)
    check_outputs([out_path], [rec_path, os.fspath(idx_path or sibling_index_path(rec_path))],
                  force=force)
    classes_path = find_classes(rec_path)
    names = read_classes(classes_path) if classes_path else {}
    result = GridResult(out_path, classes_path=classes_path)
    images: List[Image.Image] = []
    # keys asked for need the .idx; the first records of one without it are drawn in file
    # order, captioned with their positions
    with IndexedRecordReader(rec_path, idx_path, scan=keys is None) as records:
        index = records.index
        if keys is not None:
            missing = [k for k in keys if k not in records]
            if missing:
                raise RecordIOError(f"key {key_text(missing[0])} is not in the index "
                                    f"({len(records)} records)", path=records.idx_path or rec_path)
            chosen = ((k, index.offset_of(k)) for k in keys)
        else:
            chosen = ((index.key_at(i), int(index.offsets[i]))
                      for i in _positions(len(index), randomly, seed))
        for key, offset in chosen:
            if keys is None and len(images) >= count:
                break
            result.looked_at += 1
            if progress is not None:
                progress(1)
            head = read_head(records, offset)
            if record_kind(head, offset) in ("header", "identity"):  # labels only, no image
                result.skipped_not_image += 1
                continue
            try:  # any other record is meant to hold an image: one that does not is named
                header, _ = unpack_header(head)
                labels = np.atleast_1d(np.asarray(header.label, dtype=np.float64)).tolist()
                if label is not None and (not labels or labels[0] != label):
                    continue
                record = records.read_at(offset)
                pixels = decode(memoryview(record)[unpack_header(record)[1]:], 1,
                                min_side=tile_size)
            except ImageError as exc:
                error = undecodable(exc.message, rec_path, f"key {key_text(key)}", offset)
                result.undecodable.append(Skipped(key, offset, error))
                continue
            images.append(_thumbnail(pixels, tile_size))
            name = names.get(int(labels[0])) if labels and float(labels[0]).is_integer() else None
            result.tiles.append(Tile(key, labels, name))
    if not images:
        what = f"with label {label:g}" if label is not None else "that decodes"
        raise RecordIOError(f"no image record {what} among the {result.looked_at} looked at; "
                            "nothing was drawn", path=rec_path)
    _save(_compose(images, result.tiles, columns, tile_size), out_path)
    return result


def _compose(images: List[Image.Image], tiles: List[Tile], columns: Optional[int],
             size: int) -> Image.Image:
    cols = columns or math.ceil(math.sqrt(len(images)))
    rows = math.ceil(len(images) / cols)
    grid = Image.new("RGB", (cols * size, rows * (size + CAPTION)), _BACKGROUND)
    draw = ImageDraw.Draw(grid)
    font = ImageFont.load_default()
    for i, (img, tile) in enumerate(zip(images, tiles)):
        x, y = (i % cols) * size, (i // cols) * (size + CAPTION)
        grid.paste(img, (x + (size - img.width) // 2, y + (size - img.height) // 2))
        draw.text((x + 3, y + size + 5), _caption(tile)[:size // 6], fill=_TEXT, font=font)
    return grid


def _save(grid: Image.Image, out_path: str) -> None:
    fmt = "JPEG" if out_path.lower().endswith((".jpg", ".jpeg")) else "PNG"
    with atomic_open(out_path, "wb") as f:
        grid.save(f, format=fmt)
