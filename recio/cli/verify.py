"""``recio verify``: a full scan reporting every damaged byte region (exit 0 clean, 1 damaged)."""
from __future__ import annotations

import os
import sys
from typing import Optional

import click

from recio.cli.common import (
    EXIT_DAMAGE,
    EXIT_OK,
    echo_json,
    handle_errors,
    json_option,
    progress,
    quiet_option,
)
from recio.records.stats import check_images, scan_file


@click.command("verify")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("--images", is_flag=True, help="Also decode every image record (slow).")
@click.option("--index", "index_path", type=click.Path(dir_okay=False), default=None,
              help="Index to check (default: the .idx beside the .rec, if any).")
@json_option
@quiet_option
@handle_errors
def verify_cmd(rec: str, images: bool, index_path: Optional[str], as_json: bool,
               quiet: bool) -> None:
    """Check every byte of REC; list each damaged region with its byte offsets.

    Checks the framing of every record (magic, lengths, multi-part sequences, truncation),
    that no payload holds an unescaped aligned magic word, and that the .idx beside the file
    (if any) points at exactly the records. Exit status: 0 clean, 1 damage found, 2 usage
    error or unreadable file.

    \b
    Examples:
      recio verify train.rec
      recio verify train.rec --images --json > report.json
    """
    if index_path is not None and not os.path.exists(index_path):
        raise FileNotFoundError(2, "No such file", index_path)
    size = os.path.getsize(rec)
    with progress(total=size, desc="verify", unit="B", unit_scale=True, quiet=quiet) as bar:
        stats, heads = scan_file(rec, sample=0, index_path=index_path, deep=True,
                                 collect_heads=images, progress=bar.update)
    bad_images = []
    if images and heads is not None:
        with progress(total=len(heads), desc="images", unit="img", quiet=quiet) as bar:
            bad_images = check_images(rec, heads, progress=bar.update)
    index_problems = stats.index.problems() if stats.index is not None else []
    clean = not stats.damage and not bad_images and not index_problems
    if as_json:
        echo_json({"path": rec, "size": stats.size, "records": stats.records, "clean": clean,
                   "damage": [vars(d) for d in stats.damage],
                   "damaged_bytes": stats.damaged_bytes,
                   "bad_images": [vars(d) for d in bad_images],
                   "index": None if stats.index is None else stats.index.path,
                   "index_problems": index_problems})
    else:
        for d in stats.damage:
            click.echo(f"{rec}: damaged bytes [{d.start}, {d.end}) ({d.end - d.start:,} bytes): "
                       f"{d.reason}")
        for d in bad_images:
            click.echo(f"{rec}: bad image at byte {d.start}: {d.reason}")
        for problem in index_problems:
            click.echo(f"{stats.index.path}: {problem}")
        verdict = "OK" if clean else "DAMAGED"
        extra = f", {len(bad_images):,} bad images" if images else ""
        click.echo(f"{verdict}: {rec}: {stats.records:,} records, {stats.size:,} bytes, "
                   f"{len(stats.damage):,} damaged region(s) ({stats.damaged_bytes:,} bytes)"
                   f"{extra}" + (f", index problems: {len(index_problems)}"
                                 if index_problems else ""))
    sys.exit(EXIT_OK if clean else EXIT_DAMAGE)
