"""``recio inspect``: what is in a record file, in one bounded-memory pass."""
from __future__ import annotations

import os
from typing import List, Optional, Tuple

import click
import numpy as np

from recio import storage
from recio.cli.common import (
    echo_json,
    fail,
    force_option,
    handle_errors,
    index_option,
    json_option,
    progress,
    quiet_option,
)
from recio.cli.numbers import SEED, Number
from recio.errors import plural
from recio.image.tools.dataset_stats import (
    DEFAULT_SAMPLE,
    PERCENTILES,
    DatasetStats,
    LabelHistogram,
    dataset_stats,
)
from recio.image.packing.output import resume_command
from recio.image.tools.plot import plot_stats
from recio.image.tools.stats import FileStats, ImageStats
from recio.records.atomic import check_outputs
from recio.records.index_format import sibling_index_path
from recio.records.lock import pack_journal_path
from recio.records.source import resolve_source


@click.command("inspect")
@click.argument("files", nargs=-1, required=True)
@click.option("--show", type=Number(int, 0, what="a whole number of records"), default=0, metavar="N",
              help="Print the headers of the first N records of each file.")
@click.option("--sample", type=Number(int, 0, what="a whole number of records"), default=DEFAULT_SAMPLE,
              show_default=True,
              help="Image records per file whose width x height is read (0: all).")
@click.option("--seed", type=SEED, default=0, show_default=True,
              help="Seed of the size sample.")
@click.option("--plot", "plot_path", type=click.Path(dir_okay=False), default=None,
              metavar="PICTURE",
              help="Also draw the label histogram and the size distributions (needs "
                   "pip install 'recio[plot]').")
@force_option
@index_option
@json_option
@quiet_option
@handle_errors
def inspect_cmd(files: Tuple[str, ...], show: int, sample: int, seed: int,
                plot_path: Optional[str], force: bool, index_path: Optional[str],
                as_json: bool, quiet: bool) -> None:
    """Summarise record files: records, sizes, labels, image sizes, duplicates, layout.

    FILES are .rec files, glob patterns ('shards/*.rec') or both; several files get a
    combined summary after their own. Labels are counted per position of the label vector
    (exactly per class for integer labels); image sizes are read from the image headers of a
    random sample (no decoding). Class names come from PREFIX.classes.tsv (written by
    `im2rec --list --recursive`) when it is found. Damage is listed briefly; `recio verify`
    checks every byte.

    \b
    Examples:
      recio inspect train.rec
      recio inspect 'shards/*.rec' --plot stats.png
      recio inspect train.rec --show 5          # headers of the first 5 records
      recio inspect train.rec --json | jq .dataset.num_classes
    """
    sources = resolve_source(files)
    if plot_path is not None:
        check_outputs([plot_path], [f.path for f in sources], force=force)
    total = sum(f.size if f.size is not None else storage.size(f.path) for f in sources)
    with progress(total=total or None, desc="inspect", unit="B", unit_scale=True,
                  quiet=quiet or as_json) as bar:
        stats = dataset_stats(sources, sample=sample, seed=seed, idx_path=index_path,
                              progress=bar.update, show=show)
    if plot_path is not None:
        try:
            plot_stats(stats, plot_path)
        except ImportError as exc:
            fail(str(exc))
    if as_json:
        dataset = stats.to_dict()
        if len(stats.files) == 1:
            echo_json({**stats.files[0].to_dict(), "dataset": dataset})
        else:
            echo_json({"files": [f.to_dict() for f in stats.files], "dataset": dataset})
        return
    for st in stats.files:
        for line in describe(st):
            click.echo(line)
    for line in _describe_dataset(stats):
        click.echo(line)
    if plot_path is not None:
        click.echo(f"plot: {plot_path}")


