"""``recio index``: rebuild a ``.idx`` by scanning the ``.rec`` (MXNet's ``tools/rec2idx.py``)."""
from __future__ import annotations

import time
from typing import Callable, Dict, Optional

import click

from recio.cli.common import (
    echo_json,
    fail,
    file_progress,
    force_option,
    handle_errors,
    json_option,
)
from recio.image.tools.id_index import index_by_id, index_keeping_keys
from recio.records.reindex import RebuiltIndex, rebuild_index
from recio.records.manifest import is_manifest
from recio.records.shards.commit import combined_index


@click.command("index")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Index file to write (default: REC with .idx). An existing file is kept "
                   "unless --force; REC itself never.")
@click.option("--key", "key", type=click.Choice(["auto", "position", "id"]), default="auto",
              show_default=True,
              help="auto: the kind of keys the index being replaced had (positions or image "
                   "ids; it asks when it cannot tell), positions when there is none (it "
                   "asks when the records carry image ids that are not their positions, as "
                   "im2rec writes them); "
                   "position: keys 0..n-1, as rec2idx writes them; id: each record's image "
                   "header id, as im2rec writes them (ids must be unique).")
@click.option("--combined", is_flag=True,
              help="REC is a shard set's manifest: write one index whose offsets run across "
                   "the shards in manifest order (DALI's readers.mxnet with several .rec "
                   "paths); needs -o.")
@force_option
@json_option
@click.option("--quiet", "-q", is_flag=True, help="No progress bar, no summary line.")
@handle_errors
def index_cmd(rec: str, output: Optional[str], key: str, combined: bool, force: bool,
              as_json: bool, quiet: bool) -> None:
    """Write an index for REC: one `key<TAB>offset` line per record, atomically.

    The records are found by hopping over their headers; a damaged REC stops with the byte
    offset of the damage and writes nothing (`recio repair` rescues its intact records). An
    index being replaced keeps its kind of keys: im2rec's (image ids) stay image ids, never
    renumbered. With --combined, REC is a manifest and the shards' own .idx files are joined,
    each shard's offsets shifted by the sizes of the shards before it.

    \b
    Examples:
      recio index train.rec                 # train.idx, keys 0..n-1 (as rec2idx)
      recio index train.rec --force         # replace a damaged train.idx, same kind of keys
      recio index train.rec --key id -o by_id.idx
      recio index --combined shards/train.manifest.json -o shards/all.idx
    """
    if combined:
        if output is None:
            raise click.UsageError("--combined needs -o/--output, the index to write")
        start = time.monotonic()
        lines = combined_index(rec, output, force=force)
        seconds = time.monotonic() - start
        if as_json:
            echo_json({"manifest": rec, "idx_path": output, "records": lines,
                       "seconds": round(seconds, 3)})
        elif not quiet:
            click.echo(f"wrote {output}: {lines:,} records across the shards of {rec}")
        return
    if is_manifest(rec):
        fail(f"{rec} is a shard set's manifest: each shard has its own .idx; `recio index "
             f"--combined {rec} -o all.idx` writes one index across them")
    builders: Dict[str, Callable[..., RebuiltIndex]] = {
        "id": index_by_id, "position": rebuild_index, "auto": index_keeping_keys}
    build = builders[key]
    start = time.monotonic()
    with file_progress(rec, "index", quiet or as_json) as bar:
        written = build(rec, output, force=force, progress=bar.update)
    seconds = time.monotonic() - start
    if as_json:
        echo_json({"rec_path": written.rec_path, "idx_path": written.idx_path,
                   "records": written.records, "keys": written.keys,
                   "seconds": round(seconds, 3)})
    elif not quiet:
        rate = written.records / seconds if seconds > 0 else 0.0
        kept = " as the index it replaced" if key == "auto" and written.keys == "id" else ""
        click.echo(f"wrote {written.idx_path}: {written.records:,} records (keys: "
                   f"{written.keys}{kept}), {seconds:.2f} s ({rate:,.0f} records/s)")
