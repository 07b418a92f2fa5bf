"""What a dataset of image record files holds: label histograms, image sizes, duplicate ids,
header records and class names, over one file or many.

Each file is scanned once by :func:`recio.image.tools.stats.scan_file` (framing, damage, index
check); the record heads it finds are then read as arrays straight from the memory map: the
image header of every record (flag, first label, id) is gathered with NumPy in blocks of
``BLOCK`` records, so labels and ids cost no Python work per record. Memory: the heads and the
ids, 16 bytes a record, plus the label counts.

- Labels: per position of the label vector (position 0 only for scalar labels). Integer labels
  (class ids) are counted exactly per value; when a position holds non-integer labels, or more
  than ``_MAX_CLASSES`` distinct values, its histogram has ``BINS`` equal-width bins instead.
  NaN and infinite labels are counted apart (``nonfinite``).
- Sizes: width, height, short side and aspect ratio (width / height) percentiles from the image
  headers (JPEG SOF, PNG IHDR, ...; no decoding) of ``sample`` image records per file chosen at
  random with ``seed`` (all of them with ``sample=0``); with several files each sampled value is
  weighted by its file's share, so a small file does not count as much as a large one.
  Percentiles are the lower weighted ones: the smallest value whose cumulative share reaches q.
- Duplicate ids: image records sharing an image-header id (``im2rec`` writes the list index).
- Header records: records holding only an image header (the header and identity records of the
  InsightFace face-recognition layout); DALI makes a sample of every one of them.
"""
from __future__ import annotations

import os
from collections import Counter
from dataclasses import dataclass, field
from typing import Any, Callable, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio import storage
from recio.errors import RecordIOError
from recio.image.lists import find_classes, read_classes
from recio.image.tools.stats import FileStats, image_size, scan_file, sniff_format
from recio.records.index_format import sibling_index_path
from recio.records.reader import RecordReader
from recio.records.source import Source, expand_source

PathLike = Union[str, "os.PathLike[str]"]
Progress = Optional[Callable[[int], None]]

PERCENTILES = (0, 1, 5, 25, 50, 75, 95, 99, 100)
#: integer labels with at most this many distinct values get one count per value
_MAX_CLASSES = 1_000_000
#: bins of a histogram of non-integer labels
BINS = 50
#: records whose headers are gathered at once
BLOCK = 1 << 20
#: image records per file whose size is read by default
DEFAULT_SAMPLE = 10_000
#: image formats recognised from their first two bytes (as ``recio.image.tools.stats``)
_SIGNATURES = {(0xFF, 0xD8), (0x89, 0x50), (0x47, 0x49), (0x42, 0x4D), (0x52, 0x49),
               (0x49, 0x49), (0x4D, 0x4D)}


@dataclass
class LabelHistogram:
    """Labels at one position of the label vector: per class value, or binned."""

    position: int
    kind: str = "classes"  # "classes": one count per value; "bins": [edges[i], edges[i+1])
    values: List[float] = field(default_factory=list)  # class values, or the BINS + 1 edges
    counts: List[int] = field(default_factory=list)
    nonfinite: int = 0
    total: int = 0

    def to_dict(self, limit: int = 1000) -> Dict[str, Any]:
        """JSON-ready; a class histogram of more than ``limit`` classes gives the ``limit``
        most common (``truncated``)."""
        pairs = list(zip(self.values, self.counts))
        truncated = self.kind == "classes" and len(pairs) > limit
        if truncated:
            pairs = sorted(pairs, key=lambda vc: -vc[1])[:limit]
        out: Dict[str, Any] = {"position": self.position, "kind": self.kind,
                               "total": self.total, "nonfinite": self.nonfinite}
        if self.kind == "classes":
            out["classes"] = len(self.values)
            out["counts"] = [{"label": _plain(v), "count": c} for v, c in pairs]
            out["truncated"] = truncated
            if self.counts:
                out["per_class"] = {"min": min(self.counts), "max": max(self.counts),
                                    "median": float(np.median(self.counts))}
        else:
            out["edges"] = [float(v) for v in self.values]
            out["counts"] = list(self.counts)
        return out


