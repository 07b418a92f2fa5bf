"""What is in a ``.rec`` file, and where it is damaged: the library side of inspect and verify.

``scan_file`` makes one pass over a memory map of the file through ``RecordReader`` in skip mode
(payloads are not copied, except multi-part records and the sampled image headers), so it runs
at page-cache speed on files of many GB in bounded memory, and finds damage exactly where every
reader would raise. Along the way it gathers record statistics, image-header statistics
(``IRHeader`` flags, labels, ids, image formats, and width x height of a sample read from the
JPEG/PNG/GIF/BMP/WebP headers without decoding), recognises the face-recognition layout (header
record 0 holding ``[first identity key, end]``), checks the ``.idx`` beside the file, and
records every damaged byte region (``DamageRegion``) instead of stopping.
"""
from __future__ import annotations

import math
import os
import random
import struct
from array import array
from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np

from recio import portable, storage
from recio.errors import NotRegularFileError, RecordIOError, StorageError, TruncatedFileError
from recio.image.header import IR_SIZE as _IR_SIZE, IR_STRUCT as _IR
from recio.records import framing
from recio.records.diagnose import IndexFit, ends_mid_line, reindex_hint
from recio.records.index import read_index
from recio.records.index_format import key_text, sibling_index_path
from recio.records.reader import RecordReader
from recio.records.sniff import IMAGE_SIGNATURES as _SIGNATURES, describe, image_signature

_F32 = struct.Struct("<f")
_BE16 = struct.Struct(">H")
_BE16x2 = struct.Struct(">HH")
_BE32x2 = struct.Struct(">II")
_LE16 = struct.Struct("<H")
_LE16x2 = struct.Struct("<HH")
_LE32 = struct.Struct("<I")
_LEi32x2 = struct.Struct("<ii")

#: payload lengths kept exactly for the median; beyond this a uniform reservoir sample is used
_MEDIAN_EXACT_LIMIT = 1 << 20
#: distinct labels counted exactly up to this many
_DISTINCT_LABEL_LIMIT = 1 << 20
_PROGRESS_EVERY = 64 << 20

_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


@dataclass
class DamageRegion:
    """Bytes ``[start, end)`` of the file that do not form valid records, and why.

    Adjacent damaged places are one region; ``problems`` counts them and ``reason`` names the
    first few (``_REASONS_KEPT``).
    """

    start: int
    end: int
    reason: str
    problems: int = 1
    truncated: bool = False  # the end of the file cuts the record at ``start`` (nothing after)


#: how many reasons a merged damage region spells out (the rest are counted)
_REASONS_KEPT = 3


def add_damage(damage: List[DamageRegion], start: int, end: int, error: RecordIOError) -> None:
    """Record the damaged bytes ``[start, end)`` (a reader's ``on_damage``) in ``damage``:
    adjacent places make one region, which spells out its first ``_REASONS_KEPT`` reasons."""
    reason = error.message
    if damage and damage[-1].end == start:
        region = damage[-1]
        region.end = end
        region.problems += 1
        if region.problems <= _REASONS_KEPT:
            region.reason += "; " + reason
        elif region.problems == _REASONS_KEPT + 1:
            region.reason += "; ..."
    else:
        damage.append(DamageRegion(start, end, reason))
    if isinstance(error, TruncatedFileError):
        damage[-1].truncated = True


