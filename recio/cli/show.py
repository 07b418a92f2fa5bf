"""``recio show``: a thumbnail grid of a record file's images, with their labels."""
from __future__ import annotations

from typing import Optional

import click

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
from recio.image.tools.show import draw_grid
from recio.image.undecodable import skipped_text


#: undecodable records named one a line (a file of no images, a sequence .rec, has thousands)
_NAMED = 20


def _keys(text: Optional[str]) -> Optional[list]:
    if text is None:
        return None
    try:
        return [int(k) for k in text.split(",") if k.strip()]
    except ValueError:
        fail(f"--keys {text!r}: give integer keys separated by commas, e.g. --keys 3,7,12")
    return None


@click.command("show")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(dir_okay=False),
              help="Picture to write (.png, or .jpg).")
@click.option("-n", "--count", type=Number(int, 1, what="a whole number of images"), default=16, show_default=True,
              help="Number of images to draw.")
@click.option("--keys", "keys_text", metavar="K1,K2,...", default=None,
              help="Draw exactly these records (their .idx keys).")
@click.option("--label", type=Number(float, what="a label", note="(e.g. 3 or 0.5)",
                                        metavar="LABEL"), default=None,
              help="Only records whose (first) label is this value.")
@click.option("--random", "randomly", is_flag=True,
              help="Pick records at random instead of the first ones.")
@click.option("--seed", type=SEED, default=None, help="Seed of --random (same seed, same grid).")
@click.option("--cols", "columns", type=Number(int, 1, what="a whole number of columns"), default=None,
              help="Tiles per row (default: a square grid).")
@click.option("--size", "tile_size", type=Number(int, 16, 1024, what="a tile size in pixels",
                                                metavar="PIXELS"), default=128,
              show_default=True, help="Tile size in pixels, 16-1024.")
@index_option
@force_option
@json_option
@quiet_option
@handle_errors
def show_cmd(rec: str, output: str, count: int, keys_text: Optional[str], label: Optional[float],
             randomly: bool, seed: Optional[int], columns: Optional[int], tile_size: int,
             index_path: Optional[str], force: bool, as_json: bool, quiet: bool) -> None:
    """Draw a grid of REC's images, each captioned `key: label(s)` and its class name.

    Class names come from the classes file `im2rec --list --recursive` writes
    (PREFIX.classes.tsv) when it is beside REC. Records without an image (the header and
    identity records of a face-recognition set) and images that do not decode are skipped and
    counted; each undecodable one is named on stderr (its byte offset, key and why; past 20,
    counted there and listed by --json).

    \b
    Examples:
      recio show train.rec -o grid.png                    # the first 16 images
      recio show train.rec -o grid.png --random --seed 1 -n 36
      recio show train.rec -o cats.png --label 3          # only class 3
      recio show train.rec -o some.png --keys 10,20,30
    """
    keys = _keys(keys_text)
    if keys is not None and (label is not None or randomly):
        fail("--keys draws exactly those records; leave out --label and --random")
    if seed is not None and not randomly:
        fail("--seed only applies with --random")
    with progress(desc="show", unit="rec", quiet=quiet or as_json) as bar:
        result = draw_grid(rec, output, count=count, keys=keys, label=label, randomly=randomly,
                           seed=seed, columns=columns, tile_size=tile_size, idx_path=index_path,
                           force=force, progress=bar.update)
    if as_json:
        echo_json(result.to_dict())
        return
    for bad in result.undecodable[:_NAMED]:
        click.echo(f"warning: {skipped_text(str(bad.error))}", err=True)
    if len(result.undecodable) > _NAMED:
        click.echo(f"warning: {len(result.undecodable) - _NAMED:,} more undecodable records "
                   "skipped (--json lists every one)", err=True)
    skipped = result.skipped_not_image + result.skipped_undecodable
    click.echo(f"drew {len(result.tiles)} images from {result.looked_at} records -> "
               f"{result.path}" + (f"; skipped {result.skipped_not_image} without an image, "
                                   f"{result.skipped_undecodable} undecodable" if skipped else ""))
    if len(result.tiles) < count and keys is None:
        click.echo(f"warning: only {len(result.tiles)} of the {count} images asked for were "
                   "found", err=True)