@dataclass
class DatasetStats:
    """Statistics of one or more image record files (see the module docstring)."""

    files: List[FileStats] = field(default_factory=list)
    records: int = 0
    bytes: int = 0
    image_records: int = 0
    header_records: int = 0
    other_records: int = 0
    label_widths: Dict[int, int] = field(default_factory=dict)
    labels: List[LabelHistogram] = field(default_factory=list)
    num_classes: Optional[int] = None
    classes_path: Optional[str] = None
    class_names: Dict[int, str] = field(default_factory=dict)
    sizes: Dict[str, Dict[str, float]] = field(default_factory=dict)
    #: image records whose size is in ``sizes``; ``sizes_unsized``: also chosen, but their
    #: header gives no size
    sizes_sampled: int = 0
    sizes_unsized: int = 0
    duplicate_ids: int = 0
    duplicate_examples: List[Tuple[int, int]] = field(default_factory=list)
    face_layout_files: List[str] = field(default_factory=list)
    suggestions: List[str] = field(default_factory=list)
    #: the sampled (width, height) rows and their weights (for plots; not in ``to_dict``)
    size_samples: Optional[np.ndarray] = field(default=None, repr=False)
    size_weights: Optional[np.ndarray] = field(default=None, repr=False)

    def to_dict(self) -> Dict[str, Any]:
        """JSON-ready: NaN and infinite labels are only counted (``nonfinite``), so no value
        here is NaN or infinite."""
        return ({
            "files": [f.path for f in self.files], "records": self.records,
            "bytes": self.bytes, "image_records": self.image_records,
            "header_records": self.header_records, "other_records": self.other_records,
            "label_widths": {str(k): v for k, v in self.label_widths.items()},
            "labels": [h.to_dict() for h in self.labels], "num_classes": self.num_classes,
            "classes_path": self.classes_path,
            "class_names": {str(k): v for k, v in sorted(self.class_names.items())},
            "sizes": self.sizes, "sizes_sampled": self.sizes_sampled,
            "sizes_unsized": self.sizes_unsized,
            "duplicate_ids": self.duplicate_ids,
            "duplicate_examples": [{"id": i, "count": c} for i, c in self.duplicate_examples],
            "face_layout_files": self.face_layout_files, "suggestions": self.suggestions})


def _plain(value: float) -> Union[int, float]:
    return int(value) if float(value).is_integer() else float(value)


# -- one file ----------------------------------------------------------------------------------

class _Tally:
    """Label counts, ids, header kinds and size samples over every file."""

    def __init__(self, sample: int, seed: int) -> None:
        self.sample, self.rng = sample, np.random.default_rng(seed)
        self.classes: List[Counter] = []
        self.floats: List[List[np.ndarray]] = []
        self.nonfinite: List[int] = []
        self.total: List[int] = []
        self.ids: List[np.ndarray] = []
        self.widths: Counter = Counter()
        self.sizes: List[Tuple[np.ndarray, float]] = []  # (width, height) rows, weight
        self.unsized = 0  # chosen for the sample, but no size in the header

    def position(self, k: int) -> None:
        while len(self.classes) <= k:
            self.classes.append(Counter())
            self.floats.append([])
            self.nonfinite.append(0)
            self.total.append(0)

    def labels(self, k: int, values: np.ndarray) -> None:
        """Count the labels ``values`` found at position ``k``."""
        self.position(k)
        finite = np.isfinite(values)
        self.nonfinite[k] += int((~finite).sum())
        values = values[finite]
        self.total[k] += len(values)
        if not len(values):
            return
        counter = self.classes[k]
        if counter is not None:
            if (values == np.floor(values)).all() and np.abs(values).max() < 2 ** 53:
                uniq, counts = np.unique(values, return_counts=True)
                counter.update(dict(zip(uniq.tolist(), counts.tolist())))
                if len(counter) <= _MAX_CLASSES:
                    return
                values = _expand(counter)  # too many classes: bin everything from now on
            else:
                values = np.concatenate([values, _expand(counter)])
            self.classes[k] = None  # type: ignore[call-overload]
        self.floats[k].append(values)


