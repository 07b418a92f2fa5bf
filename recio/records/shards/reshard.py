"""Resharding: write each part of an ``InputSplit`` as a ``.rec`` + ``.idx`` file of its own.

A part's bytes are copied verbatim (records are never decoded or re-framed), so the parts of a
file concatenate back to it byte for byte, and ``InputSplit(out_k.rec)`` delivers what part k of
the inputs delivered. Keys: with ``keys="keep"`` each output's ``.idx`` keeps the input's keys
where the input has an ``.idx`` (records without one are numbered by their position in the
stream), and a key that would appear twice (two inputs both numbered ``0..n-1``) stops the
reshard before anything is written; ``keys="renumber"`` numbers every record ``0..N-1`` in stream
order instead.

Nothing appears until every part was written: the parts go to temporary files first, and are
renamed into place (each ``.rec`` before its ``.idx``) only when all of them are complete. A
damaged input raises ``RecordIOError`` (file and byte offset) and leaves no output behind.
An output that would replace one of the inputs is always refused, and existing outputs of the
same names are replaced only with ``force``; both are checked before anything is written.
"""
from __future__ import annotations

import os
from typing import Any, BinaryIO, Callable, Dict, Iterator, List, Optional, Sequence, Tuple

from recio import portable, storage
from recio.errors import IndexFileError, RecordIOError
from recio.records.atomic import OutputSet, check_outputs
from recio.records.output_folder import creating
from recio.records.diagnose import open_checked_index
from recio.records.index_format import format_index, sibling_index_path
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
from recio.records.write_errors import is_write_only_error, write_failed
from recio.storage import RemoteFile

Progress = Optional[Callable[[int], Any]]

#: bytes copied per read
_COPY_BLOCK = 8 << 20
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
            keys: str = "keep", force: bool = False, progress: Progress = None) -> SplitPlan:
    """Write the parts of ``source`` (every part, or only ``part_index``) as
    ``OUT_PREFIX_k.rec`` + ``OUT_PREFIX_k.idx``; return the plan with each part's outputs and
    record count.

    The parts are those of ``InputSplit.all_parts(source, num_parts, balance=..., ...)``. Keys
    come from ``idx_paths`` (one per input file, None for "the ``.idx`` beside it, if any").
    ``keys``: ``"keep"`` or ``"renumber"`` (see the module docstring).
    ``progress(n)`` is called with the bytes copied since the last call. Raises
    :class:`OutputExistsError` when an output would replace an input file or its index (or an
    existing file, without ``force``), ``RecordIOError`` when kept keys would repeat, and
    ``RecordIOError``/``IndexFileError`` for damaged inputs; no output appears in any case.
    """
    if keys not in ("keep", "renumber"):
        raise ValueError(f"keys must be 'keep' or 'renumber', not {keys!r}")
    parts, chosen = chosen_parts(source, num_parts, part_index, balance=balance,
                                 chunk_size=chunk_size, idx_paths=idx_paths)
    files = parts[0].files
    given = [os.fspath(p) for p in (idx_paths or ()) if p is not None]
    check_outputs([path for p in chosen for path in part_paths(out_prefix, p.part_index)],
                  files + [sibling_index_path(f) for f in files] + given, force=force)
    keys_of = _input_keys(files, idx_paths) if keys == "keep" else {}
    if not storage.is_url(os.fspath(out_prefix)):
        folder = os.path.dirname(os.path.abspath(os.fspath(out_prefix)))
        with creating(folder):
            os.makedirs(folder, exist_ok=True)
    plan = SplitPlan(files, parts[0].total_size, num_parts, balance)
    pending: List[OutputSet] = []
    numbered = [0]  # running number of the records written, the key of unindexed records
    seen: Dict[str, str] = {}  # kept key -> the input it came from (duplicates are refused)
    if keys == "keep" and part_index is not None:
        numbered[0] = sum(p.count_records() for p in parts[:part_index])
    try:
        for p in chosen:
            rec_path, idx_path = part_paths(out_prefix, p.part_index)
            out = OutputSet.create([(rec_path, "wb", -1), (idx_path, "wb", -1)])
            pending.append(out)
            try:
                count = _write_part(p, out.files[0].file, out.files[1].file, keys_of,
                                    numbered, seen if keys == "keep" else None, progress)
            except OSError as exc:  # a full disk: the part's files, not a temporary name
                if is_write_only_error(exc):
                    raise write_failed(exc, rec_path) from exc
                raise
            for f in out.files:
                f.finish_file()  # closed now: a part waiting for the others holds no descriptor
            plan.parts.append(PartSummary(p.part_index, p.begin, p.end, count, p.spans,
                                          rec_path, idx_path))
        if portable.is_windows():  # every part's files replaced together, or none
            OutputSet([f for out in pending for f in out.files]).commit()
            for out in pending:
                out.done = True
        else:
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
                seen: Optional[Dict[str, str]], progress: Progress) -> int:
    """Copy the spans of ``part`` into ``rec`` and write its index lines to ``idx``; the number
    of records written. Each span's record heads are checked before its bytes are copied; with
    ``seen`` (kept keys) a key already written raises ``RecordIOError``."""
    keys: List[str] = []
    offsets: List[int] = []
    written = 0
    for span in part.spans:
        for key, offset in _keyed_heads(span, keys_of.get(span.path), numbered):
            if seen is not None:
                _refuse_repeat(key, span.path, offset, seen)
            keys.append(key)
            offsets.append(written + offset - span.start)
        written += _copy_range(span, rec, progress)
    for i in range(0, len(keys), _INDEX_BATCH):
        idx.write(format_index(keys[i:i + _INDEX_BATCH], offsets[i:i + _INDEX_BATCH]))
    return len(keys)