@dataclass
class IndexCheck:
    """How the ``.idx`` beside a ``.rec`` agrees with the records actually in it."""

    path: str
    entries: int = 0
    records: int = 0
    bad_offsets: int = 0  # entries that do not point at a record head (inside the file or not)
    past_end: int = 0  # of those, entries whose offsets lie past the end of the .rec
    at_cut: int = 0  # of those, entries of the record the end of a truncated .rec cuts
    first_bad_offsets: List[Tuple[str, int]] = field(default_factory=list)
    duplicate_keys: int = 0  # lines that repeat an earlier line's key
    repeated_keys: List[Tuple[str, int]] = field(default_factory=list)  # (key, lines), first few
    duplicate_offsets: int = 0
    unindexed_records: int = 0
    in_file_order: bool = True
    integer_keys: bool = True
    keys_are_positions: bool = False  # keys 0..n-1 in file order, as rec2idx writes them
    error: Optional[str] = None  # the index could not be read at all
    rec_path: Optional[str] = None
    cut_short: bool = False  # it ends mid-line, and that line is wrong or records are missing

    @property
    def ok(self) -> bool:
        """True when every record is indexed once and every entry points at a record head."""
        return (self.error is None and self.bad_offsets == 0 and self.duplicate_keys == 0
                and self.duplicate_offsets == 0 and self.unindexed_records == 0
                and self.entries == self.records)

    @property
    def foreign(self) -> bool:
        """Most entries land on no record head: the index belongs to another file
        (``recio.records.diagnose.IndexFit.foreign`` is the rule)."""
        return self.error is None and IndexFit(
            self.entries, past_end=self.past_end,
            misses=self.bad_offsets - self.past_end).foreign

    def problems(self) -> List[str]:
        """One sentence per disagreement between the index and the records."""
        if self.error is not None:
            return [f"unreadable index: {self.error}"]
        rec = self.rec_path or "the .rec"
        shown = ", ".join(f"key {key_text(k)} -> byte {o}" for k, o in self.first_bad_offsets)
        if self.foreign:
            past = f", {self.past_end:,} of them past its end" if self.past_end else ""
            return [f"this index does not belong to this .rec ({rec}): {self.bad_offsets:,} of "
                    f"its {self.entries:,} offsets land on no record head{past} ({shown}); "
                    f"{reindex_hint(rec)}"]
        out = []
        if self.cut_short:  # a copy or a write that stopped
            out.append(f"the index is cut short: it ends in the middle of line {self.entries}")
        if self.past_end or self.at_cut:
            out.append(f"{_entries(self.past_end + self.at_cut)} list records that {rec} no "
                       f"longer holds whole ({self.past_end:,} past its end, {self.at_cut:,} at "
                       f"the record its end cuts)")
        if self.bad_offsets > self.past_end + self.at_cut:
            out.append(f"{_entries(self.bad_offsets - self.past_end - self.at_cut)} do not "
                       f"point at a record head ({shown})")
        if self.duplicate_keys:
            named = ", ".join(f"key {key_text(k)} on {n} lines" for k, n in self.repeated_keys)
            out.append(f"{self.duplicate_keys:,} line(s) repeat an earlier key ({named}): "
                       f"readers by key use the last line of a key")
        if self.duplicate_offsets:
            out.append(f"{self.duplicate_offsets} entries share a record with another key")
        if self.unindexed_records:
            out.append(f"{self.unindexed_records} records are not in the index")
        if not out and self.entries != self.records:
            out.append(f"{self.entries} index entries for {self.records} records")
        return out


def _entries(n: int) -> str:
    return f"{n:,} {'entry' if n == 1 else 'entries'}"


@dataclass
class ImageStats:
    """Statistics of the records whose payload is an ``IRHeader`` followed by an image."""

    records: int = 0
    scalar_labels: int = 0
    vector_labels: int = 0
    label_widths: Dict[int, int] = field(default_factory=dict)
    label_min: Optional[float] = None
    label_max: Optional[float] = None
    distinct_labels: int = 0
    distinct_labels_exact: bool = True
    id_min: Optional[int] = None
    id_max: Optional[int] = None
    id2_nonzero: int = 0
    formats: Dict[str, int] = field(default_factory=dict)
    #: image records whose width x height was read: all of them when there are at most
    #: ``scan_file``'s ``sample``, else a uniform sample of that many
    sampled: int = 0
    #: sampled images whose header gives no size (e.g. a JPEG with no frame header up front)
    unsized: int = 0
    sizes: Dict[str, int] = field(default_factory=dict)  # "WxH" -> count in the sample
    width_range: Optional[Tuple[int, int]] = None
    height_range: Optional[Tuple[int, int]] = None