def _expand(counter: Counter) -> np.ndarray:
    """The values a counter counted, each repeated its count times."""
    return np.repeat(np.array(list(counter), np.float64), list(counter.values()))


def _gather(arr: np.ndarray, offsets: np.ndarray, width: int) -> np.ndarray:
    """``arr[o:o + width]`` for each offset, as rows of a (n, width) uint8 array."""
    return arr[offsets[:, None] + np.arange(width)]


def _scan_headers(path: str, heads: np.ndarray, tally: _Tally) -> Tuple[int, int, int]:
    """Gather every record's image header from the map; returns (image, header-only, other)
    record counts and records label, id and size-sample data in ``tally``."""
    counts = [0, 0, 0]
    with RecordReader(path) as reader:
        arr = np.frombuffer(reader.buffer, np.uint8)
        bodies: List[np.ndarray] = []
        ends: List[np.ndarray] = []
        for start in range(0, len(heads), BLOCK):
            block = heads[start:start + BLOCK]
            body, end = _block_headers(arr, block, reader, tally, counts)
            bodies.append(body)
            ends.append(end)
        if bodies:
            _sample_sizes(reader.buffer, np.concatenate(bodies), np.concatenate(ends), tally)
    return counts[0], counts[1], counts[2]


def _block_headers(arr: np.ndarray, heads: np.ndarray, reader: RecordReader, tally: _Tally,
                   counts: List[int]) -> Tuple[np.ndarray, np.ndarray]:
    """One block of records: label and id arrays of the image records into ``tally``; returns
    the image records' image start and end offsets (single-part records only: a multi-part
    record's image is read whole, its size is not sampled)."""
    size = len(arr)
    lrec = _gather(arr, heads + 4, 4).view("<u4")[:, 0]
    single = (lrec >> 29) == 0
    length = (lrec & ((1 << 29) - 1)).astype(np.int64)
    ok = single & (length >= 24) & (heads + 8 + length <= size)
    payload = heads[ok] + 8
    length = length[ok]
    header = _gather(arr, payload, 24)
    flag = header[:, 0:4].copy().view("<u4")[:, 0].astype(np.int64)
    label0 = header[:, 4:8].copy().view("<f4")[:, 0].astype(np.float64)
    ids = header[:, 8:16].copy().view("<u8")[:, 0]
    body = payload + 24 + 4 * flag
    fits = body <= payload + length
    header_only = fits & (body == payload + length)
    first = np.zeros((len(body), 2), np.uint8)
    has_body = fits & ~header_only
    first[has_body] = _gather(arr, body[has_body], 2)
    image = has_body & np.isin(first[:, 0].astype(np.int32) * 256 + first[:, 1],
                               [a * 256 + b for a, b in _SIGNATURES])
    counts[0] += int(image.sum())
    counts[1] += int(header_only.sum())
    counts[2] += int((~image & ~header_only).sum()) + int((~ok).sum() - (~single).sum())
    _count_labels(arr, payload[image], flag[image], label0[image], tally)
    tally.ids.append(ids[image])
    for offset in heads[~single].tolist():  # multi-part records: rare, one at a time
        _multipart_record(reader.read_at(offset), tally, counts)
    return body[image], (payload + length)[image]


