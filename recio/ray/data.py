"""RecordIO as a Ray Data format: ``read_records`` and ``RecordDatasink``.

Reading: one read task per byte range of the ``.idx`` files (``read_index_range``: a line
belongs to the range it starts in), so one large ``.rec`` is read by many tasks at once; a task
reads its records in offset order (for a URL: coalesced ranged GETs of exactly their bytes).
Rows, in ``.idx`` order:

==========  ===============  =========================================================
column      type             what
==========  ===============  =========================================================
``key``     int64            the record's key in the ``.idx``
``flag``    uint32           the image header's flag (the number of labels, or 0)
``label``   float32          the first label
``labels``  list<float32>    every label (one when ``flag`` is 0)
``id``      uint64           the header's id (im2rec: the list index)
``id2``     uint64           the header's second id
``payload`` binary           the image bytes after the header (``decode=False``)
``image``   tensor (uint8)   the decoded image, HWC RGB (``decode=True``)
``path``    string           the ``.rec`` the row came from (``include_paths=True``)
==========  ===============  =========================================================

With ``header=False`` the rows are only ``key`` and ``payload``, the whole record (for
records that are not images).

Writing: ``ds.write_datasink(RecordDatasink("out/train"))`` writes one shard per write task,
staged under a name made of the task's number (a retried task rewrites the same files), and,
once every task succeeded, publishes the set (``commit_staged``: shards, combined index,
manifest last). Rows need ``payload`` (or ``image``, encoded as JPEG or PNG) and may carry
``key``, ``label``/``labels``, ``flag``, ``id``, ``id2``: what ``read_records`` gives writes
back byte for byte.
"""
from __future__ import annotations

import os
import tempfile
import uuid
from typing import Any, Dict, Iterable, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio import storage
from recio.errors import IndexFileError
from recio.image.pixels.codec import decode
from recio.image.pixels.encoding import encode
from recio.image.header import IRHeader, pack, unpack
from recio.image.packing.parts import describe_shard
from recio.optional import require
from recio.ray.engine import connect
from recio.records.atomic import check_outputs, publish_staged
from recio.records.index import open_index, read_index_range
from recio.records.index_format import sibling_index_path, write_index
from recio.records.reader import RecordReader
from recio.records.manifest import Shard, file_crc32, manifest_path
from recio.records.shards.commit import commit_staged, set_outputs
from recio.records.source import resolve_source
from recio.records.writer import IndexedRecordWriter
from recio.storage import StorageOptions

_ray = require("ray", feature="recio.ray (Ray Data)")
from ray.data import Dataset, Datasink, Datasource, ReadTask  # noqa: E402 - after require()
from ray.data.block import BlockAccessor, BlockMetadata  # noqa: E402 - as above

Paths = Union[str, "os.PathLike[str]", Sequence[Union[str, "os.PathLike[str]"]]]

#: the byte ranges of ``.idx`` files are cut no finer than this (about 30 lines)
_MIN_RANGE = 512