@dataclass
class FileStats:
    """The result of one pass over a record file (see ``scan_file``)."""

    path: str
    size: int = 0
    records: int = 0
    parts: int = 0
    multipart_records: int = 0
    payload_bytes: int = 0
    size_min: Optional[int] = None
    size_median: Optional[float] = None
    size_max: Optional[int] = None
    size_median_exact: bool = True
    header_only_records: int = 0  # payload is an IRHeader (+ labels) with nothing after it
    non_image_records: int = 0
    images: ImageStats = field(default_factory=ImageStats)
    layout: Optional[Dict[str, Any]] = None  # the face-recognition layout, when recognised
    damage: List[DamageRegion] = field(default_factory=list)
    stray_heads: int = 0  # aligned magic words inside payloads
    index: Optional[IndexCheck] = None
    shown: List[Dict[str, Any]] = field(default_factory=list)

    @property
    def damaged_bytes(self) -> int:
        """Bytes inside damaged regions."""
        return sum(d.end - d.start for d in self.damage)

    def to_dict(self) -> Dict[str, Any]:
        """A JSON-ready dict of everything found."""
        out = asdict(self)
        out["damaged_bytes"] = self.damaged_bytes
        if self.index is not None:
            out["index"]["ok"] = self.index.ok
            out["index"]["problems"] = self.index.problems()
        return out


# -- image headers ------------------------------------------------------------------------------
def image_format(buf: Any, start: int = 0, end: Optional[int] = None) -> Optional[str]:
    """The image format of ``buf[start:end]`` from its first bytes (None if not an image)."""
    end = len(buf) if end is None else end
    if end - start < 4:
        return None
    return image_signature(bytes(buf[start:min(end, start + 12)]))


def image_size(buf: Any, start: int = 0, end: Optional[int] = None
               ) -> Tuple[Optional[str], Optional[int], Optional[int]]:
    """``(format, width, height)`` read from the image header in ``buf[start:end]``, no decoding.

    Works on bytes or an mmap without copying the payload; width/height are None when the
    header is not understood (e.g. progressive data before any frame header).
    """
    end = len(buf) if end is None else min(end, len(buf))
    fmt = image_format(buf, start, end)
    try:
        if fmt == "jpeg":
            p = start + 2
            while p + 4 <= end:
                if buf[p] != 0xFF:
                    break
                marker = buf[p + 1]
                if marker == 0xFF:
                    p += 1
                    continue
                if marker == 0x01 or 0xD0 <= marker <= 0xD8:
                    p += 2
                    continue
                if marker in (0xD9, 0xDA):
                    break
                if marker in _JPEG_SOF and p + 9 <= end:
                    h, w = _BE16x2.unpack_from(buf, p + 5)
                    return fmt, w, h
                p += 2 + _BE16.unpack_from(buf, p + 2)[0]
        elif fmt == "png" and end - start >= 24:
            w, h = _BE32x2.unpack_from(buf, start + 16)
            return fmt, w, h
        elif fmt == "gif" and end - start >= 10:
            w, h = _LE16x2.unpack_from(buf, start + 6)
            return fmt, w, h
        elif fmt == "bmp" and end - start >= 26:
            w, h = _LEi32x2.unpack_from(buf, start + 18)
            return fmt, w, abs(h)
        elif fmt == "webp" and end - start >= 30:
            chunk = bytes(buf[start + 12:start + 16])
            if chunk == b"VP8 ":
                w, h = _LE16x2.unpack_from(buf, start + 26)
                return fmt, w & 0x3FFF, h & 0x3FFF
            if chunk == b"VP8L":
                bits = _LE32.unpack_from(buf, start + 21)[0]
                return fmt, (bits & 0x3FFF) + 1, ((bits >> 14) & 0x3FFF) + 1
            if chunk == b"VP8X":
                w = int.from_bytes(bytes(buf[start + 24:start + 27]), "little") + 1
                h = int.from_bytes(bytes(buf[start + 27:start + 30]), "little") + 1
                return fmt, w, h
    except struct.error:
        pass
    return fmt, None, None


def sniff_format(path: "os.PathLike[str] | str") -> str:
    """What a file that holds no RecordIO record seems to be, from its first bytes: for
    messages that tell the user which file to pass instead (``recio.records.sniff`` is the
    rule)."""
    with storage.open_input(path) as f:
        head = f.read(4096)
    if not head:
        return "an empty file"
    return describe(path, head) or "neither RecordIO nor text (no record magic 0xced7230a found)"