def _count_labels(arr: np.ndarray, payload: np.ndarray, flag: np.ndarray, label0: np.ndarray,
                  tally: _Tally) -> None:
    scalar = flag == 0
    if scalar.any():
        tally.widths[0] += int(scalar.sum())
        tally.labels(0, label0[scalar])
    for width in np.unique(flag[~scalar]).tolist():
        rows = payload[flag == width] + 24
        tally.widths[width] += len(rows)
        vectors = _gather(arr, rows, 4 * width).view("<f4").astype(np.float64)
        for k in range(width):
            tally.labels(k, vectors[:, k])


def _multipart_record(record: bytes, tally: _Tally, counts: List[int]) -> None:
    if len(record) < 24:
        counts[2] += 1
        return
    flag, label0 = np.frombuffer(record[:8], "<u4")[0], np.frombuffer(record[4:8], "<f4")[0]
    body = 24 + 4 * int(flag)
    if body > len(record):
        counts[2] += 1
    elif body == len(record):
        counts[1] += 1
    elif tuple(record[body:body + 2]) in _SIGNATURES:
        counts[0] += 1
        labels = [float(label0)] if flag == 0 else np.frombuffer(
            record[24:body], "<f4").astype(np.float64).tolist()
        tally.widths[int(flag)] += 1
        for k, value in enumerate(labels):
            tally.labels(k, np.array([value]))
        tally.ids.append(np.frombuffer(record[8:16], "<u8").copy())
    else:
        counts[2] += 1


def _sample_sizes(buf: Any, bodies: np.ndarray, ends: np.ndarray, tally: _Tally) -> None:
    n = len(bodies)
    if not n:
        return
    take = n if tally.sample == 0 or tally.sample >= n else tally.sample
    chosen = np.arange(n) if take == n else np.sort(tally.rng.choice(n, take, replace=False))
    dims = []
    for i in chosen.tolist():
        _, width, height = image_size(buf, int(bodies[i]), int(ends[i]))
        if width and height:
            dims.append((width, height))
    tally.unsized += len(chosen) - len(dims)
    if dims:
        tally.sizes.append((np.array(dims, np.float64), n / len(chosen)))


# -- all files ---------------------------------------------------------------------------------

def dataset_stats(paths: Source, *, sample: int = DEFAULT_SAMPLE,
                  seed: int = 0, idx_path: Optional[PathLike] = None, show: int = 0,
                  progress: Progress = None) -> DatasetStats:
    """Statistics of the record files ``paths``: any source (``recio.records.source``: paths,
    URLs, ``;``-joined, folders, globs, manifests).

    ``sample``: image records per file whose size is read (0: all). ``idx_path`` is the
    index to check for a single file (default: the ``.idx`` beside each); ``show``: headers of
    the first records of each file kept in ``FileStats.shown``. ``progress(n)``:
    bytes scanned. A file that is not RecordIO at all (no record in it: an image, a ``.lst``,
    an ``.idx``) raises :class:`RecordIOError` saying what it seems to be.
    """
    files = expand_source(paths)
    if idx_path is not None and len(files) > 1:
        raise ValueError("idx_path names the index of one file; give one file or none")
    out = DatasetStats()
    tally = _Tally(sample, seed)
    for path in files:
        # a remote object is downloaded once (streamed) and scanned where it can be mapped
        with storage.local_copy(path) as local:
            index = idx_path
            if index is None and storage.is_url(path):
                sibling = sibling_index_path(path)
                index = sibling if storage.exists(sibling) else None
            st, heads = scan_file(local, sample=min(sample or 1000, 1000), show=show,
                                  idx_path=None if index is None else os.fspath(index),
                                  collect_heads=True, progress=progress)
            st.path = path
            if st.index is not None:  # the scan saw a local copy: name the file given
                st.index.rec_path = path
            if st.size and not st.records:
                raise RecordIOError(f"holds no RecordIO record: it looks like "
                                    f"{sniff_format(local)}", path=path)
            out.files.append(st)
            images = header_only = other = 0
            if st.records:
                assert heads is not None  # collect_heads=True
                images, header_only, other = _scan_headers(
                    local, np.frombuffer(heads, np.uint64).astype(np.int64), tally)
        out.records += st.records
        out.bytes += st.size
        out.image_records += images
        out.header_records += header_only
        out.other_records += other
        if st.layout is not None:
            out.face_layout_files.append(path)
        if out.classes_path is None:
            out.classes_path = find_classes(path)
    _finish(out, tally)
    return out


