"""``recio extract``: the inverse of im2rec — images named by id, a ``.lst`` to re-pack them."""
from __future__ import annotations

import os
from typing import Optional

import click

from recio.cli.common import echo_json, handle_errors, json_option, progress, quiet_option
from recio.image.header import IR_SIZE, IR_STRUCT
from recio.image.lists import format_list_line
from recio.records.atomic import atomic_open
from recio.records.reader import RecordReader
from recio.records.stats import image_format

_EXTENSIONS = {"jpeg": ".jpg", "png": ".png", "gif": ".gif", "bmp": ".bmp", "webp": ".webp",
               "tiff": ".tiff"}


@click.command("extract")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--lst", "lst_name", default=None, metavar="NAME",
              help="Name of the list written in OUT_DIR (default: REC's name with .lst).")
@json_option
@quiet_option
@handle_errors
def extract_cmd(rec: str, out_dir: str, lst_name: Optional[str], as_json: bool,
                quiet: bool) -> None:
    """Write every image of REC to OUT_DIR as <id>.<ext>, plus a .lst that re-packs them.

    The .lst holds `id, label(s), file name` per image in record order, so
    `im2rec OUT_DIR/NAME OUT_DIR --pass-through` (add `--pack-label` for label vectors)
    writes the same records again. Records without an image (e.g. the header and identity
    records of a face-recognition set) are skipped and counted.

    \b
    Examples:
      recio extract train.rec images/
      im2rec images/train images/ --pass-through     # re-pack (writes images/train.rec)
    """
    import numpy as np

    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(rec))[0]
    lst_path = os.path.join(out_dir, lst_name or stem + ".lst")
    size = os.path.getsize(rec)
    written = skipped = inexact_labels = id2_lost = single_vectors = 0
    vectors = False
    used = set()
    lines = []
    with RecordReader(rec) as reader, \
            progress(total=size, desc="extract", unit="B", unit_scale=True, quiet=quiet) as bar:
        last = 0
        for offset, record in reader.records_with_offsets():
            if offset - last >= 1 << 24:
                bar.update(offset - last)
                last = offset
            if len(record) < IR_SIZE:
                skipped += 1
                continue
            flag, label, rid, rid2 = IR_STRUCT.unpack_from(record, 0)
            body = IR_SIZE + 4 * flag
            fmt = image_format(record, body) if body < len(record) else None
            if fmt is None:
                skipped += 1
                continue
            labels = (np.frombuffer(record, dtype="<f4", count=flag, offset=IR_SIZE) if flag
                      else np.array([label], dtype=np.float32))
            vectors = vectors or flag > 1
            single_vectors += flag == 1
            id2_lost += rid2 != 0
            name = f"{rid}{_EXTENSIONS[fmt]}"
            n = 1
            while name in used:  # repeated ids: keep every image
                name = f"{rid}_{n}{_EXTENSIONS[fmt]}"
                n += 1
            used.add(name)
            with atomic_open(os.path.join(out_dir, name), "wb") as f:
                f.write(memoryview(record)[body:])
            line = format_list_line(rid, [float(x) for x in labels], name)
            printed = np.array([float(v) for v in line.split("\t")[1:-1]], dtype=np.float32)
            inexact_labels += not np.array_equal(printed, labels)
            lines.append(line)
            written += 1
        bar.update(size - last)
    with atomic_open(lst_path, "w") as f:
        f.write("".join(lines))
    prefix = os.path.splitext(lst_path)[0]
    repack = f"im2rec {prefix} {out_dir} --pass-through" + (" --pack-label" if vectors else "")
    warnings = []
    if inexact_labels:
        warnings.append(f"{inexact_labels} labels do not survive the .lst's %f format exactly")
    if id2_lost:
        warnings.append(f"{id2_lost} records have a nonzero id2, which a .lst cannot carry")
    if single_vectors:
        warnings.append(f"{single_vectors} records have a 1-element label vector; im2rec packs "
                        f"a single label as a scalar")
    if as_json:
        echo_json({"rec": rec, "out_dir": out_dir, "lst": lst_path, "images": written,
                   "skipped": skipped, "repack": repack, "warnings": warnings})
        return
    click.echo(f"wrote {written:,} images and {lst_path} to {out_dir}"
               + (f"; skipped {skipped:,} records without an image" if skipped else ""))
    for w in warnings:
        click.echo(f"warning: {w}", err=True)
    click.echo(f"re-pack with: {repack}")
