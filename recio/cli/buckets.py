"""``recio buckets``: optimal length buckets for a sequence .rec, and how much padding they save."""
from __future__ import annotations

import math
from typing import Any, Dict, List

import click

from recio.cli.common import (
    PathOrURL,
    echo_json,
    handle_errors,
    json_option,
    progress,
    quiet_option,
)
from recio.cli.numbers import Number
from recio.sequence.bucket_summary import bucket_summary

_BAR_WIDTH = 40


@click.command("buckets")
@click.argument("file", type=PathOrURL(exists=True, dir_okay=False))
@click.option("-n", "--num-buckets", "num_buckets", type=Number(int, 1, what="a whole number of buckets"), default=3,
              show_default=True, help="Number of buckets Q to choose boundaries for.")
@click.option("-b", "--batch-size", type=Number(int, 1, what="a whole number of sequences"), default=32, show_default=True,
              help="Sequences per minibatch (the cost model's k).")
@click.option("--max-buckets", type=Number(int, 1, what="a whole number of buckets"), default=8, show_default=True,
              help="Compare Q = 1..this.")
@click.option("--stream", default=None,
              help="Count the samples of this stream (default: the largest stream of a record).")
@quiet_option
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
      recio buckets train.rec -n 3            # optimal 3 buckets, table for Q = 1..8
      recio buckets train.rec -b 64 --json    # batch size 64, machine-readable
    """
    with progress(total=max(max_buckets, num_buckets), desc="buckets", unit="Q",
                  quiet=quiet) as bar:
        summary = bucket_summary(file, num_buckets, batch_size, max_buckets, stream,
                                 progress=bar.update)
    if as_json:
        echo_json(summary)
    elif not summary["sequences"]:
        click.echo(f"{file}: no sequences")
    else:
        _print_summary(summary)


def _edges(edges: List[int]) -> str:
    return ", ".join(str(e) for e in edges)


def _print_summary(s: Dict[str, Any]) -> None:
    click.echo(f"{s['file']}: {s['sequences']:,} sequences, {s['samples']:,} samples; lengths "
               f"{s['min_length']}..{s['max_length']} (median {s['median_length']:g}, mean "
               f"{s['mean_length']:.1f}); batch size {s['batch_size']}")
    click.echo("")
    biggest = max(b["count"] for b in s["histogram"]) or 1
    width = len(str(s["max_length"]))
    for b in s["histogram"]:
        bar_len = math.ceil(_BAR_WIDTH * b["count"] / biggest) if b["count"] else 0
        span = str(b["low"]) if b["low"] == b["high"] else f"{b['low']}-{b['high']}"
        click.echo(f"  {span:>{2 * width + 1}} | {'#' * bar_len:<{_BAR_WIDTH}} {b['count']:,}")
    click.echo("")
    click.echo(f"Optimal boundaries for Q={s['num_buckets']} (upper edges, inclusive): "
               f"{_edges(s['boundaries'])}")
    click.echo(f"  padding waste {s['padding_waste']:.2f}x (random batching "
               f"{s['random_waste']:.2f}x); predicted epoch cost ratio "
               f"{s['predicted_speedup']:.2f}x")
    click.echo("")
    click.echo("Padding waste (padded / real samples) and predicted speed-up of optimal buckets:")
    click.echo(f"  {'Q':>2}  {'random':>7}  {'equal-width':>11}  {'quantile':>8}  {'optimal':>7}"
               f"  {'speed-up':>8}  optimal boundaries")
    for row in s["table"]:
        click.echo(f"  {row['buckets']:>2}  {row['random_waste']:>6.2f}x  "
                   f"{row['equal_width']['waste']:>10.2f}x  {row['quantile']['waste']:>7.2f}x  "
                   f"{row['optimal']['waste']:>6.2f}x  {row['predicted_speedup']:>7.2f}x  "
                   f"{_edges(row['optimal']['boundaries'])}")