def _finish(out: DatasetStats, tally: _Tally) -> None:
    out.label_widths = dict(sorted(tally.widths.items()))
    for k, counter in enumerate(tally.classes):
        hist = LabelHistogram(k, nonfinite=tally.nonfinite[k], total=tally.total[k])
        if counter is not None:
            ordered = sorted(counter.items())
            hist.values = [v for v, _ in ordered]
            hist.counts = [c for _, c in ordered]
        else:
            values = np.concatenate(tally.floats[k])
            counts, edges = np.histogram(values, BINS)
            hist.kind, hist.values, hist.counts = "bins", edges.tolist(), counts.tolist()
        out.labels.append(hist)
    if out.labels and out.labels[0].kind == "classes" and out.labels[0].values:
        out.num_classes = len(out.labels[0].values)
    if out.classes_path is not None:
        out.class_names = read_classes(out.classes_path)
    ids = np.concatenate(tally.ids) if tally.ids else np.zeros(0, np.uint64)
    if len(ids):
        uniq, counts = np.unique(ids, return_counts=True)
        repeated = counts > 1
        out.duplicate_ids = int((counts[repeated] - 1).sum())
        out.duplicate_examples = [(int(i), int(c)) for i, c in
                                  zip(uniq[repeated][:10].tolist(), counts[repeated][:10].tolist())]
    out.sizes, out.sizes_sampled = _size_percentiles(tally.sizes)
    out.sizes_unsized = tally.unsized
    if tally.sizes:
        out.size_samples = np.concatenate([d for d, _ in tally.sizes])
        out.size_weights = np.concatenate([np.full(len(d), w) for d, w in tally.sizes])
    if out.face_layout_files or out.header_records:
        first = (out.face_layout_files or [f.path for f in out.files])[0]
        stem = os.path.splitext(os.path.basename(first))[0]
        out.suggestions.append(
            f"{out.header_records} record(s) hold no image (header/identity records"
            f"{', InsightFace layout' if out.face_layout_files else ''}); DALI makes a sample "
            f"of every .idx entry: `recio repack {first} {stem}_images --images-only` writes a "
            "copy with the images only")


def _size_percentiles(samples: List[Tuple[np.ndarray, float]]
                      ) -> Tuple[Dict[str, Dict[str, float]], int]:
    if not samples:
        return {}, 0
    dims = np.concatenate([d for d, _ in samples])
    weights = np.concatenate([np.full(len(d), w) for d, w in samples])
    width, height = dims[:, 0], dims[:, 1]
    measures = {"width": width, "height": height, "short_side": np.minimum(width, height),
                "aspect": width / height}
    return {name: weighted_percentiles(values, weights) for name, values in measures.items()}, \
        len(dims)


def weighted_percentiles(values: np.ndarray, weights: Optional[np.ndarray] = None,
                         qs: Sequence[float] = PERCENTILES) -> Dict[str, float]:
    """``{"p50": v, ...}``: for each q, the smallest value whose cumulative weight reaches q%
    of the total (with equal weights: NumPy's ``inverted_cdf`` percentile)."""
    order = np.argsort(values, kind="stable")
    ordered = np.asarray(values, np.float64)[order]
    w = np.ones(len(ordered)) if weights is None else np.asarray(weights, np.float64)[order]
    cumulative = np.cumsum(w) / w.sum()
    out = {}
    for q in qs:
        i = int(np.searchsorted(cumulative, q / 100 - 1e-12, side="left"))
        out[f"p{q:g}"] = float(ordered[min(i, len(ordered) - 1)])
    return out
