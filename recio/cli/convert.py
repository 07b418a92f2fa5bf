"""``recio convert``: CNTK Binary Format <-> RecordIO sequence records; CNTK Text Format to
either (the Python 3 replacement for CNTK's ``ctf2bin.py``)."""
from __future__ import annotations

import dataclasses
import os
from typing import Dict, List, Optional, Tuple

import click

from recio.cli.common import (
    EXIT_USAGE,
    echo_json,
    fail,
    file_progress,
    force_option,
    handle_errors,
    json_option,
    quiet_option,
)
from recio.cli.numbers import Size
from recio.errors import OutputExistsError, OutputWriteError
from recio.sequence.convert import convert
from recio.sequence.ctf_streams import CTFStream, read_header
from recio.storage import check_regular, is_url

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


def _ctf_streams(header: Optional[str], specs: Tuple[str, ...],
                 defines_mb_size: Optional[str]) -> List[CTFStream]:
    """The stream definitions from ``--header`` (first) and ``--stream``, with
    ``--defines-mb-size`` marking one of them."""
    streams = list(read_header(header)) if header else []
    for spec in specs:
        try:
            streams.append(CTFStream.parse(spec))
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--stream") from None
    if defines_mb_size is not None:
        if defines_mb_size not in [s.name for s in streams]:
            raise click.BadParameter(f"{defines_mb_size!r} is not one of the streams "
                                     f"{[s.name for s in streams]}",
                                     param_hint="--defines-mb-size")
        streams = [dataclasses.replace(s, defines_mb_size=s.name == defines_mb_size)
                   for s in streams]
    return streams


@click.command("convert")
@click.argument("source", type=click.Path(dir_okay=False))
@click.argument("destination", type=click.Path(dir_okay=False))
@click.option("--chunk-size", type=Size("a chunk size"), default=None,
              help="CBF chunk size for IN.rec OUT.cbf and FILE.ctf OUT.cbf (default 32MiB; "
                   "600, 64K, 32MB = 32*10^6, 32MiB = 32*2^20). A chunk closes when the next "
                   "sequence would take it past SIZE.")
@click.option("--alias", "aliases", multiple=True, metavar="NEW=OLD",
              help="Rename CBF stream OLD to NEW in the records (repeatable; .cbf -> .rec).")
@click.option("--header", type=click.Path(exists=True, dir_okay=False), default=None,
              metavar="FILE",
              help="The streams of a .ctf source, in ctf2bin's header format: one "
                   "'NAME ALIAS dense|sparse DIM' per line.")
@click.option("--stream", "stream_specs", multiple=True, metavar="NAME:ALIAS:KIND:DIM",
              help="A stream of a .ctf source (repeatable; after --header's): e.g. "
                   "features:F:dense:40 or labels:L:sparse:1000. ALIAS is the name after '|' "
                   "in the file.")
@click.option("--precision", type=click.Choice(["float", "double"]), default=None,
              help="Values of a .ctf source as float32 (default) or float64.")
@click.option("--defines-mb-size", "defines_mb_size", default=None, metavar="NAME",
              help="For a .ctf source: stream NAME's line count is each sequence's size, as "
                   "CNTK's defines_mb_size (sequences without it are left out).")
