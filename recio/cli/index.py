"""``recio index``: rebuild a ``.idx`` by scanning the ``.rec`` (MXNet's ``tools/rec2idx.py``)."""
from __future__ import annotations

from typing import Optional

import click

from recio.cli.common import file_progress, handle_errors
from recio.image.id_index import index_by_id
from recio.records.reindex import rebuild_index


@click.command("index")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Index file to write (default: REC with .idx; an existing one is replaced).")
@click.option("--key", "key", type=click.Choice(["position", "id"]), default="position",
              show_default=True,
              help="position: keys 0..n-1, as rec2idx writes them; id: each record's image "
                   "header id, as im2rec writes them (ids must be unique).")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar, no summary line.")
@handle_errors
def index_cmd(rec: str, output: Optional[str], key: str, quiet: bool) -> None:
    """Write an index for REC: one `key<TAB>offset` line per record, atomically.

    The records are found by hopping over their headers; a damaged REC stops with the byte
    offset of the damage and writes nothing.

    \b
    Examples:
      recio index train.rec                 # train.idx, keys 0..n-1 (as rec2idx)
      recio index train.rec --key id -o by_id.idx
    """
    build = index_by_id if key == "id" else rebuild_index
    with file_progress(rec, "index", quiet) as bar:
        written = build(rec, output, progress=bar.update)
    if not quiet:
        click.echo(f"wrote {written.idx_path}: {written.records:,} records (keys: {key})")