class RecordDatasource(Datasource):
    """The records of ``.rec`` files (with their ``.idx``) as a Ray Data source; see the
    module docstring. ``paths``: files, folders, globs, manifests, local or URLs."""

    def __init__(self, paths: Paths, *, decode: bool = False, header: bool = True,
                 include_paths: bool = False, storage_options: StorageOptions = None) -> None:
        super().__init__()
        self.decode, self.header, self.include_paths = decode, header, include_paths
        self.storage_options = storage_options
        sources = resolve_source(paths if isinstance(paths, (str, os.PathLike)) else list(paths),
                                 storage_options)
        self.files: List[Tuple[str, str, int, int]] = []  # rec, idx, rec bytes, idx bytes
        for source in sources:
            rec, idx = source.path, source.idx_path or sibling_index_path(source.path)
            if not storage.exists(idx, storage_options):
                raise IndexFileError(f"has no index {storage.basename(idx)} beside it; read "
                                     f"tasks are ranges of the .idx: write it once with "
                                     f"`recio index {rec}`", path=rec)
            rec_bytes = source.size if source.size is not None else \
                storage.size(rec, storage_options)
            self.files.append((rec, idx, rec_bytes, storage.size(idx, storage_options)))

    def get_name(self) -> str:
        return "RecordIO"

    def estimate_inmemory_data_size(self) -> Optional[int]:
        return sum(f[2] for f in self.files)

    def get_read_tasks(self, parallelism: int, per_task_row_limit: Optional[int] = None,
                       data_context: Any = None) -> List[ReadTask]:
        """About ``parallelism`` tasks, each a run of byte ranges of the ``.idx`` files (cut
        in proportion to their sizes)."""
        total = sum(f[3] for f in self.files)
        step = max(_MIN_RANGE, -(-total // max(parallelism, 1)))
        tasks: List[ReadTask] = []
        pieces: List[Tuple[int, int, int]] = []
        budget = step
        for number, (rec, idx, rec_bytes, idx_bytes) in enumerate(self.files):
            start = 0
            while start < idx_bytes:
                end = min(idx_bytes, start + budget)
                pieces.append((number, start, end))
                budget -= end - start
                start = end
                if budget <= 0:
                    tasks.append(self._task(pieces, per_task_row_limit))
                    pieces, budget = [], step
        if pieces:
            tasks.append(self._task(pieces, per_task_row_limit))
        return tasks

    def _task(self, pieces: List[Tuple[int, int, int]], limit: Optional[int]) -> ReadTask:
        files = [self.files[n] for n, _, _ in pieces]
        size = sum(int(f[2] * (e - s) / max(f[3], 1)) for f, (_, s, e) in zip(files, pieces))
        # a list: Ray 2.51 (the last for Python 3.9) declares Optional[List[str]], newer ones
        # Optional[Tuple[str, ...]] and turn a list into a tuple; Any type-checks with both
        input_files: Any = list(dict.fromkeys(f[0] for f in files))
        metadata = BlockMetadata(num_rows=None, size_bytes=size, exec_stats=None,
                                 input_files=input_files)
        ranges = [(f[0], f[1], f[2], s, e) for f, (_, s, e) in zip(files, pieces)]
        options = (self.decode, self.header, self.include_paths, self.storage_options)
        return ReadTask(lambda: _read_ranges(ranges, *options), metadata,
                        per_task_row_limit=limit)


def _read_ranges(ranges: List[Tuple[str, str, int, int, int]], decode_images: bool,
                 header: bool, include_paths: bool,
                 storage_options: StorageOptions) -> Iterator[Any]:
    for rec, idx, rec_bytes, start, end in ranges:
        index, _ = read_index_range(idx, start, end, rec_size=rec_bytes,
                                    storage_options=storage_options)
        if not len(index):
            continue
        keys = index.key_array()
        with RecordReader(rec, storage_options=storage_options) as reader:
            reader.source.use_index(index)
            order = np.argsort(index.offsets, kind="stable")  # read in file order
            records: List[Any] = [None] * len(keys)
            for i, record in zip(order.tolist(), reader.read_many_at(index.offsets[order])):
                records[i] = record
        yield _block(keys, records, rec, decode_images, header, include_paths)


def _block(keys: np.ndarray, records: List[bytes], rec: str, decode_images: bool,
           header: bool, include_paths: bool) -> Any:
    batch: Dict[str, Any] = {"key": np.asarray(keys, np.int64)}
    if not header:
        batch["payload"] = np.array(records, dtype=object)
    else:
        heads, payloads = zip(*(unpack(r) for r in records))
        labels = [np.atleast_1d(np.asarray(h.label, np.float32)) for h in heads]
        batch["flag"] = np.array([h.flag for h in heads], np.uint32)
        batch["label"] = np.array([lab[0] if lab.size else np.nan for lab in labels], np.float32)
        batch["labels"] = labels
        batch["id"] = np.array([h.id for h in heads], np.uint64)
        batch["id2"] = np.array([h.id2 for h in heads], np.uint64)
        if decode_images:
            batch["image"] = [decode(p, 1, name=f"{rec} key {k}")
                              for p, k in zip(payloads, keys.tolist())]
        else:
            batch["payload"] = np.array(payloads, dtype=object)
    if include_paths:
        batch["path"] = np.array([rec] * len(records), dtype=object)
    return _to_arrow(batch)


def _to_arrow(batch: Dict[str, Any]) -> Any:
    """A pyarrow table: lists of labels as ``list<float32>``, images as Ray's tensor type."""
    import pyarrow as pa

    columns: Dict[str, Any] = {}
    for name, values in batch.items():
        if name == "labels":
            columns[name] = pa.array([v.tolist() for v in values], pa.list_(pa.float32()))
        elif name == "payload":
            columns[name] = pa.array(list(values), pa.binary())
        elif name == "path":
            columns[name] = pa.array(list(values), pa.string())
        elif name == "image":
            columns[name] = BlockAccessor.batch_to_arrow_block({name: values}).column(name)
        else:
            columns[name] = pa.array(values)
    return pa.table(columns)


def read_records(paths: Paths, *, decode: bool = False, header: bool = True,
                 include_paths: bool = False, storage_options: StorageOptions = None,
                 override_num_blocks: Optional[int] = None, concurrency: Optional[int] = None,
                 ray_remote_args: Optional[Dict[str, Any]] = None) -> Dataset:
    """A ``ray.data.Dataset`` of the records of ``paths`` (``.rec`` files with their ``.idx``,
    folders, globs or shard-set manifests; local or URLs): one row per record, columns in the
    module docstring. ``decode=True`` gives decoded images (column ``image``) instead of
    ``payload``; ``header=False`` gives ``key`` and the raw record only. The other arguments
    are ``ray.data.read_datasource``'s (as for ``ray.data.read_tfrecords``)."""
    ray = connect()
    source = RecordDatasource(paths, decode=decode, header=header, include_paths=include_paths,
                              storage_options=storage_options)
    return ray.data.read_datasource(source, override_num_blocks=override_num_blocks,
                                    concurrency=concurrency,
                                    ray_remote_args=ray_remote_args or {})


# -- writing --------------------------------------------------------------------------------------
class RecordDatasink(Datasink):
    """Write a Ray Dataset as the shard set ``prefix`` (``PREFIX-NNNNN.rec``/``.idx``,
    ``PREFIX.combined.idx``, ``PREFIX.manifest.json``), one shard per write task.

    Columns read from each row: ``payload`` (bytes; or ``image``, an array encoded with
    ``encoding`` and ``quality``), ``key`` (else the row's position in the dataset),
    ``labels`` or ``label`` (a number or a sequence), ``flag`` (else the number of labels when
    there are several, or 0), ``id`` (else the ``key`` column, as im2rec does, or 0), ``id2``
    (else 0). With
    ``header=False`` the payload is the whole record. Existing outputs are refused unless
    ``force``; ``checksums`` adds per-record CRC-32 sidecars. ``min_rows_per_shard`` asks Ray
    for write tasks of at least that many rows."""

    def __init__(self, prefix: str, *, header: bool = True, encoding: str = ".jpg",
                 quality: int = 95, checksums: bool = False, force: bool = False,
                 min_rows_per_shard: Optional[int] = None,
                 storage_options: StorageOptions = None) -> None:
        self.prefix = storage.absolute(prefix)
        self.header, self.encoding, self.quality = header, encoding, quality
        self.checksums, self.force, self.storage_options = checksums, force, storage_options
        self._min_rows = min_rows_per_shard
        self.staging = storage.join(storage.dirname(self.prefix),
                                    f".recio-write-{uuid.uuid4().hex[:12]}")
        self.manifest_path = manifest_path(self.prefix)

    def get_name(self) -> str:
        return "RecordIO"

    @property
    def min_rows_per_write(self) -> Optional[int]:
        return self._min_rows

    def on_write_start(self, schema: Any = None) -> None:
        if not storage.is_url(self.prefix):
            os.makedirs(storage.dirname(self.prefix), exist_ok=True)
        if not self.force:
            check_outputs(set_outputs(self.prefix, self.storage_options),
                          storage_options=self.storage_options)
        if not storage.is_url(self.staging):  # the folder is made, as Ray's file sinks do
            os.makedirs(self.staging, exist_ok=True)

    def write(self, blocks: Iterable[Any], ctx: Any) -> Optional[Dict[str, Any]]:
        """One write task: its rows into ``STAGING/part-NNNNNN.rec``/``.idx`` (NNNNNN: the
        task's number, the same when Ray runs it again); returns the staged shard."""
        remote = storage.is_url(self.staging)
        folder = tempfile.mkdtemp(prefix=".recio-part-", dir=os.environ.get("RECIO_STAGING_DIR")
                                  or None) if remote else storage.local_path(self.staging)
        stem = os.path.join(folder, f"part-{ctx.task_idx:06d}")
        rows = 0
        positional = False
        try:
            with IndexedRecordWriter(stem + ".rec", stem + ".idx") as writer:
                for block in blocks:
                    batch = BlockAccessor.for_block(block).to_batch_format("numpy")
                    keys, records = self._records(batch, rows)
                    positional = positional or "key" not in batch
                    for key, record in zip(keys, records):
                        writer.write(key, record)
                    rows += len(keys)
            if not rows:
                for suffix in (".rec", ".idx"):
                    os.unlink(stem + suffix)
                return None
            shard = describe_shard(stem + ".rec", stem + ".idx", self.checksums)
            if remote:
                for role, path, _, _ in shard.files():
                    url = storage.join(self.staging, os.path.basename(path))
                    storage.upload(path, url, self.storage_options)
                    setattr(shard, role, url)
            return {"task": ctx.task_idx, "rows": rows, "shard": shard,
                    "positional": positional}
        finally:
            if remote:
                storage.remove_tree(folder)

    def _records(self, batch: Dict[str, np.ndarray], before: int) -> Tuple[List[int], List[bytes]]:
        n = len(next(iter(batch.values())))
        keys = ([int(k) for k in batch["key"]] if "key" in batch
                else list(range(before, before + n)))
        if "payload" in batch:
            payloads = [bytes(p) for p in batch["payload"]]
        elif "image" in batch:
            payloads = [encode(np.asarray(img), self.encoding, self.quality)
                        for img in batch["image"]]
        else:
            raise ValueError("RecordDatasink needs a 'payload' (bytes) or 'image' column; the "
                             f"dataset has {sorted(batch)}")
        if not self.header:
            return keys, payloads
        records = []
        for i in range(n):
            labels = _labels(batch, i)
            flag = int(batch["flag"][i]) if "flag" in batch else (
                len(labels) if len(labels) > 1 else 0)
            label: Any = labels if flag else (labels[0] if len(labels) else 0.0)
            record_id = int(batch["id"][i]) if "id" in batch else (
                keys[i] if "key" in batch else 0)
            id2 = int(batch["id2"][i]) if "id2" in batch else 0
            records.append(pack(IRHeader(flag, label, record_id, id2), payloads[i]))
        return keys, records

    def on_write_complete(self, write_result: Any) -> None:
        """Every task succeeded: publish the shards in task order (renumbered from 0), then
        the combined index and the manifest."""
        try:
            returns = [r for r in write_result.write_returns if r]
            returns.sort(key=lambda r: r["task"])
            staged: List[Shard] = []
            base = 0
            for entry in returns:
                shard = entry["shard"]
                if entry["positional"] and base:  # keys so far were positions within the task
                    shard = self._shift_keys(shard, base)
                staged.append(shard)
                base += entry["rows"]
            made_by = {"tool": "recio.ray.RecordDatasink", "rows": base}
            commit_staged(self.prefix, staged, made_by, checksums=self.checksums,
                          force=self.force, storage_options=self.storage_options)
        finally:
            storage.remove_tree(self.staging, self.storage_options)

    def _shift_keys(self, shard: Shard, base: int) -> Shard:
        """Rewrite a staged shard's ``.idx`` with its keys moved up by ``base`` (rows before
        it in the dataset), for a dataset without a ``key`` column."""
        with storage.local_copy(shard.idx, self.storage_options) as local:
            index = open_index(local, key_type=int, cache=False)
            keys, offsets = index.key_array() + base, index.offsets
        folder = tempfile.mkdtemp(prefix=".recio-keys-")
        try:
            new_idx = os.path.join(folder, os.path.basename(shard.idx))
            write_index(new_idx, keys.tolist(), offsets.tolist())
            shard.idx_bytes, shard.idx_crc32 = file_crc32(new_idx)
            shard.min_key, shard.max_key = shard.min_key + base, shard.max_key + base
            publish_staged([(new_idx, shard.idx)], self.storage_options)
            return shard
        finally:
            storage.remove_tree(folder)

    def on_write_failed(self, error: Exception) -> None:
        storage.remove_tree(self.staging, self.storage_options)


def _labels(batch: Dict[str, np.ndarray], i: int) -> List[float]:
    if "labels" in batch:
        return [float(x) for x in np.atleast_1d(np.asarray(batch["labels"][i], np.float32))]
    if "label" in batch:
        return [float(x) for x in np.atleast_1d(np.asarray(batch["label"][i], np.float32))]
    return []