# -- the scan -----------------------------------------------------------------------------------
def scan_file(path: "os.PathLike[str] | str", *, sample: int = 1000, show: int = 0,
              idx_path: Optional[str] = None, check_index: bool = True,
              collect_heads: bool = False,
              progress: Optional[Callable[[int], None]] = None
              ) -> Tuple[FileStats, Optional[array]]:
    """Scan ``path`` once; return its ``FileStats`` and (if ``collect_heads``) the record heads.

    The records are walked by ``RecordReader`` in skip mode, so what counts as damage here is
    exactly what makes every reader raise (bad headers, lengths past the end, interrupted
    multi-part records, and record data holding an aligned magic word: a corrupt length that
    swallows the records after it); each damaged region is what skip mode passes over.
    ``sample``: how many image records (spread over the file) have their width x height read.
    ``show``: describe the first ``show`` records in ``stats.shown``. Every byte is read, so
    swallowed record heads are found. ``idx_path`` (default: the ``.idx`` beside the file) is
    checked when it exists. ``progress(nbytes)`` is called now and then with the bytes scanned
    since the last call.
    """
    path = os.fspath(path)
    if idx_path is None:
        candidate = sibling_index_path(path)
        idx_path = candidate if check_index and storage.exists(candidate) else None
    want_heads = collect_heads or idx_path is not None
    heads = array("Q")
    st = FileStats(path=path)
    damage = st.damage

    def damaged(start: int, end: int, error: RecordIOError) -> None:
        add_damage(damage, start, end, error)
        if "swallows" in error.message:
            st.stray_heads += 1

    with RecordReader(path, on_error="skip", on_damage=damaged) as reader:
        st.size = reader.size
        mm = reader.buffer
        portable.advise(mm, "SEQUENTIAL")
        _scan(reader, st, heads if want_heads else None, sample, show, progress)
    if idx_path is not None:
        cut = next((d.start for d in st.damage if d.truncated), None)
        st.index = check_index_file(idx_path, heads, st.size, path, cut)
    return st, (heads if collect_heads else None)


def _scan(reader: Any, st: FileStats, heads: Optional[array], sample: int, show: int,
          progress: Optional[Callable[[int], None]]) -> None:
    """Walk every record of ``reader`` once, in skip mode, filling ``st``.

    Each record's payload is handed, without copying unless it has several parts, to the
    length tally and the image tally; damage is recorded by the reader's ``on_damage``.
    """
    mm, size = reader.buffer, st.size
    magic_bytes = framing.MAGIC_BYTES
    # seeded: the report is the same every run
    lengths = _LengthTally(random.Random(0))
    images = _ImageTally(st, sample, random.Random(1))
    reported = 0
    for off, spans in reader.iter_spans():
        if progress is not None and off - reported >= _PROGRESS_EVERY:
            progress(off - reported)
            reported = off
        nparts = len(spans)
        if mm is None:  # no map (a remote object): the record's bytes, copied
            buf, base = reader.span_bytes(spans), 0
            length = len(buf)
        elif nparts == 1:
            buf, base = mm, spans[0][0]
            length = spans[0][1] - base
        else:
            buf, base = magic_bytes.join([mm[a:b] for a, b in spans]), 0
            length = len(buf)
        if heads is not None:
            heads.append(off)
        lengths.add(length, nparts)
        entry: Optional[Dict[str, Any]] = None
        if len(st.shown) < show:
            entry = {"offset": off, "length": length, "parts": nparts}
            st.shown.append(entry)
        if not images.add(buf, base, length, lengths.records, entry):
            st.non_image_records += 1
    if progress is not None and size > reported:
        progress(size - reported)
    lengths.finish(st)
    images.finish()


class _LengthTally:
    """Record, part and payload-byte counts and the payload lengths' min/median/max.

    Lengths are kept exactly up to ``_MEDIAN_EXACT_LIMIT`` records, then as a uniform reservoir
    sample of that size (memory stays bounded on files of billions of records).
    """

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.lengths = array("L")
        self.records = self.parts = self.multipart = self.payload_bytes = 0

    def add(self, length: int, nparts: int) -> None:
        """Count one record of ``nparts`` parts and ``length`` payload bytes."""
        self.records += 1
        self.parts += nparts
        if nparts > 1:
            self.multipart += 1
        self.payload_bytes += length
        if len(self.lengths) < _MEDIAN_EXACT_LIMIT:
            self.lengths.append(length)
        else:
            j = self.rng.randrange(self.records)
            if j < _MEDIAN_EXACT_LIMIT:
                self.lengths[j] = length

    def finish(self, st: FileStats) -> None:
        """Put the counts and the length statistics into ``st``."""
        st.records, st.parts, st.multipart_records, st.payload_bytes = (
            self.records, self.parts, self.multipart, self.payload_bytes)
        if self.lengths:
            ordered = sorted(self.lengths)
            mid = len(ordered) // 2
            st.size_median = (ordered[mid] if len(ordered) % 2 else
                              (ordered[mid - 1] + ordered[mid]) / 2)
            st.size_min, st.size_max = ordered[0], ordered[-1]
            st.size_median_exact = self.records <= _MEDIAN_EXACT_LIMIT