def _describe_dataset(stats: DatasetStats) -> List[str]:
    """The dataset part of the report: label histograms, sizes, duplicates, suggestions."""
    title = "dataset" if len(stats.files) == 1 else (
        f"dataset ({len(stats.files)} files, {stats.records:,} records, {stats.bytes:,} bytes)")
    lines = [f"{title}: {stats.image_records:,} image records, {stats.header_records:,} "
             f"header-only, {stats.other_records:,} other"]
    for hist in stats.labels:
        lines += _histogram_lines(hist, stats)
    if stats.classes_path:
        lines.append(f"  class names: {stats.classes_path} ({len(stats.class_names):,})")
    if stats.sizes:
        chosen = stats.sizes_sampled + stats.sizes_unsized
        lines.append(f"  image size percentiles "
                     f"({_sample_words(chosen, stats.image_records, stats.sizes_unsized)}):")
        rows = [[f"{name}:", *(_cell(v) for v in values.values())]
                for name, values in stats.sizes.items()]
        lines += ["    " + row for row in _columns([["", *(f"p{q:g}" for q in PERCENTILES)],
                                                    *rows])]
    if stats.duplicate_ids:
        shown = ", ".join(f"{i} x{c}" for i, c in stats.duplicate_examples[:5])
        lines.append(f"  duplicate ids: {stats.duplicate_ids:,} records repeat an id "
                     f"(e.g. {shown})")
    else:
        lines.append("  duplicate ids: none")
    lines += [f"  suggestion: {text}" for text in stats.suggestions]
    return lines


def _cell(value: float) -> str:
    """A percentile as the table shows it: pixels as integers, ratios to 4 significant
    digits."""
    return f"{int(value):,}" if float(value).is_integer() else f"{value:.4g}"


