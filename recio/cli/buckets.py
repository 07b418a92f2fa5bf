"""``recio buckets``: optimal length buckets for a sequence .rec, and how much padding they save."""
from __future__ import annotations

import math
from typing import Dict, List

import click
import numpy as np

from recio.cli.common import echo_json, handle_errors, json_option, progress
from recio.sequence import bucketing, sample_counts

HIST_BINS = 12
BAR_WIDTH = 40


def _histogram(lengths: np.ndarray) -> List[Dict]:
    """A dozen bins over the lengths: log-spaced when the tail is long, else equal width."""
    lo, hi = int(lengths.min()), int(lengths.max())
    if hi - lo + 1 <= HIST_BINS:
        edges = np.arange(lo, hi + 2)
    elif lo >= 1 and hi / lo > 20:
        edges = np.unique(np.round(np.geomspace(lo, hi + 1, HIST_BINS + 1)).astype(np.int64))
    else:
        edges = np.unique(np.round(np.linspace(lo, hi + 1, HIST_BINS + 1)).astype(np.int64))
    counts = np.histogram(lengths, bins=edges)[0]
    return [{"low": int(a), "high": int(b) - 1, "count": int(c)}
            for a, b, c in zip(edges[:-1], edges[1:], counts)]


def _edges(edges: List[int]) -> str:
    return ", ".join(str(e) for e in edges)


@click.command("buckets")
@click.argument("file", type=click.Path(exists=True, dir_okay=False))
@click.option("-q", "--num-buckets", "num_buckets", type=click.IntRange(min=1), default=3,
              show_default=True, help="Number of buckets Q to choose boundaries for.")
@click.option("-b", "--batch-size", type=click.IntRange(min=1), default=32, show_default=True,
              help="Sequences per minibatch (the cost model's k).")
@click.option("--max-buckets", type=click.IntRange(min=1), default=8, show_default=True,
              help="Compare Q = 1..this.")
@click.option("--stream", default=None,
              help="Count the samples of this stream (default: the largest stream of a record).")
@click.option("--quiet", is_flag=True, help="No progress bar.")
@json_option
@handle_errors
def buckets_cmd(file: str, num_buckets: int, batch_size: int, max_buckets: int,
                stream: str, quiet: bool, as_json: bool) -> None:
    """Choose length buckets for the sequences of FILE.rec that minimise padding.

    Lengths are the sample counts kept beside the index (PREFIX.len), so no record is decoded.
    A minibatch of k sequences costs about k x its longest sequence; the padding waste is
    padded samples / real samples when batches are drawn at random within each bucket.
    Boundaries are upper edges, inclusive: "63, 201, 1039" means lengths 1-63, 64-201, 202-1039.

    \b
    Examples:
      recio buckets train.rec -q 3            # optimal 3 buckets, table for Q = 1..8
      recio buckets train.rec -b 64 --json    # batch size 64, machine-readable
    """
    lengths = np.asarray(sample_counts(file, stream=stream), dtype=np.int64)
    top = max(max_buckets, num_buckets)
    rows = []
    if lengths.size:
        with progress(total=top, desc="buckets", unit="Q", quiet=quiet) as bar:
            rows = bucketing.bucketing_report(lengths, batch_size, top, progress=bar.update)
    chosen = rows[num_buckets - 1] if rows else None
    summary = {
        "file": file,
        "sequences": int(lengths.size),
        "samples": int(lengths.sum()),
        "min_length": int(lengths.min()) if lengths.size else None,
        "max_length": int(lengths.max()) if lengths.size else None,
        "median_length": float(np.median(lengths)) if lengths.size else None,
        "mean_length": float(lengths.mean()) if lengths.size else None,
        "batch_size": batch_size,
        "num_buckets": num_buckets,
        "boundaries": chosen["optimal"]["boundaries"] if chosen else [],
        "padding_waste": chosen["optimal"]["waste"] if chosen else None,
        "random_waste": chosen["random_waste"] if chosen else None,
        "predicted_speedup": chosen["predicted_speedup"] if chosen else None,
        "histogram": _histogram(lengths) if lengths.size else [],
        "table": rows[:max_buckets],
    }
    if as_json:
        echo_json(summary)
        return
    if not lengths.size:
        click.echo(f"{file}: no sequences")
        return
    click.echo(f"{file}: {lengths.size:,} sequences, {int(lengths.sum()):,} samples; lengths "
               f"{summary['min_length']}..{summary['max_length']} (median "
               f"{summary['median_length']:g}, mean {summary['mean_length']:.1f}); batch size "
               f"{batch_size}")
    click.echo("")
    biggest = max(b["count"] for b in summary["histogram"]) or 1
    width = len(str(summary["max_length"]))
    for b in summary["histogram"]:
        bar_len = math.ceil(BAR_WIDTH * b["count"] / biggest) if b["count"] else 0
        span = str(b["low"]) if b["low"] == b["high"] else f"{b['low']}-{b['high']}"
        click.echo(f"  {span:>{2 * width + 1}} | {'#' * bar_len:<{BAR_WIDTH}} {b['count']:,}")
    click.echo("")
    click.echo(f"Optimal boundaries for Q={num_buckets} (upper edges, inclusive): "
               f"{_edges(summary['boundaries'])}")
    click.echo(f"  padding waste {summary['padding_waste']:.2f}x (random batching "
               f"{summary['random_waste']:.2f}x); predicted epoch cost ratio "
               f"{summary['predicted_speedup']:.2f}x")
    click.echo("")
    click.echo("Padding waste (padded / real samples) and predicted speed-up of optimal buckets:")
    click.echo(f"  {'Q':>2}  {'random':>7}  {'equal-width':>11}  {'quantile':>8}  {'optimal':>7}"
               f"  {'speed-up':>8}  optimal boundaries")
    for row in summary["table"]:
        click.echo(f"  {row['buckets']:>2}  {row['random_waste']:>6.2f}x  "
                   f"{row['equal_width']['waste']:>10.2f}x  {row['quantile']['waste']:>7.2f}x  "
                   f"{row['optimal']['waste']:>6.2f}x  {row['predicted_speedup']:>7.2f}x  "
                   f"{_edges(row['optimal']['boundaries'])}")