@force_option
@quiet_option
@json_option
@handle_errors
def convert_cmd(source: str, destination: str, chunk_size: Optional[int],
                aliases: Tuple[str, ...], header: Optional[str],
                stream_specs: Tuple[str, ...], precision: Optional[str],
                defines_mb_size: Optional[str], force: bool, quiet: bool,
                as_json: bool) -> None:
    """Convert CNTK Binary Format (.cbf) to sequence records (.rec) or back, and
    CNTK Text Format (.ctf) to either.

    One sequence record per sequence, with .idx and the .len sample-count sidecar
    beside the .rec; a .cbf is written in chunks of --chunk-size. The direction
    comes from the file extensions. DESTINATION (and its .idx/.len) is written
    atomically; an existing one is replaced only with --force.

    A .ctf source needs its streams (--header FILE and/or --stream). It is read
    exactly as CNTK 2.7's CTFDeserializer reads it, so CNTK reads the .cbf as it
    reads the .ctf; this replaces CNTK's Scripts/ctf2bin.py, which reads the text
    its own way (no zero-padding, empty sparse samples dropped, Python's float())
    and never resets its chunk size count, so after its first chunk every chunk
    holds one sequence; here every chunk is filled up to the chunk size.

    \b
    Examples:
      recio convert train.cbf train.rec
      recio convert train.rec train.cbf --chunk-size 32MB
      recio convert train.cbf train.rec --alias x=features --json
      recio convert data.ctf data.cbf --header header.txt --chunk-size 32MiB
      recio convert data.ctf data.rec --stream x:F:dense:40 --stream y:L:sparse:1000
    """
    size = chunk_size if chunk_size is not None else DEFAULT_CHUNK_SIZE
    alias = _parse_aliases(aliases)
    if not is_url(source) and not os.path.isfile(source):
        check_regular(source)  # a FIFO or a device: refused as what it is
        fail(f"{source}: no such file")
    src, dst = source.lower(), destination.lower()
    from_ctf = src.endswith(".ctf") and dst.endswith((".cbf", ".rec"))
    to_cbf = (src.endswith(".rec") or from_ctf) and dst.endswith(".cbf")
    to_rec = (src.endswith(".cbf") or from_ctf) and dst.endswith(".rec")
    if not (to_cbf or to_rec):
        fail(f"cannot tell the direction from {source} -> {destination}: "
             f"give FILE.cbf OUT.rec, IN.rec OUT.cbf, FILE.ctf OUT.cbf or FILE.ctf OUT.rec",
             EXIT_USAGE)
    if chunk_size is not None and not to_cbf:
        fail("--chunk-size sets the chunks of a .cbf being written; use it with "
             "IN.rec OUT.cbf or FILE.ctf OUT.cbf", EXIT_USAGE)
    if alias and not (to_rec and not from_ctf):
        fail("--alias renames CBF streams; use it with FILE.cbf OUT.rec", EXIT_USAGE)
    given = [name for name, value in (("--header", header), ("--stream", stream_specs),
                                      ("--precision", precision),
                                      ("--defines-mb-size", defines_mb_size)) if value]
    if given and not from_ctf:
        fail(f"{', '.join(given)}: only for a .ctf source (FILE.ctf OUT.cbf or "
             f"FILE.ctf OUT.rec)", EXIT_USAGE)
    streams = None
    if from_ctf:
        if not header and not stream_specs:
            fail(f"{source}: a .ctf file does not name its streams: give --header FILE "
                 f"(ctf2bin's format, one 'NAME ALIAS dense|sparse DIM' per line) or "
                 f"--stream NAME:ALIAS:dense|sparse:DIM for each stream", EXIT_USAGE)
        streams = _ctf_streams(header, stream_specs, defines_mb_size)
    dtype = None if not from_ctf else ("float64" if precision == "double" else "float32")
    with file_progress(source, "convert", quiet) as bar:
        try:
            summary = convert(source, destination, size, alias=alias, force=force,
                              progress=bar.update, streams=streams, dtype=dtype)
        except (OutputExistsError, OutputWriteError):
            raise  # handle_errors words them (--force; what to do about a full disk)
        except ValueError as exc:  # RecordIOError (a ValueError) and --alias naming no stream
            fail(str(exc))
    if as_json:
        echo_json(summary)
        return
    if "chunks_written" in summary:
        extra = f"{summary['chunks_written']} chunks"
    else:
        extra = f"{summary['chunks_read']} chunks read"
    if summary.get("skipped_sequences"):
        extra += (f", {summary['skipped_sequences']} sequences without the "
                  f"--defines-mb-size stream left out")
    click.echo(f"{summary['source']} -> {summary['destination']}: "
               f"{summary['sequences']} sequences, {extra}, {summary['bytes_written']} bytes")