def _columns(rows: List[List[str]]) -> List[str]:
    """Rows of cells as right-aligned columns, each as wide as its widest cell and at least
    two spaces apart, so no two values ever run together."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return ["  ".join(cell.rjust(width) for cell, width in zip(row, widths)).rstrip()
            for row in rows]


def _histogram_lines(hist: LabelHistogram, stats: DatasetStats) -> List[str]:
    where = f"label[{hist.position}]" if len(stats.labels) > 1 else "label"
    bad = f", {hist.nonfinite:,} NaN/inf" if hist.nonfinite else ""
    if hist.kind == "bins":
        edges = hist.values
        return [f"  {where}: {hist.total:,} values in {edges[0]:g} .. {edges[-1]:g} "
                f"({len(hist.counts)} bins; --json has them){bad}"]
    counts = hist.counts
    if not counts:
        return [f"  {where}: no finite labels{bad}"]
    common = sorted(zip(hist.values, counts), key=lambda vc: -vc[1])[:8]
    names = ", ".join(f"{_num(v)}{_name(v, stats)}: {c:,}" for v, c in common)
    return [f"  {where}: {len(counts):,} classes, {min(counts):,} .. {max(counts):,} records "
            f"per class (median {_num(float(np.median(counts)))}){bad}",
            f"    most common: {names}"]


def _name(value: float, stats: DatasetStats) -> str:
    name = stats.class_names.get(int(value)) if float(value).is_integer() else None
    return f" ({name})" if name else ""


def _num(x: Optional[float]) -> str:
    if x is None:
        return "-"
    return f"{int(x):,}" if float(x).is_integer() else f"{x:,.6g}"


def describe(st: FileStats) -> List[str]:
    """The human-readable report of ``recio inspect`` as lines."""
    lines = [f"{st.path}: {st.size:,} bytes, {st.records:,} records "
             f"({st.multipart_records:,} multi-part, {st.parts:,} parts)"]
    if st.records:
        median = _num(st.size_median) + ("" if st.size_median_exact else " (sampled)")
        lines.append(f"  record size: min {_num(st.size_min)}, median {median}, "
                     f"max {_num(st.size_max)} bytes; payload total {st.payload_bytes:,}")
    lines += _image_lines(st)
    if st.layout is not None:
        lay = st.layout
        state = "consistent" if lay["consistent"] else "INCONSISTENT"
        lines.append(f"  layout: face-recognition (InsightFace): record 0 is the dataset header, "
                     f"{lay['images']:,} images (keys 1..{lay['images']}), "
                     f"{lay['identities']:,} identity records (keys "
                     f"{lay['first_identity_key']}..{lay['records_expected'] - 1}); {state}")
    lines.append(_index_line(st))
    if st.damage:
        first = st.damage[0]
        lines.append(f"  damage: {len(st.damage):,} region(s), {st.damaged_bytes:,} bytes; "
                     f"first at "
                     f"[{first.start}, {first.end}): {first.reason} (run `recio verify`)")
    else:
        lines.append("  damage: none found in the record framing")
    return lines + [_shown_line(number, e) for number, e in enumerate(st.shown)]


def _image_lines(st: FileStats) -> List[str]:
    """Formats, label widths, labels, ids and sampled sizes of the image records."""
    img = st.images
    lines = []
    if img.records:
        formats = ", ".join(f"{k} {v:,}" for k, v in img.formats.items())
        lines.append(f"  image records: {img.records:,} ({formats})")
        widths = ", ".join(f"{'scalar' if w == 0 else f'vector of {w}'}: {n:,}"
                           for w, n in img.label_widths.items())
        lines.append(f"  header flags: {widths}")
        which = "label" if not img.vector_labels else "label (first of each vector)"
        distinct = f"{img.distinct_labels:,}" + ("" if img.distinct_labels_exact else "+")
        lines.append(f"  {which}: {_num(img.label_min)} .. {_num(img.label_max)}, "
                     f"{distinct} distinct")
        id2 = f", id2 nonzero in {img.id2_nonzero:,}" if img.id2_nonzero else ""
        lines.append(f"  id: {img.id_min:,} .. {img.id_max:,}{id2}")
        if img.sampled:
            lines.append(f"  image size ({_sample_words(img.sampled, img.records, img.unsized)})"
                         + (": " + _size_summary(img) if img.sizes else ""))
    if st.header_only_records:
        lines.append(f"  header-only records (no image): {st.header_only_records:,}")
    if st.non_image_records and img.records:
        lines.append(f"  records without a recognised image: {st.non_image_records:,}")
    return lines


def _sample_words(sampled: int, records: int, unsized: int) -> str:
    """``"all 300 images"`` or ``"a sample of 1,000 of 5,000 images"``, and how many of those
    had no size in their header."""
    which = (f"all {plural(records, 'image')}" if sampled >= records
             else f"a sample of {sampled:,} of {records:,} images")
    if unsized:
        which += f"; {unsized:,} of them without a size in their header"
    return which


def _size_summary(img: ImageStats) -> str:
    common = ", ".join(f"{k} ({v})" for k, v in list(img.sizes.items())[:5])
    assert img.width_range is not None and img.height_range is not None  # set with sizes
    return (f"width {img.width_range[0]}..{img.width_range[1]}, height "
            f"{img.height_range[0]}..{img.height_range[1]}; most common {common}")


def _index_line(st: FileStats) -> str:
    if st.index is None:
        idx = sibling_index_path(st.path)
        journal = pack_journal_path(os.path.splitext(st.path)[0])
        resume = resume_command(journal) if not storage.is_url(st.path) and \
            os.path.exists(journal) else None
        if resume is not None:
            return (f"  index: none ({idx} not found): an interrupted im2rec pack left it "
                    f"({journal} is beside it); readers by key refuse it; finish the pack: "
                    f"`{resume}`")
        return (f"  index: none ({idx} not found): readers by key refuse it; write one with "
                f"`recio index {st.path}` (--key id for im2rec's keys)")
    chk = st.index
    if not chk.ok:
        return f"  index {chk.path}: PROBLEMS: " + "; ".join(chk.problems())
    how = ("keys 0..n-1 in file order" if chk.keys_are_positions else
           "keys " + ("in file order" if chk.in_file_order else "not in file order"))
    return f"  index {chk.path}: {chk.entries:,} entries, consistent ({how})"


def _shown_line(number: int, e: dict) -> str:
    text = f"  #{number} at byte {e['offset']}: {e['length']:,} bytes"
    text += f" in {e['parts']} parts" if e["parts"] > 1 else ""
    if "flag" in e:
        text += f", flag {e['flag']}, label {e['label']}, id {e['id']}, id2 {e['id2']}"
    if e.get("format"):
        size = f" {e['width']}x{e['height']}" if e.get("width") is not None else ""
        text += f", {e['format']}{size}"
    return text
