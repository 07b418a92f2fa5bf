"""``recio inspect``: what is in a record file, in one bounded-memory pass."""
from __future__ import annotations

from typing import List, Optional

import click

from recio.cli.common import (echo_json, file_progress, handle_errors, index_option, json_option,
                              quiet_option)
from recio.image.stats import FileStats, scan_file


@click.command("inspect")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("--show", type=click.IntRange(min=0), default=0, metavar="N",
              help="Print the headers of the first N records.")
@click.option("--sample", type=click.IntRange(min=0), default=1000, show_default=True,
              help="Image records (spread over the file) whose width x height is read.")
@index_option
@json_option
@quiet_option
@handle_errors
def inspect_cmd(rec: str, show: int, sample: int, index_path: Optional[str], as_json: bool,
                quiet: bool) -> None:
    """Summarise REC: records, sizes, image headers, labels, formats, index consistency.

    Reads only record headers (and a sample of image headers), so it runs at disk speed on
    files of many GB. Damage is listed briefly; `recio verify` checks every byte.

    \b
    Examples:
      recio inspect train.rec
      recio inspect train.rec --show 5          # headers of the first 5 records
      recio inspect train.rec --json | jq .images.label_max
    """
    with file_progress(rec, "inspect", quiet) as bar:
        stats, _ = scan_file(rec, sample=sample, show=show, idx_path=index_path,
                             progress=bar.update)
    if as_json:
        echo_json(stats.to_dict())
        return
    for line in describe(stats):
        click.echo(line)


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
            common = ", ".join(f"{k} ({v})" for k, v in list(img.sizes.items())[:5])
            lines.append(f"  image size (sample of {img.sampled:,}): width "
                         f"{img.width_range[0]}..{img.width_range[1]}, height "
                         f"{img.height_range[0]}..{img.height_range[1]}; most common {common}")
    if st.header_only_records:
        lines.append(f"  header-only records (no image): {st.header_only_records:,}")
    if st.non_image_records and img.records:
        lines.append(f"  records without a recognised image: {st.non_image_records:,}")
    return lines


def _index_line(st: FileStats) -> str:
    if st.index is None:
        return "  index: none (write one with `recio index`)"
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
