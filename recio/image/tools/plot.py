"""Pictures of :class:`~recio.image.tools.dataset_stats.DatasetStats`: the label histogram of each
label position and the distributions of image width, height, short side and aspect ratio.

Drawn with matplotlib (the ``plot`` extra: ``pip install 'recio[plot]'``), imported only when a
picture is asked for, with the non-interactive Agg backend so it works without a display.
"""
from __future__ import annotations

import os
from typing import Any, Union

import numpy as np

from recio.image.tools.dataset_stats import DatasetStats, LabelHistogram
from recio.optional import require
from recio.records.atomic import atomic_open

PathLike = Union[str, "os.PathLike[str]"]

#: class histograms with more classes show the most common ones only
_TOP_CLASSES = 40
#: label positions drawn (label vectors can be long)
_MAX_POSITIONS = 4


def plot_stats(stats: DatasetStats, path: PathLike, *, dpi: int = 100) -> str:
    """Draw ``stats`` into the picture ``path`` (PNG, or any format matplotlib writes by the
    file's extension), atomically; returns the path. ImportError saying what to install when
    matplotlib is missing."""
    fig = draw_stats(stats, dpi=dpi)
    path = os.fspath(path)
    fmt = os.path.splitext(path)[1].lstrip(".").lower() or "png"
    with atomic_open(path, "wb") as f:
        fig.savefig(f, format=fmt)
    return path


def draw_stats(stats: DatasetStats, *, dpi: int = 100) -> Any:
    """The matplotlib ``Figure`` :func:`plot_stats` saves: one row per label position, then the
    four size distributions. Counts are whole numbers on every axis, and a measure with a
    single value is one bar labelled with that value (not an axis from v - 0.5 to v + 0.5)."""
    matplotlib = require("matplotlib", feature="recio inspect --plot")
    matplotlib.use("Agg", force=True)
    from matplotlib.figure import Figure  # Figure needs no pyplot state, so threads are safe

    labels = stats.labels[:_MAX_POSITIONS]
    rows = len(labels) + (1 if stats.size_samples is not None else 0) or 1
    fig = Figure(figsize=(12, 3.2 * rows), dpi=dpi)
    for row, hist in enumerate(labels):
        _label_axes(fig.add_subplot(rows, 1, row + 1), hist, stats)
    if stats.size_samples is not None:
        _size_axes(fig, rows, stats)
    if not labels and stats.size_samples is None:
        fig.add_subplot(1, 1, 1).text(0.5, 0.5, "no image records", ha="center")
    fig.tight_layout()
    return fig


def _label_axes(ax: Any, hist: LabelHistogram, stats: DatasetStats) -> None:
    where = f"label[{hist.position}]" if len(stats.labels) > 1 else "label"
    if hist.kind == "bins":
        edges = np.asarray(hist.values)
        ax.bar(edges[:-1], hist.counts, width=np.diff(edges), align="edge")
        ax.set_title(f"{where}: {hist.total:,} values in {len(hist.counts)} bins")
    else:
        pairs = list(zip(hist.values, hist.counts))
        shown = pairs if len(pairs) <= _TOP_CLASSES else sorted(
            pairs, key=lambda vc: -vc[1])[:_TOP_CLASSES]
        names = [_class_name(v, stats) for v, _ in shown]
        ax.bar(range(len(shown)), [c for _, c in shown])
        ax.set_xticks(range(len(shown)))
        ax.set_xticklabels(names, rotation=90 if len(shown) > 12 else 0, fontsize=8)
        more = "" if len(pairs) <= _TOP_CLASSES else f" ({_TOP_CLASSES} most common shown)"
        ax.set_title(f"{where}: {len(pairs):,} classes, {hist.total:,} records{more}")
    ax.set_ylabel("records")
    _whole_counts(ax)


def _class_name(value: float, stats: DatasetStats) -> str:
    text = f"{value:g}"
    name = stats.class_names.get(int(value)) if float(value).is_integer() else None
    return f"{text} {name}" if name else text


def _size_axes(fig: Any, rows: int, stats: DatasetStats) -> None:
    dims, weights = stats.size_samples, stats.size_weights
    assert dims is not None  # the caller checks
    width, height = dims[:, 0], dims[:, 1]
    measures = [("width", width), ("height", height),
                ("short side", np.minimum(width, height)), ("aspect (w/h)", width / height)]
    for i, (name, values) in enumerate(measures):
        ax = fig.add_subplot(rows, 4, (rows - 1) * 4 + i + 1)
        low, high = float(values.min()), float(values.max())
        pixels = name != "aspect (w/h)"
        if low == high:  # one value: one bar, labelled with it
            ax.hist(values, bins=[low - 0.5, low + 0.5] if pixels else [low * 0.99, low * 1.01],
                    weights=weights)
            ax.set_xticks([low])
            ax.set_xticklabels([f"{low:g}" if pixels else f"{low:.4g}"])
        elif pixels and high - low < 30:  # a few whole numbers: one bar each
            ax.hist(values, bins=np.arange(low, high + 2) - 0.5, weights=weights)
        else:
            ax.hist(values, bins=30, weights=weights)
        if pixels and low != high:
            ax.xaxis.set_major_locator(_integer_locator())
        _whole_counts(ax)
        ax.set_title(f"{name} ({stats.sizes_sampled:,} sampled)", fontsize=9)


def _integer_locator() -> Any:
    from matplotlib.ticker import MaxNLocator

    return MaxNLocator(integer=True)


def _whole_counts(ax: Any) -> None:
    """Ticks only at whole numbers on the count axis (records are counted, never 2.5)."""
    ax.yaxis.set_major_locator(_integer_locator())