class _ImageTally:
    """What the ``IRHeader`` of each record says: image statistics, the face-recognition layout,
    header-only records, and the header fields of the records being shown.

    A payload is an image record when an ``IRHeader`` (and the labels its ``flag`` announces)
    fits and the bytes after it start like a known image format. The width x height of a
    uniform sample of ``sample`` image records is read (reservoir sampling: every image record
    when there are at most ``sample``; a header is parsed only when its record enters the
    sample, about ``sample * (1 + ln(n / sample))`` times for n images).
    """

    def __init__(self, st: FileStats, sample: int, rng: random.Random) -> None:
        self.st, self.img, self.sample, self.rng = st, st.images, sample, rng
        self.labels: set = set()
        self.label_widths: Counter = Counter()
        self.formats: Counter = Counter()
        self.dims: Counter = Counter()
        self.lab_min: Optional[float] = None
        self.lab_max: Optional[float] = None
        self.id_min: Optional[int] = None
        self.id_max: Optional[int] = None
        self.reservoir: List[Optional[Tuple[int, int]]] = []  # (w, h), None: no size known
        self.face: Optional[Dict[str, Any]] = None
        self.face_identity_records = 0

    def add(self, buf: Any, base: int, length: int, records: int,
            entry: Optional[Dict[str, Any]]) -> bool:
        """Look at the payload ``buf[base:base + length]`` (the ``records``-th record); fill
        ``entry`` when the record is shown. True when it is an image record."""
        if length < _IR_SIZE:
            return False
        flag, label, rid, rid2 = _IR.unpack_from(buf, base)
        body = base + _IR_SIZE + 4 * flag
        end = base + length
        if body > end:
            return False
        if flag > 0:
            label = _F32.unpack_from(buf, base + _IR_SIZE)[0]
        if records == 1 and flag == 2:
            self._face_header(buf, base, body == end)
        fmt = None
        if body == end:
            self.st.header_only_records += 1
            if self.face is not None and records > self.face["first_identity_key"]:
                self.face_identity_records += 1
        else:
            fmt = _SIGNATURES.get(buf[body:body + 2])
        if entry is not None:
            entry["flag"], entry["id"], entry["id2"] = flag, rid, rid2
            entry["label"] = (list(struct.unpack_from(f"<{flag}f", buf, base + _IR_SIZE))
                              if flag else label)
            if fmt is not None:
                entry["format"], entry["width"], entry["height"] = image_size(buf, body, end)
        if fmt is None:
            return False
        self._count_image(fmt, flag, label, rid, rid2)
        self._maybe_sample_size(buf, body, end)
        return True

    def _face_header(self, buf: Any, base: int, header_only: bool) -> None:
        """Record 0 of the face-recognition layout: a header-only record whose two labels are
        ``[first identity key, end]``."""
        a = _F32.unpack_from(buf, base + _IR_SIZE)[0]
        b = _F32.unpack_from(buf, base + _IR_SIZE + 4)[0]
        if header_only and math.isfinite(a) and math.isfinite(b) and 1 <= a <= b < 2 ** 53:
            self.face = {"images": int(a) - 1, "identities": int(b - a),
                         "first_identity_key": int(a), "records_expected": int(b)}

    def _count_image(self, fmt: str, flag: int, label: float, rid: int, rid2: int) -> None:
        """Count one image record's format, label (kind, width, range, distinct) and ids."""
        img = self.img
        img.records += 1
        if flag == 0:
            img.scalar_labels += 1
        else:
            img.vector_labels += 1
        self.label_widths[flag] += 1
        self.formats[fmt] += 1
        if self.lab_min is None or label < self.lab_min:
            self.lab_min = label
        if self.lab_max is None or label > self.lab_max:
            self.lab_max = label
        if len(self.labels) < _DISTINCT_LABEL_LIMIT:
            self.labels.add(label)
        elif label not in self.labels:
            img.distinct_labels_exact = False
        if self.id_min is None or rid < self.id_min:
            self.id_min = rid
        if self.id_max is None or rid > self.id_max:
            self.id_max = rid
        if rid2:
            img.id2_nonzero += 1

    def _maybe_sample_size(self, buf: Any, body: int, end: int) -> None:
        """Read width x height of this image if it enters the sample (Algorithm R: the
        ``k``-th image record replaces a random slot with probability ``sample / k``)."""
        k = self.img.records
        if len(self.reservoir) < self.sample:
            slot = len(self.reservoir)
            self.reservoir.append(None)
        else:
            slot = self.rng.randrange(k)
            if slot >= self.sample:
                return
        _, w, h = image_size(buf, body, end)
        self.reservoir[slot] = None if w is None or h is None else (w, h)  # both or neither

    def finish(self) -> None:
        """Put the tallies into ``st.images`` and the face-recognition layout into ``st``."""
        img, dims = self.img, self.dims
        dims.update(d for d in self.reservoir if d is not None)
        img.sampled = len(self.reservoir)
        img.unsized = self.reservoir.count(None)
        img.label_widths = dict(sorted(self.label_widths.items()))
        img.formats = dict(self.formats.most_common())
        img.label_min, img.label_max = self.lab_min, self.lab_max
        img.distinct_labels = len(self.labels)
        img.id_min, img.id_max = self.id_min, self.id_max
        img.sizes = {f"{w}x{h}": n for (w, h), n in dims.most_common(20)}
        if dims:
            img.width_range = (min(w for w, _ in dims), max(w for w, _ in dims))
            img.height_range = (min(h for _, h in dims), max(h for _, h in dims))
        face = self.face
        if face is not None:
            face["identity_records"] = self.face_identity_records
            face["consistent"] = (self.st.records == face["records_expected"]
                                  and self.face_identity_records == face["identities"])
            self.st.layout = {"name": "face-recognition", **face}


