"""``recio convert``: CNTK Binary Format <-> RecordIO sequence records."""
from __future__ import annotations

import os
from typing import Dict, Optional, Tuple

import click

from recio.cli.common import (
    EXIT_USAGE,
    echo_json,
    fail,
    file_progress,
    force_option,
    handle_errors,
    json_option,
    parse_size,
    quiet_option,
)
from recio.sequence.convert import convert
from recio.storage import is_url

DEFAULT_CHUNK_SIZE = 32 << 20  # within the 32-64 MB chunks CNTK's readers are tuned for

def _parse_aliases(pairs: Tuple[str, ...]) -> Optional[Dict[str, str]]:
    out = {}
    for pair in pairs:
        new, sep, old = pair.partition("=")
        if not sep or not new or not old:
            raise click.BadParameter(f"{pair!r}: write NEW=OLD, e.g. x=features",
                                     param_hint="--alias")
        out[new] = old
    return out or None


@click.command("convert")
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("destination", type=click.Path(dir_okay=False))
@click.option("--chunk-size", default=None, metavar="SIZE",
              help="CBF chunk size for IN.rec OUT.cbf (default 32MiB; 600, 64K, "
                   "32MB = 32*10^6, 32MiB = 32*2^20). A chunk closes when the next "
                   "sequence would take it past SIZE.")
@click.option("--alias", "aliases", multiple=True, metavar="NEW=OLD",
              help="Rename CBF stream OLD to NEW in the records (repeatable; .cbf -> .rec).")
@force_option
@quiet_option
@json_option
@handle_errors
def convert_cmd(source: str, destination: str, chunk_size: Optional[str],
                aliases: Tuple[str, ...], force: bool, quiet: bool, as_json: bool) -> None:
    """Convert CNTK Binary Format (.cbf) to sequence records (.rec) or back.

    One sequence record per CBF sequence, with .idx and the .len sample-count
    sidecar beside the .rec; the way back rebuilds chunks of --chunk-size. The
    direction comes from the file extensions. DESTINATION (and its .idx/.len) is
    written atomically; an existing one is replaced only with --force.

    \b
    Examples:
      recio convert train.cbf train.rec
      recio convert train.rec train.cbf --chunk-size 32MB
      recio convert train.cbf train.rec --alias x=features --json
    """
    size = parse_size(chunk_size) if chunk_size is not None else DEFAULT_CHUNK_SIZE
    alias = _parse_aliases(aliases)
    if not is_url(source) and not os.path.isfile(source):
        fail(f"{source}: no such file")
    to_cbf = source.lower().endswith(".rec") and destination.lower().endswith(".cbf")
    to_rec = source.lower().endswith(".cbf") and destination.lower().endswith(".rec")
    if not (to_cbf or to_rec):
        fail(f"cannot tell the direction from {source} -> {destination}: "
             f"give FILE.cbf OUT.rec or IN.rec OUT.cbf", EXIT_USAGE)
    if chunk_size is not None and not to_cbf:
        fail("--chunk-size sets the chunks of a .cbf being written; use it with "
             "IN.rec OUT.cbf", EXIT_USAGE)
    if alias and not to_rec:
        fail("--alias renames CBF streams; use it with FILE.cbf OUT.rec", EXIT_USAGE)
    with file_progress(source, "convert", quiet) as bar:
        try:
            summary = convert(source, destination, size, alias=alias, force=force,
                              progress=bar.update)
        except ValueError as exc:  # RecordIOError (a ValueError) and --alias naming no stream
            fail(str(exc))
    if as_json:
        echo_json(summary)
        return
    extra = (f"{summary['chunks_written']} chunks" if to_cbf
             else f"{summary['chunks_read']} chunks read")
    click.echo(f"{summary['source']} -> {summary['destination']}: "
               f"{summary['sequences']} sequences, {extra}, {summary['bytes_written']} bytes")


__all__ = ["convert_cmd"]
