"""Resharding: write each part of an ``InputSplit`` as a ``.rec`` + ``.idx`` file of its own.

A part's bytes are copied verbatim (records are never decoded or re-framed), so the parts of a
file concatenate back to it byte for byte, and ``InputSplit(out_k.rec)`` delivers what part k of
the inputs delivered. Each output's ``.idx`` keeps the input's keys where the input has an
``.idx``; records without one are numbered in the order they are written.

Nothing appears until every part was written: the parts go to temporary files first, and are
renamed into place (each ``.rec`` before its ``.idx``) only when all of them are complete. A
damaged input raises ``RecordIOError`` (file and byte offset) and leaves no output behind.
Existing outputs of the same names are replaced; an output that would replace one of the inputs
is refused.
"""
from __future__ import annotations

import errno
import os
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from recio.errors import RecordIOError
from recio.records.atomic import OutputSet
from recio.records.index import format_index, open_index, sibling_index_path
from recio.records.split import (
    DEFAULT_CHUNK_SIZE,
    FileSpan,
    InputSplit,
    PartSummary,
    PathLike,
    Source,
    SplitPlan,
    chosen_parts,
    record_heads,
)

Progress = Optional[Callable[[int], Any]]

#: bytes copied per read
COPY_BLOCK = 8 << 20
#: index lines formatted per batch
_INDEX_BATCH = 8192


def part_paths(out_prefix: PathLike, part_index: int) -> Tuple[str, str]:
    """``(PREFIX_k.rec, PREFIX_k.idx)``: the files ``reshard`` writes for part ``k``."""
    rec = f"{os.fspath(out_prefix)}_{part_index}.rec"
    return rec, sibling_index_path(rec)


def reshard(source: Source, num_parts: int, out_prefix: PathLike,
            part_index: Optional[int] = None, *, balance: str = "bytes",
            chunk_size: int = DEFAULT_CHUNK_SIZE,
            idx_paths: Optional[Sequence[Optional[PathLike]]] = None,
            progress: Progress = None) -> SplitPlan:
    """Write the parts of ``source`` (every part, or only ``part_index``) as
    ``OUT_PREFIX_k.rec`` + ``OUT_PREFIX_k.idx``; return the plan with each part's outputs and
    record count.

    The parts are those of ``InputSplit.all_parts(source, num_parts, balance=..., ...)``. Keys
    come from ``idx_paths`` (one per input file, None for "the ``.idx`` beside it, if any").
    ``progress(n)`` is called with the bytes copied since the last call. Raises
    ``FileExistsError`` when an output would replace an input file or its index, and
    ``RecordIOError``/``IndexFileError`` for damaged inputs; no output appears in either case.
    """
    parts, chosen = chosen_parts(source, num_parts, part_index, balance=balance,
                                 chunk_size=chunk_size, idx_paths=idx_paths)
    files = parts[0].files
    keys_of = _input_keys(files, idx_paths)
    _refuse_overwriting_inputs([part_paths(out_prefix, p.part_index) for p in chosen], files,
                               idx_paths)
    folder = os.path.dirname(os.path.abspath(os.fspath(out_prefix)))
    os.makedirs(folder, exist_ok=True)
    plan = SplitPlan(files, parts[0].total_size, num_parts, balance)
    pending: List[OutputSet] = []
    numbered = [0]  # running number of the records written, the key of unindexed records
    try:
        for p in chosen:
            rec_path, idx_path = part_paths(out_prefix, p.part_index)
            out = OutputSet.create([(rec_path, "wb", -1), (idx_path, "wb", -1)])
            pending.append(out)
            count = _write_part(p, out.files[0].file, out.files[1].file, keys_of, numbered,
                                progress)
            for f in out.files:
                f.finish_file()  # closed now: a part waiting for the others holds no descriptor
            plan.parts.append(PartSummary(p.part_index, p.begin, p.end, count, p.spans,
                                          rec_path, idx_path))
        for out in pending:
            out.commit()
    except BaseException:
        for out in pending:
            if not out.done:
                out.discard()
        raise
    return plan


def _write_part(part: InputSplit, rec: BinaryIO, idx: BinaryIO,
                keys_of: Dict[str, Dict[int, str]], numbered: List[int],
                progress: Progress) -> int:
    """Copy the spans of ``part`` into ``rec`` and write its index lines to ``idx``; the number
    of records written. Each span's record heads are checked before its bytes are copied."""
    keys: List[str] = []
    offsets: List[int] = []
    written = 0
    for span in part.spans:
        for key, offset in _keyed_heads(span, keys_of.get(span.path), numbered):
            keys.append(key)
            offsets.append(written + offset - span.start)
        written += _copy_range(span, rec, progress)
    for i in range(0, len(keys), _INDEX_BATCH):
        idx.write(format_index(keys[i:i + _INDEX_BATCH], offsets[i:i + _INDEX_BATCH]))
    return len(keys)


def _keyed_heads(span: FileSpan, keys: Optional[Dict[int, str]],
                 numbered: List[int]) -> Iterator[Tuple[str, int]]:
    """``(key, offset)`` of each record head in the span: its key in the input's index, else
    the running number ``numbered[0]`` (advanced for every record)."""
    for offset in record_heads(span.path, span.start, span.end):
        key = keys.get(offset) if keys is not None else None
        yield (str(numbered[0]) if key is None else key), offset
        numbered[0] += 1


def _input_keys(files: List[str], idx_paths: Optional[Sequence[Optional[PathLike]]]
                ) -> Dict[str, Dict[int, str]]:
    """offset -> key of every input file that has an index (so resharding keeps the keys)."""
    out = {}
    for i, path in enumerate(files):
        given = idx_paths[i] if idx_paths is not None and i < len(idx_paths) else None
        idx = os.fspath(given) if given is not None else sibling_index_path(path)
        if given is not None or os.path.exists(idx):
            index = open_index(idx, key_type=str, rec_size=os.path.getsize(path))
            out[path] = dict(zip(index.offsets.tolist(), index.key_list()))
    return out


def _refuse_overwriting_inputs(outputs: List[Tuple[str, str]], files: List[str],
                               idx_paths: Optional[Sequence[Optional[PathLike]]]) -> None:
    """Raise ``FileExistsError`` when an output path is an input ``.rec`` or ``.idx``."""
    inputs = {os.path.realpath(p) for p in files}
    inputs |= {os.path.realpath(sibling_index_path(p)) for p in files}
    inputs |= {os.path.realpath(os.fspath(p)) for p in (idx_paths or ()) if p is not None}
    for pair in outputs:
        for path in pair:
            if os.path.realpath(path) in inputs:
                raise FileExistsError(errno.EEXIST, "is an input of this split; write the "
                                      "parts under another prefix", path)


def _copy_range(span: FileSpan, dst: BinaryIO, progress: Progress) -> int:
    """Copy ``span`` into ``dst``; the number of bytes copied."""
    copied = 0
    with open(span.path, "rb", buffering=0) as src:
        src.seek(span.start)
        left = span.end - span.start
        while left > 0:
            data = src.read(min(COPY_BLOCK, left))
            if not data:
                raise RecordIOError(f"the file ended before the end of its part ({span.end}): "
                                    f"it changed while being copied", path=span.path,
                                    offset=span.end - left)
            dst.write(data)
            copied += len(data)
            left -= len(data)
            if progress is not None:
                progress(len(data))
    return copied


__all__ = ["reshard", "part_paths", "COPY_BLOCK"]