def _refuse_repeat(key: str, path: str, offset: int, seen: Dict[str, str]) -> None:
    first = seen.get(key)
    if first is None:
        seen[key] = path
        return
    where = "earlier in the same file" if first == path else f"in {first} too"
    raise RecordIOError(f"key {key} repeats ({where}): the outputs' indexes would hold the "
                        "same key twice; pass --keys renumber (keys='renumber') to number the "
                        "records 0..N-1", path=path, offset=offset)


def _keyed_heads(span: FileSpan, keys: Optional[Dict[int, str]],
                 numbered: List[int]) -> Iterator[Tuple[str, int]]:
    """``(key, offset)`` of each record head in the span: its key in the input's index (a
    record the index does not list raises: the index does not match the file, and numbering
    that record would mix kept keys with made-up ones), else, for an input without an index,
    the running number ``numbered[0]`` (advanced for every record)."""
    for offset in record_heads(span.path, span.start, span.end):
        key = keys.get(offset) if keys is not None else None
        if key is None and keys is not None:
            raise IndexFileError(
                f"the record at byte {offset} of {span.path} is in no entry of its index: the "
                f"index does not match the file (`recio verify {span.path}` says how); rebuild "
                f"it with `recio index {span.path} --force`, or give --keys renumber",
                path=span.path, offset=offset)
        yield (str(numbered[0]) if key is None else key), offset
        numbered[0] += 1


def _input_keys(files: List[str], idx_paths: Optional[Sequence[Optional[PathLike]]]
                ) -> Dict[str, Dict[int, str]]:
    """offset -> key of every input file that has an index (so resharding keeps the keys)."""
    out = {}
    for i, path in enumerate(files):
        given = idx_paths[i] if idx_paths is not None and i < len(idx_paths) else None
        idx = os.fspath(given) if given is not None else sibling_index_path(path)
        if given is not None or storage.exists(idx):
            index = open_checked_index(path, idx, key_type=str)
            out[path] = dict(zip(index.offsets.tolist(), index.key_list()))
    return out


def _copy_range(span: FileSpan, dst: BinaryIO, progress: Progress) -> int:
    """Copy ``span`` into ``dst``; the number of bytes copied."""
    copied = 0
    with storage.open_input(span.path) as src:
        if isinstance(src, RemoteFile):
            src.stream_end = span.end  # one streaming GET of the span
        src.seek(span.start)
        left = span.end - span.start
        while left > 0:
            data = src.read(min(_COPY_BLOCK, left))
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
