"""``recio index``: rebuild a ``.idx`` by scanning the ``.rec`` (MXNet's ``tools/rec2idx.py``)."""
from __future__ import annotations

import os
from array import array
from typing import Optional, Sequence

import click

from recio.cli.common import EXIT_USAGE, fail, handle_errors, progress
from recio.errors import RecordIOError
from recio.image.header import IR_SIZE, unpack
from recio.records.index import index_cache_path, sibling_index_path, write_index
from recio.records.reader import RecordReader
from recio.records.split import record_heads


@click.command("index")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("-o", "--output", type=click.Path(dir_okay=False), default=None,
              help="Index file to write (default: REC with .idx).")
@click.option("--key", "key", type=click.Choice(["position", "id"]), default="position",
              show_default=True,
              help="position: keys 0..n-1 like rec2idx; id: the image header's id.")
@click.option("--quiet", "-q", is_flag=True, help="No progress bar, no summary line.")
@handle_errors
def index_cmd(rec: str, output: Optional[str], key: str, quiet: bool) -> None:
    """Write an index for REC: one `key<TAB>offset` line per record, atomically.

    \b
    Examples:
      recio index train.rec                 # train.idx, keys 0..n-1 (as rec2idx)
      recio index train.rec --key id -o by_id.idx
    """
    import numpy as np

    output = output or sibling_index_path(rec)
    size = os.path.getsize(rec)
    with progress(total=size, desc="index", unit="B", unit_scale=True, quiet=quiet) as bar:
        heads = array("q")  # 8 bytes per record, not a Python int each
        last = 0
        for off in record_heads(rec):
            heads.append(off)
            if off - last >= 1 << 26:
                bar.update(off - last)
                last = off
        bar.update(size - last)
    offsets = np.frombuffer(heads, np.int64) if heads else np.empty(0, np.int64)
    if key == "position":
        keys: Sequence[int] = range(len(offsets))
    else:
        keys = _ids(rec, offsets.tolist())
        if len(set(keys)) != len(keys):
            fail(f"{rec}: record ids are not unique ({len(keys) - len(set(keys))} repeats); an "
                 f"index needs unique keys, use --key position", EXIT_USAGE)
    write_index(output, keys, offsets)
    try:  # the old index's sidecar cache no longer applies (it would be ignored anyway)
        os.remove(index_cache_path(output))
    except OSError:
        pass
    if not quiet:
        click.echo(f"wrote {output}: {len(offsets):,} records (keys: {key})")


def _ids(rec: str, offsets: list) -> list:
    """The IRHeader id of each record (from its first 24 payload bytes)."""
    with RecordReader(rec) as reader:
        ids = []
        for off in offsets:
            head = reader.peek_at(off, IR_SIZE)
            if len(head) < IR_SIZE:
                raise RecordIOError(f"record of {len(head)} bytes has no image header ({IR_SIZE} "
                                    f"bytes) to take an id from; use --key position",
                                    path=rec, offset=off)
            ids.append(unpack(head)[0].id)
        return ids
