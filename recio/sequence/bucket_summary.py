"""What ``recio buckets`` reports for a sequence ``.rec``: its lengths, a histogram of them, and
the padding each choice of length buckets leaves.

The lengths come from the sample-count sidecar beside the index (no record is decoded); the
buckets and their padding waste from ``recio.sequence.bucketing``.
"""
from __future__ import annotations

import os
from typing import Any, Callable, Dict, List, Optional, Union

import numpy as np

from recio.sequence.bucketing import bucketing_report
from recio.sequence.sidecar import sample_counts

PathLike = Union[str, "os.PathLike[str]"]

#: bins of the length histogram
_HISTOGRAM_BINS = 12


def length_bins(lengths: np.ndarray, bins: int = _HISTOGRAM_BINS) -> List[Dict[str, int]]:
    """About ``bins`` bins over ``lengths`` (``low``/``high`` inclusive, ``count``).

    One bin per length when there are at most ``bins`` distinct lengths in the range;
    log-spaced when the tail is long (longest > 20 x shortest); else equal width.
    """
    lengths = np.asarray(lengths, dtype=np.int64)
    if not lengths.size:
        return []
    lo, hi = int(lengths.min()), int(lengths.max())
    if hi - lo + 1 <= bins:
        edges = np.arange(lo, hi + 2)
    elif lo >= 1 and hi / lo > 20:
        edges = np.unique(np.round(np.geomspace(lo, hi + 1, bins + 1)).astype(np.int64))
    else:
        edges = np.unique(np.round(np.linspace(lo, hi + 1, bins + 1)).astype(np.int64))
    counts = np.histogram(lengths, bins=edges)[0]
    return [{"low": int(a), "high": int(b) - 1, "count": int(c)}
            for a, b, c in zip(edges[:-1], edges[1:], counts)]


def bucket_summary(rec_path: PathLike, num_buckets: int = 3, batch_size: int = 32,
                   max_buckets: int = 8, stream: Optional[str] = None,
                   progress: Optional[Callable[[int], Any]] = None) -> Dict[str, Any]:
    """Lengths, histogram and optimal ``num_buckets`` boundaries of the sequences of
    ``rec_path``, with the ``bucketing_report`` table for Q = 1..``max_buckets``.

    ``stream``: count this stream's samples (default: each record's largest stream).
    ``progress(1)`` after each Q of the table. The dict is JSON-ready; for a file without
    sequences the length fields and the chosen buckets are None/empty. A missing sidecar or
    stream raises ``SequenceError``.
    """
    lengths = np.asarray(sample_counts(rec_path, stream=stream), dtype=np.int64)
    top = max(max_buckets, num_buckets)
    rows = bucketing_report(lengths, batch_size, top, progress=progress) if lengths.size else []
    chosen = rows[num_buckets - 1] if rows else None
    some = bool(lengths.size)
    return {
        "file": os.fspath(rec_path),
        "sequences": int(lengths.size),
        "samples": int(lengths.sum()),
        "min_length": int(lengths.min()) if some else None,
        "max_length": int(lengths.max()) if some else None,
        "median_length": float(np.median(lengths)) if some else None,
        "mean_length": float(lengths.mean()) if some else None,
        "batch_size": batch_size,
        "num_buckets": num_buckets,
        "boundaries": chosen["optimal"]["boundaries"] if chosen else [],
        "padding_waste": chosen["optimal"]["waste"] if chosen else None,
        "random_waste": chosen["random_waste"] if chosen else None,
        "predicted_speedup": chosen["predicted_speedup"] if chosen else None,
        "histogram": length_bins(lengths),
        "table": rows[:max_buckets],
    }
