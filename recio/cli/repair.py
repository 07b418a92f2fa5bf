"""``recio repair``: the intact records of a damaged ``.rec`` into a new ``.rec`` + ``.idx``."""
from __future__ import annotations

from typing import Optional

import click

from recio.cli.common import (
    PathOrURL,
    echo_json,
    file_progress,
    force_option,
    handle_errors,
    json_option,
    quiet_option,
)
from recio.image.tools.repair import KEY_MODES, RepairResult, repair

#: dropped regions listed one per line; the rest are counted
_LISTED = 20


@click.command("repair")
@click.argument("rec", type=click.Path(dir_okay=False))
@click.option("-o", "--output", "prefix", type=click.Path(dir_okay=False), default=None,
              help="Prefix of the files to write: PREFIX.rec and PREFIX.idx (default: REC's "
                   "name with _repaired). Never REC itself; an existing file only with --force.")
@click.option("--index", "idx_path", type=PathOrURL(exists=True, dir_okay=False), default=None,
              help="The old index whose keys to keep (default: the .idx beside REC, if any).")
@click.option("--key", "key", type=click.Choice(KEY_MODES), default="auto", show_default=True,
              help="auto: each record's key from the old index where it is consistent there, "
                   "else its image header's id, else a new number; id: every record's image "
                   "id; position: 0..n-1 in the new file.")
@force_option
@json_option
@quiet_option
@handle_errors
def repair_cmd(rec: str, prefix: Optional[str], idx_path: Optional[str], key: str,
               force: bool, as_json: bool, quiet: bool) -> None:
    """Rescue every intact record of a damaged REC into PREFIX.rec + PREFIX.idx.

    For a .rec that was cut short (a copy or download that stopped), or damaged anywhere
    inside: the records are copied byte for byte, in file order, each with its key, and every
    byte range that is left out is listed with the reason. A record right before damage is
    kept only when its end is confirmed (see `recio.image.tools.repair`). REC is only read; the
    outputs appear complete or not at all.

    Exit status: 0 written (also when nothing was damaged: a plain copy); 2 nothing intact to
    rescue, an unreadable REC, or a refused output.

    \b
    Examples:
      recio verify data/train.rec                  # TRUNCATED: ... next: recio repair ...
      recio repair data/train.rec -o data/train_repaired
      recio repair data/train.rec -o fixed --key position --json
    """
    if prefix is None:
        prefix = (rec[:-4] if rec.endswith(".rec") else rec) + "_repaired"
    with file_progress(rec, "repair", quiet or as_json) as bar:
        result = repair(rec, prefix, idx_path=idx_path, keys=key, force=force,
                        progress=lambda n: bar.update(n / 2))
    if as_json:
        echo_json(result.to_dict())
    elif not quiet:
        _print(result)


def _print(result: RepairResult) -> None:
    rec = result.rec_path
    regions = result.dropped_regions
    if result.index_error:
        click.echo(f"note: the old index was not used: {result.index_error}")
    for region in regions[:_LISTED]:
        click.echo(f"{rec}: dropped bytes [{region.start}, {region.end}) "
                   f"({region.end - region.start:,} bytes): {region.reason}")
    if len(regions) > _LISTED:
        click.echo(f"{rec}: ... and {len(regions) - _LISTED:,} more dropped regions "
                   f"(--json lists them all)")
    sources = [f"{n:,} from {what}" for n, what in (
        (result.keys_from_index, result.idx_path), (result.keys_from_ids, "image ids"),
        (result.keys_new, "new numbers" if result.key_mode == "auto" else "positions"))
        if n]
    listed = "" if result.index_entries is None else \
        f" (its index listed {result.index_entries:,})"
    if result.padding_missing:
        click.echo(f"{rec} lacked {result.padding_missing} byte(s) of its last record's "
                   f"padding, its only damage: the new file has them")
    elif not regions:
        click.echo(f"{rec} has no damage: the new file is a plain copy")
    click.echo(f"wrote {result.out_rec} + {result.out_idx}: {result.records:,} records"
               f"{listed}, {result.bytes_out:,} bytes; keys: {', '.join(sources)}; dropped "
               f"{len(regions):,} region(s), {result.dropped_bytes:,} bytes")
    if result.lost_keys:
        shown = ", ".join(result.lost_examples)
        more = ", ..." if result.lost_keys > len(result.lost_examples) else ""
        click.echo(f"lost: {result.lost_keys:,} record(s) of {result.idx_path} are not in the "
                   f"new file (keys {shown}{more})")