def check_index_file(idx_path: str, heads: "array | List[int]", rec_size: int,
                     rec_path: Optional[str] = None, cut: Optional[int] = None) -> IndexCheck:
    """Compare an ``.idx`` with the record heads found by a scan (``heads`` in file order) of
    the ``rec_size``-byte ``rec_path``; ``cut``: the head of the record the end of the file
    cuts, when it was found truncated."""
    chk = IndexCheck(path=idx_path, records=len(heads), rec_path=rec_path)
    try:
        keys, offsets = read_index(idx_path, key_type=str)
    except (StorageError, NotRegularFileError):  # the network, or not a file: not damage
        raise
    except RecordIOError as exc:
        chk.error = str(exc)
        return chk
    chk.entries = len(keys)
    offs = np.asarray(offsets, dtype=np.uint64) if offsets else np.zeros(0, np.uint64)
    head_arr = np.frombuffer(heads, dtype=np.uint64) if isinstance(heads, array) else \
        np.asarray(heads, dtype=np.uint64)
    at_head = np.isin(offs, head_arr)
    chk.bad_offsets = int((~at_head).sum())
    past = offs + 8 > rec_size
    chk.past_end = int(past.sum())
    chk.at_cut = 0 if cut is None else int((offs == cut).sum())
    missed = ~at_head & ~past & (offs != (rec_size if cut is None else cut))
    chk.first_bad_offsets = [(keys[i], int(offs[i])) for i in np.flatnonzero(missed)[:5]]
    counts = Counter(keys)
    chk.duplicate_keys = len(keys) - len(counts)
    if chk.duplicate_keys:
        chk.repeated_keys = [(k, n) for k, n in counts.items() if n > 1][:3]
    unique_offs = np.unique(offs)
    chk.duplicate_offsets = len(offs) - len(unique_offs)
    chk.unindexed_records = int((~np.isin(head_arr, unique_offs)).sum())
    chk.in_file_order = bool(np.all(offs[1:] > offs[:-1])) if len(offs) > 1 else True
    chk.cut_short = bool(len(offs)) and not (at_head[-1] and chk.ok) and ends_mid_line(idx_path)
    try:
        ints = [int(k) for k in keys]
    except ValueError:
        chk.integer_keys = False
    else:
        chk.keys_are_positions = ints == list(range(len(ints))) and chk.ok and chk.in_file_order
    return chk
