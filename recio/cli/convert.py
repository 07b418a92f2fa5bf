"""``recio convert``: CNTK Binary Format <-> RecordIO sequence records."""
from __future__ import annotations

import os
import re
from typing import Dict, Optional, Tuple

import click

from recio.cli.common import (
    EXIT_USAGE,
    echo_json,
    fail,
    handle_errors,
    json_option,
    progress,
    quiet_option,
)
from recio.sequence.convert import cbf_to_rec, rec_to_cbf

DEFAULT_CHUNK_SIZE = 32 << 20  # CNTK's docs: "the typical chunks size is 32-64 MBs"

# dd's convention: KB/MB/GB are powers of 1000, K/M/G and KiB/MiB/GiB powers of 1024
_UNITS = {"": 1, "B": 1, "KB": 10**3, "MB": 10**6, "GB": 10**9, "K": 2**10, "M": 2**20,
          "G": 2**30, "KIB": 2**10, "MIB": 2**20, "GIB": 2**30}


def parse_size(text: str) -> int:
    """``"32MB"`` -> 32000000, ``"32M"``/``"32MiB"`` -> 33554432, ``"600"`` -> 600."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([A-Za-z]*)\s*", text)
    unit = match.group(2).upper() if match else None
    if match is None or unit not in _UNITS:
        raise click.BadParameter(f"{text!r} is not a size: use e.g. 600, 64K, 32MB, 32MiB")
    value = int(float(match.group(1)) * _UNITS[unit])
    if value < 1:
        raise click.BadParameter(f"{text!r}: a chunk needs at least 1 byte")
    return value


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
@quiet_option
@json_option
@handle_errors
def convert_cmd(source: str, destination: str, chunk_size: str, aliases: Tuple[str, ...],
                quiet: bool, as_json: bool) -> None:
    """Convert CNTK Binary Format (.cbf) to sequence records (.rec) or back.

    One sequence record per CBF sequence, with .idx and the .len sample-count
    sidecar beside the .rec; the way back rebuilds chunks of --chunk-size. The
    direction comes from the file extensions.

    \b
    Examples:
      recio convert train.cbf train.rec
      recio convert train.rec train.cbf --chunk-size 32MB
      recio convert train.cbf train.rec --alias x=features --json
    """
    size = parse_size(chunk_size) if chunk_size is not None else DEFAULT_CHUNK_SIZE
    alias = _parse_aliases(aliases)
    src, dst = source.lower(), destination.lower()
    if not os.path.isfile(source):
        fail(f"{source}: no such file")
    if src.endswith(".cbf") and dst.endswith(".rec"):
        direction = "cbf"
        if chunk_size is not None:
            fail("--chunk-size sets the chunks of a .cbf being written; use it with "
                 "IN.rec OUT.cbf", EXIT_USAGE)
    elif src.endswith(".rec") and dst.endswith(".cbf"):
        direction = "rec"
        if alias:
            fail("--alias renames CBF streams; use it with FILE.cbf OUT.rec", EXIT_USAGE)
    else:
        fail(f"cannot tell the direction from {source} -> {destination}: "
             f"give FILE.cbf OUT.rec or IN.rec OUT.cbf", EXIT_USAGE)
    if os.path.abspath(source) == os.path.abspath(destination):
        fail(f"{source}: source and destination are the same file", EXIT_USAGE)
    with progress(total=os.path.getsize(source), desc="convert", unit="B", unit_scale=True,
                  quiet=quiet) as bar:
        try:
            if direction == "cbf":
                summary = cbf_to_rec(source, destination, alias=alias, progress=bar.update)
            else:
                summary = rec_to_cbf(source, destination, size, progress=bar.update)
        except ValueError as exc:  # RecordIOError (a ValueError) and bad --alias names
            fail(str(exc))
    if as_json:
        echo_json(summary)
    else:
        extra = (f"{summary['chunks_written']} chunks" if direction == "rec"
                 else f"{summary['chunks_read']} chunks read")
        click.echo(f"{summary['source']} -> {summary['destination']}: "
                   f"{summary['sequences']} sequences, {extra}, "
                   f"{summary['bytes_written']} bytes")


__all__ = ["convert_cmd", "parse_size"]
