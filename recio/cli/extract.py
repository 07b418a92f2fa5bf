"""``recio extract``: the inverse of im2rec — images named by id, a ``.lst`` to re-pack them."""
from __future__ import annotations

import os
from typing import Optional

import click

from recio.cli.common import (
    echo_json,
    file_progress,
    handle_errors,
    json_option,
    quiet_option,
)
from recio.image.tools.extract import extract_images


@click.command("extract")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.argument("out_dir", type=click.Path(file_okay=False))
@click.option("--lst", "lst_name", default=None, metavar="NAME",
              help="Name of the list written in OUT_DIR (default: REC's name with .lst).")
@click.option("--force", is_flag=True,
              help="Extract into a folder that is not empty; files there under the names "
                   "written are replaced and counted in a warning.")
@json_option
@quiet_option
@handle_errors
def extract_cmd(rec: str, out_dir: str, lst_name: Optional[str], force: bool, as_json: bool,
                quiet: bool) -> None:
    """Write every image of REC to OUT_DIR as <id>.<ext>, plus a .lst that re-packs them.

    When a classes file (PREFIX.classes.tsv from `im2rec --list --recursive`) is beside REC,
    each image goes into the folder of its class, OUT_DIR/<class>/<id>.<ext>, and the classes
    file is copied beside the .lst.

    The .lst holds `id, label(s), file name` per image in record order, so
    `im2rec OUT_DIR/NAME OUT_DIR --pass-through` (add `--pack-label` for label vectors)
    writes the same records again. Records without an image (e.g. the header and identity
    records of a face-recognition set) are skipped and counted. Images are written as stored
    (never re-encoded).

    OUT_DIR must be new or empty, so the images never mix with what is already there: a
    folder that holds anything stops the command before it writes anything, unless --force.
    With --force the images are added to it, and a file already there under a name it writes
    is replaced, never silently: a warning counts them and names the first (--json lists them
    all).

    Exit status: 0 written; 1 REC holds no image (nothing is written); 2 usage error, an
    unreadable or damaged REC, or a refused OUT_DIR.

    \b
    Examples:
      recio extract train.rec images/
      im2rec images/train images/ --pass-through     # re-pack (writes images/train.rec)
    """
    with file_progress(rec, "extract", quiet) as bar:
        result = extract_images(rec, out_dir, lst_name=lst_name, force=force,
                                progress=bar.update)
    prefix = os.path.splitext(result.lst_path)[0]
    repack = (f"im2rec {prefix} {out_dir} --pass-through"
              + (" --pack-label" if result.vector_labels else ""))
    if as_json:
        echo_json({**result.to_dict(), "repack": repack})
        return
    click.echo(f"wrote {result.images:,} images and {result.lst_path} to {out_dir}"
               + (f"; skipped {result.skipped:,} records without an image"
                  if result.skipped else ""))
    for warning in result.warnings():
        click.echo(f"warning: {warning}", err=True)
    click.echo(f"re-pack with: {repack}")
