"""``recio split``: how N workers partition record files (as MXNet's InputSplit); resharding."""
from __future__ import annotations

import os
from typing import Dict, List, Optional

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
from recio.records.atomic import OutputSet
from recio.records.index import format_index, read_index, sibling_index_path
from recio.records.split import DEFAULT_CHUNK_SIZE, InputSplit, iter_heads_with_keys


@click.command("split")
@click.argument("files", nargs=-1, required=True)
@click.option("-n", "--num-parts", type=click.IntRange(min=1), required=True,
              help="Number of parts (workers).")
@click.option("--part", "part", type=click.IntRange(min=0), default=None,
              help="Show only part K (0-based).")
@click.option("--balance", type=click.Choice(["bytes", "records"]), default="bytes",
              show_default=True,
              help="bytes: MXNet's byte-range split; records: equal record counts (.idx).")
@click.option("--write", "out_prefix", metavar="OUT_PREFIX", default=None,
              help="Write the parts as OUT_PREFIX_k.rec + OUT_PREFIX_k.idx (k = 0..N-1).")
@click.option("--no-count", is_flag=True, help="Skip counting records (reads only the boundaries).")
@click.option("--chunk-size", type=click.IntRange(min=8), default=DEFAULT_CHUNK_SIZE,
              show_default=True, help="Bytes per read.")
@json_option
@quiet_option
@handle_errors
def split_cmd(files: List[str], num_parts: int, part: Optional[int], balance: str,
              out_prefix: Optional[str], no_count: bool, chunk_size: int, as_json: bool,
              quiet: bool) -> None:
    """Show the N parts of FILES (one logical stream) or reshard them into N files.

    FILES are taken in order as one byte stream, exactly as MXNet's InputSplit does
    (`a.rec;b.rec`, directories and globs are accepted too). A record belongs to the part
    holding its head, so every record is in exactly one part.

    \b
    Examples:
      recio split train.rec -n 8                   # table of 8 parts
      recio split a.rec b.rec c.rec -n 4 --part 1 --json
      recio split 'shards/*.rec' -n 16 --write out/train   # out/train_0.rec ... _15.rec + .idx
    """
    if part is not None and part >= num_parts:
        fail(f"--part {part} is out of range: parts are 0..{num_parts - 1}", EXIT_USAGE)
    source = list(files) if len(files) > 1 else files[0]
    parts = InputSplit.all_parts(source, num_parts, balance=balance, chunk_size=chunk_size)
    chosen = parts if part is None else [parts[part]]
    if out_prefix is not None:
        _write_parts(chosen, out_prefix, quiet)
    rows = []
    with progress(total=len(chosen), desc="counting", unit="part", quiet=quiet or no_count) as bar:
        for p in chosen:
            rows.append({
                "part": p.part_index, "begin": p.begin, "end": p.end, "bytes": p.nbytes,
                "records": None if no_count else p.count_records(),
                "spans": [{"file": s.path, "start": s.start, "end": s.end} for s in p.spans],
            })
            bar.update(1)
    if out_prefix is not None:
        for row in rows:
            row["output"] = f"{out_prefix}_{row['part']}.rec"
    if as_json:
        echo_json({"files": parts[0].files, "total_bytes": parts[0].total_size,
                   "num_parts": num_parts, "balance": balance, "parts": rows})
        return
    _print_table(rows, parts[0].files, parts[0].total_size, num_parts)


def _print_table(rows: List[Dict], files: List[str], total: int, num_parts: int) -> None:
    click.echo(f"{len(files)} file(s), {total:,} bytes, {num_parts} part(s)")
    click.echo(f"{'part':>4}  {'records':>9}  {'bytes':>14}  file: [start, end)")
    for row in rows:
        records = "-" if row["records"] is None else f"{row['records']:,}"
        spans = row["spans"] or [None]
        for i, s in enumerate(spans):
            where = "(empty)" if s is None else f"{s['file']}: [{s['start']}, {s['end']})"
            if i == 0:
                click.echo(f"{row['part']:>4}  {records:>9}  {row['bytes']:>14,}  {where}")
            else:
                click.echo(f"{'':>4}  {'':>9}  {'':>14}  {where}")
        if "output" in row:
            click.echo(f"{'':>4}  -> {row['output']}")


def _write_parts(parts: List[InputSplit], prefix: str, quiet: bool) -> None:
    """Copy each part's byte ranges verbatim into PREFIX_k.rec and index them (atomic files:
    each part's .rec and .idx appear together, the .rec first, only once both are written)."""
    folder = os.path.dirname(os.path.abspath(prefix))
    os.makedirs(folder, exist_ok=True)
    keys_of = _input_keys(parts[0].files)
    counter = [0]
    total = sum(p.nbytes for p in parts)
    with progress(total=total, desc="writing", unit="B", unit_scale=True, quiet=quiet) as bar:
        for p in parts:
            out = OutputSet.create([(f"{prefix}_{p.part_index}.rec", "wb", -1),
                                    (f"{prefix}_{p.part_index}.idx", "wb", -1)])
            rec, idx = out.files[0].file, out.files[1].file
            try:
                keys: List[str] = []
                offsets: List[int] = []
                for span in p.spans:
                    base = rec.tell()
                    for key, off in iter_heads_with_keys(span.path, span.start, span.end,
                                                         keys_of.get(span.path), counter):
                        keys.append(key)
                        offsets.append(base + off - span.start)
                    _copy_range(span.path, span.start, span.end, rec, bar)
                for i in range(0, len(keys), 8192):
                    idx.write(format_index(keys[i:i + 8192], offsets[i:i + 8192]))
            except BaseException:
                out.discard()
                raise
            out.commit()


def _input_keys(files: List[str]) -> Dict[str, Dict[int, str]]:
    """offset -> key for every input file that has an .idx (keys are kept when resharding)."""
    out = {}
    for path in files:
        idx = sibling_index_path(path)
        if os.path.exists(idx):
            keys, offsets = read_index(idx, key_type=str, rec_size=os.path.getsize(path))
            out[path] = dict(zip(offsets, keys))
    return out


def _copy_range(path: str, start: int, end: int, dst, bar) -> None:
    block = 8 << 20
    with open(path, "rb", buffering=0) as src:
        src.seek(start)
        left = end - start
        while left > 0:
            data = src.read(min(block, left))
            if not data:
                break
            dst.write(data)
            left -= len(data)
            bar.update(len(data))
