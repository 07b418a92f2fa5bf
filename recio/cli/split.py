"""``recio split``: how N workers partition record files (as MXNet's InputSplit); resharding."""
from __future__ import annotations

from typing import List, Optional

import click

from recio.cli.common import (
    EXIT_USAGE,
    echo_json,
    fail,
    force_option,
    handle_errors,
    json_option,
    progress,
    quiet_option,
)
from recio.cli.numbers import Number
from recio.records.shards.reshard import reshard
from recio.records.split import DEFAULT_CHUNK_SIZE, FileSpan, SplitPlan, plan_split


@click.command("split")
@click.argument("files", nargs=-1, required=True)
@click.option("-n", "--num-parts", type=Number(int, 1, what="a whole number of parts"), required=True,
              help="Number of parts (workers).")
@click.option("--part", "part", type=Number(int, 0, what="a part number"), default=None,
              help="Show (or write) only part K, counted from 0.")
@click.option("--balance", type=click.Choice(["bytes", "records"]), default="bytes",
              show_default=True,
              help="bytes: MXNet's byte-range split (what ImageRecordIter(num_parts=N) reads); "
                   "records: equal record counts, from the .idx beside each file.")
@click.option("--write", "out_prefix", metavar="OUT_PREFIX", default=None,
              help="Also write the parts as OUT_PREFIX_k.rec + OUT_PREFIX_k.idx (k = 0..N-1): "
                   "bytes copied verbatim. Nothing appears unless every part was written; an "
                   "input is never replaced, an existing output only with --force.")
@click.option("--keys", "keys", type=click.Choice(["keep", "renumber"]), default="keep",
              show_default=True,
              help="With --write: keep the inputs' .idx keys (records without one: their "
                   "position; a key that would repeat stops the split) or renumber every "
                   "record 0..N-1 in stream order.")
@force_option
@click.option("--no-count", is_flag=True,
              help="Do not count the records of each part (reads only the boundaries).")
@click.option("--chunk-size", type=Number(int, 8, what="a number of bytes", metavar="BYTES"), default=DEFAULT_CHUNK_SIZE,
              show_default=True, help="Largest read when looking for a part's first record.")
@json_option
@quiet_option
@handle_errors
def split_cmd(files: List[str], num_parts: int, part: Optional[int], balance: str,
              out_prefix: Optional[str], keys: str, force: bool, no_count: bool,
              chunk_size: int, as_json: bool, quiet: bool) -> None:
    """Show the N parts of FILES (one logical stream) or reshard them into N files.

    FILES are taken in order as one byte stream, exactly as MXNet's InputSplit does
    (`a.rec;b.rec`, directories and globs are accepted too). A record belongs to the part
    holding its head, so every record is in exactly one part. The table gives each part's
    records, bytes, and the [start, end) byte range it reads in each file.

    \b
    Examples:
      recio split train.rec -n 8                   # table of 8 parts
      recio split a.rec b.rec c.rec -n 4 --part 1 --json
      recio split 'shards/*.rec' -n 16 --write out/train   # out/train_0.rec ... _15.rec + .idx
      recio split a.rec b.rec -n 1 --write merged --keys renumber   # merge, keys 0..N-1
    """
    if out_prefix is None and (keys != "keep" or force):
        fail("--keys and --force apply only with --write", EXIT_USAGE)
    if part is not None and part >= num_parts:
        fail(f"--part {part} is out of range: parts are 0..{num_parts - 1}", EXIT_USAGE)
    source = list(files) if len(files) > 1 else files[0]
    if out_prefix is not None:
        with progress(desc="writing", unit="B", unit_scale=True, quiet=quiet) as bar:
            plan = reshard(source, num_parts, out_prefix, part, balance=balance,
                           chunk_size=chunk_size, keys=keys, force=force, progress=bar.update)
    else:
        with progress(desc="counting", unit="part", quiet=quiet or no_count) as bar:
            plan = plan_split(source, num_parts, part, balance=balance, chunk_size=chunk_size,
                              count=not no_count, progress=bar.update)
    if as_json:
        echo_json(plan.to_dict())
    else:
        _print_table(plan)


def _print_table(plan: SplitPlan) -> None:
    click.echo(f"{len(plan.files)} file(s), {plan.total_bytes:,} bytes, "
               f"{plan.num_parts} part(s)")
    click.echo(f"{'part':>4}  {'records':>9}  {'bytes':>14}  file: [start, end)")
    for p in plan.parts:
        records = "-" if p.records is None else f"{p.records:,}"
        spans: List[Optional[FileSpan]] = list(p.spans) or [None]
        for i, s in enumerate(spans):
            where = "(empty)" if s is None else f"{s.path}: [{s.start}, {s.end})"
            if i == 0:
                click.echo(f"{p.part_index:>4}  {records:>9}  {p.nbytes:>14,}  {where}")
            else:
                click.echo(f"{'':>4}  {'':>9}  {'':>14}  {where}")
        if p.rec_path is not None:
            click.echo(f"{'':>4}  -> {p.rec_path}, {p.idx_path}")
