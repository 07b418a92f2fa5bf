"""``recio repack``: a copy of an image ``.rec`` with only its image records (DALI-ready)."""
from __future__ import annotations

from typing import Optional

import click

from recio.cli.common import (
    PathOrURL,
    echo_json,
    fail,
    force_option,
    handle_errors,
    json_option,
    progress,
    quiet_option,
)
from recio.cli.numbers import SEED
from recio.image.tools.repack import repack


@click.command("repack")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.argument("out", type=click.Path(dir_okay=False))
@click.option("--images-only", is_flag=True,
              help="Leave out every record without an image: the header record and identity "
                   "records of a face-recognition set, and anything else that is no image.")
@click.option("--shuffle", is_flag=True,
              help="Write the records in one global random order (DALI shuffles only inside "
                   "a small buffer).")
@click.option("--seed", type=SEED, default=None,
              help="Seed of the --shuffle order (the same seed gives the same file).")
@click.option("--index", "idx_path", type=PathOrURL(exists=True, dir_okay=False), default=None,
              help="Index of REC (default: the .idx beside it; without one REC is scanned).")
@force_option
@json_option
@quiet_option
@handle_errors
def repack_cmd(rec: str, out: str, images_only: bool, shuffle: bool, seed: Optional[int],
               idx_path: Optional[str], force: bool, as_json: bool, quiet: bool) -> None:
    """Write OUT.rec + OUT.idx from REC's records, keeping their bytes.

    Records keep their image headers (ids, labels); the new .idx numbers them 0..n-1 in the
    order written, one entry per image, which is what DALI's readers.mxnet expects. REC is
    read in its .idx order; memory stays at about 9 bytes a record.

    \b
    Examples:
      recio repack faces.rec faces_dali --images-only               # drop header/identity records
      recio repack faces.rec shuffled --images-only --shuffle --seed 1
    """
    if seed is not None and not shuffle:
        fail("--seed only applies with --shuffle")
    if not images_only and not shuffle:
        fail("nothing to do: give --images-only and/or --shuffle")
    with progress(desc="repack", unit="rec", quiet=quiet or as_json) as bar:
        result = repack(rec, out, images_only=images_only, shuffle=shuffle, seed=seed,
                        idx_path=idx_path, force=force, progress=bar.update)
    if as_json:
        echo_json(result.to_dict())
        return
    dropped = ", ".join(f"{n:,} {kind.replace('_', ' ')}" for kind, n in result.dropped.items()
                        if n)
    rate = result.records_out / result.seconds if result.seconds > 0 else 0.0
    click.echo(f"wrote {result.records_out:,} of {result.records_in:,} records "
               f"({result.bytes_out:,} bytes, {rate:,.0f} records/s"
               + (", shuffled" if shuffle else "") + f") -> {result.rec_path}, "
               f"{result.idx_path}" + (f"; left out {dropped}" if dropped else ""))
