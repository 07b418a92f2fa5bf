"""The engine under :class:`~recio.image.batches.iterators.RecordBatchIter`: records in epoch order,
decoded by a thread pool straight into batch arrays.

:class:`BatchEngine` holds what the producer thread needs (the reader or the stream, the pool,
the recycled batch arrays) and no reference back to the iterator, so the iterator can be
garbage-collected while a batch is being made. It yields :class:`DataBatch` objects; a record
it cannot use is skipped with a :class:`~recio.errors.SkippedRecordWarning` and counted in
``skipped`` (an undecodable one as ``on_undecodable`` says: ``recio.image.undecodable``).
"""
from __future__ import annotations

import sys
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from itertools import islice
from typing import Any, Dict, Iterator, List, Optional, Tuple, Union

import numpy as np

from recio.errors import ImageError, RecordIOError
from recio.image.header import unpack
from recio.image.undecodable import skip_or_raise, undecodable, warn_skipped
from recio.records.cache.shard_cache import ShardCache
from recio.records.diagnose import explain_indexed_read, open_checked_index
from recio.records.index import EVERY_LINE, warn_repeated_keys
from recio.records.index_format import key_text
from recio.records.reader import RecordReader
from recio.records.shuffle import ShuffleBuffer
from recio.records.source import is_remote_source, resolve_source
from recio.records.split import InputSplit, SourceLayout, record_range
from recio.storage import StorageOptions

#: one record on its way to a batch: (name for messages, payload, its file, its byte offset)
Record = Tuple[str, bytes, str, int]


class DataBatch:
    """One batch: ``data`` (array), ``label`` float32 ``(batch, label_width)``, ``pad``, ``index``.

    ``pad`` is how many trailing samples are filler (borrowed from the start of the epoch with
    ``round_batch``, zeros otherwise) and should be ignored; ``index`` holds each sample's
    ``IRHeader.id``, as MXNet's ``DataBatch.index``.
    """

    __slots__ = ("data", "label", "pad", "index")

    def __init__(self, data: np.ndarray, label: np.ndarray, pad: int = 0,
                 index: Optional[np.ndarray] = None) -> None:
        self.data = data
        self.label = label
        self.pad = pad
        self.index = index

    def __repr__(self) -> str:
        return (f"DataBatch(data={self.data.dtype}{list(self.data.shape)}, "
                f"label={self.label.dtype}{list(self.label.shape)}, pad={self.pad})")

#: the name prefix of the decoding threads (close() on one of them must not wait for itself)
_DECODE_THREAD = "recio-decode"


@dataclass(frozen=True)
class EngineSettings:
    """What :class:`BatchEngine` needs of its iterator, checked and normalised by the iterator
    (``recio.image.batches.iterators.RecordBatchIter``, whose arguments these are): a value, so the
    engine holds no reference back to the iterator and a reader of the engine sees every
    setting it uses, typed."""

    #: one ``.rec`` (a str: path or URL; the only kind with ``path_imgidx``) or several (a
    #: list of str, streamed in order)
    path_imgrec: Any
    path_imgidx: Optional[str]
    #: decodes one record's image into one batch slot: ``sample_shape``, ``dtype``,
    #: ``params(rng, slots)``, ``__call__(image_bytes, slot_array, params_row)``
    augmenter: Any
    batch_size: int
    label_width: int
    shuffle: bool
    seed: int
    shuffle_buffer: int
    round_batch: bool
    carry_over: bool
    part_index: int
    num_parts: int
    labels: Optional[Dict[int, np.ndarray]]
    strict_labels: bool
    on_undecodable: str
    preprocess_threads: int
    prefetch_buffer: int
    storage_options: StorageOptions = None
    cache_dir: Any = None
    cache_limit: Union[int, str, None] = None


class BatchEngine:
    """The state the producer thread needs (no reference back to the iterator), made from
    the iterator's :class:`EngineSettings`."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.unpack = unpack
        self.path = settings.path_imgrec
        self.augment = settings.augmenter
        self.data_shape = (settings.batch_size,) + tuple(settings.augmenter.sample_shape)
        self.dtype = np.dtype(settings.augmenter.dtype)
        # batch arrays handed out before, reused once nobody else holds them (see _new_data)
        self.buffers: List[np.ndarray] = []
        self.max_buffers = settings.prefetch_buffer + 3
        self.recycle = sys.implementation.name == "cpython"
        self.skipped = 0
        self.reader = None
        self.keys: Optional[List[Any]] = None
        self.offsets: Optional[List[int]] = None
        cache = ShardCache.configured(settings.cache_dir, settings.cache_limit,
                                      self.settings.storage_options)
        self.layout: Optional[SourceLayout] = None
        if settings.path_imgidx is not None:
            self.reader = RecordReader(self.path, storage_options=self.settings.storage_options,
                                       shard_cache=cache)
            try:
                index = open_checked_index(self.path, settings.path_imgidx,
                                           rec_size=self.reader.size,
                                           storage_options=self.settings.storage_options,
                                           shard_cache=cache)
            except BaseException:
                self.reader.close()
                raise
            self.reader.source.use_index(index)  # a remote object: one GET a record
            self.index = index
            warn_repeated_keys(index, EVERY_LINE, self.path)
            keys, offsets = index.key_list(), index.offsets.tolist()
            lo, hi = record_range(len(keys), self.settings.part_index, self.settings.num_parts)
            self.keys, self.offsets = keys[lo:hi], offsets[lo:hi]
        elif cache is not None:  # found once, so a later epoch asks the store for nothing
            self.layout = SourceLayout(self.path, self.settings.storage_options, cache)
        elif not is_remote_source(self.path):  # a missing file, a FIFO or a device is named
            resolve_source(self.path)            # now, not at the first batch
        self.threads = settings.preprocess_threads  # started last: a bad .idx must not leak threads
        self.pool = ThreadPoolExecutor(max_workers=settings.preprocess_threads,
                                       thread_name_prefix=_DECODE_THREAD)

    def close(self) -> None:
        # a finalizer may run this on one of the pool's own threads, which cannot wait for itself
        own = threading.current_thread().name.startswith(_DECODE_THREAD)
        self.pool.shutdown(wait=not own, cancel_futures=True)
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    # -- records ---------------------------------------------------------------------------
    def records(self, sweep: int) -> Iterator[Record]:
        """``(name, payload, file, byte offset)`` of every record of the part (the name, file
        and offset for messages), in sweep ``sweep``'s order (a new order for each sweep when
        shuffling)."""
        settings = self.settings
        rng = np.random.default_rng([settings.seed, sweep, settings.part_index, 0])
        if self.keys is not None:
            order = rng.permutation(len(self.keys)) if settings.shuffle else range(len(self.keys))
            assert self.reader is not None and self.offsets is not None  # open with the keys
            keys, offsets, read_at = self.keys, self.offsets, self.reader.read_at
            for i in order:
                try:
                    record = read_at(offsets[i])
                except RecordIOError as exc:  # the index's fault or the .rec's: say which
                    raise explain_indexed_read(self.reader, self.index, offsets[i],
                                               exc) from None
                yield f"key {key_text(keys[i])}", record, self.path, offsets[i]
            return

        split = InputSplit(self.path, settings.part_index, settings.num_parts,
                           storage_options=settings.storage_options, _layout=self.layout)
        part = "" if settings.num_parts == 1 else \
            f" of part {settings.part_index}/{settings.num_parts}"
        stream: Iterator[Record] = (
            (f"record #{n}{part}", payload, path, offset)
            for n, (path, offset, payload) in enumerate(split.records_with_offsets()))
        if settings.shuffle:
            buffer: ShuffleBuffer[Record] = ShuffleBuffer(settings.shuffle_buffer, rng)
            stream = buffer.shuffle(stream)
        yield from stream

    # -- one record ------------------------------------------------------------------------
    def process(self, record: Record, data: np.ndarray, label: np.ndarray,
                index: np.ndarray, slot: int, params: np.ndarray
                ) -> Union[None, str, ImageError]:
        """Decode ``record`` into slot ``slot``; returns None, why its labels made it skipped,
        or the error naming it when its image is undecodable (a label that does not fit with
        ``strict_labels`` raises :class:`RecordIOError`)."""
        name, payload, path, offset = record
        img = b""
        try:
            header, img = self.unpack(payload)
            problem = self._label(name, header, label[slot])
            if problem is not None:
                return problem
            index[slot] = header.id
            self.augment(img, data[slot], params)
        except ImageError as exc:
            return undecodable(exc.message, path, name, offset)
        return None

    def _label(self, name: str, header: Any, row: np.ndarray) -> Optional[str]:
        """Fill ``row`` with the record's labels (or its ``path_imglist`` line's)."""
        lw = self.settings.label_width
        if self.settings.labels is not None:
            found = self.settings.labels.get(int(header.id))
            if found is None:
                raise RecordIOError(f"{name}: its image id {header.id} is not in path_imglist",
                                    path=describe_path(self.path))
            row[:] = found
            return None
        count = 1 if header.flag == 0 else header.flag
        if count != lw and (self.settings.strict_labels or count < lw):
            what = f"it has {count} label{'s' * (count != 1)} but label_width={lw}"
            if self.settings.strict_labels:
                raise RecordIOError(f"{name}: {what}; set label_width={count} or give labels "
                                    "with path_imglist (MXNet requires them to match)",
                                    path=describe_path(self.path))
            return what
        row[:] = header.label if header.flag == 0 else header.label[:lw]
        return None

    def _process_many(self, records: List[Record], data: np.ndarray,
                      label: np.ndarray, index: np.ndarray, first_slot: int,
                      params: np.ndarray) -> List[Union[None, str, ImageError]]:
        """``process`` for consecutive records into consecutive slots (one pool task)."""
        return [self.process(record, data, label, index, first_slot + j, params[j])
                for j, record in enumerate(records)]

    # -- batches ---------------------------------------------------------------------------
    def batches(self, sweep: int, offset: int = 0
                ) -> Iterator[Tuple[DataBatch, Optional[Tuple[int, int]], int]]:
        """All batches of one epoch, which starts at record ``offset`` of sweep ``sweep`` (runs
        in the ThreadedIter's producer thread). Each batch comes with where the next epoch
        starts when it is the epoch's padded last batch in ``carry_over`` mode (else None) and
        how many records of the sweep have been read after it."""
        settings = self.settings
        bs = settings.batch_size
        seed = [settings.seed, sweep, settings.part_index, 1] + ([offset] if offset else [])
        aug_rng = np.random.default_rng(seed)
        records = _Counted(islice(self.records(sweep), offset, None))
        first: List[Record] = []  # the epoch's first good records, for round_batch
        while True:
            data = self._new_data()
            label = np.zeros((bs, self.settings.label_width), dtype=np.float32)
            index = np.zeros(bs, dtype=np.uint64)
            filled = self._fill(records, data, label, index, 0, aug_rng, first)
            if filled == 0:
                return
            pad, resume = 0, None
            if filled < bs:
                pad = bs - filled
                if self.settings.round_batch and self.settings.carry_over:
                    # MXNet: fill from the next sweep, where the next epoch then continues
                    counted = _Counted(self.records(sweep + 1))
                    filled = self._fill(counted, data, label, index, filled, aug_rng, None)
                    resume = (sweep + 1, counted.count)
                elif self.settings.round_batch and first:
                    while filled < bs:  # borrow from the start of the epoch, cycling if needed
                        before = filled
                        filled = self._fill(iter(first[:bs - filled]), data, label, index, filled,
                                            aug_rng, None)
                        if filled == before:
                            break
                if filled < bs:
                    data[filled:] = 0
                    label[filled:] = 0
                    index[filled:] = 0
            yield DataBatch(data, label, pad, index), resume, offset + records.count
            if pad:
                return

    def remaining(self, position: int) -> Optional[int]:
        """Records of the sweep after the first ``position`` (None when streamed without an
        ``.idx``: unknown until read)."""
        return None if self.keys is None else max(0, len(self.keys) - position)

    def _new_data(self) -> np.ndarray:
        """An array for the next batch's data: a recycled one if the consumer let go of it.

        A float32 batch of 64x3x224x224 is 38 MB; a fresh one costs ~9,000 page faults. An
        array whose only references are ``self.buffers`` and this frame (reference count 3 with
        ``getrefcount``'s argument) cannot be seen by anyone else, so reusing it is safe; one
        still held by the user (or by a view, a tensor, a queued batch) is never touched.
        """
        if self.recycle:
            for arr in self.buffers:
                if sys.getrefcount(arr) == 3:
                    return arr
        arr = np.empty(self.data_shape, dtype=self.dtype)
        if self.recycle and len(self.buffers) < self.max_buffers:
            self.buffers.append(arr)
        return arr

    def _fill(self, records: Iterator[Record], data: np.ndarray, label: np.ndarray,
              index: np.ndarray, filled: int, aug_rng: np.random.Generator,
              first: Optional[List[Record]]) -> int:
        """Decode records into slots ``filled..`` until the batch is full or records run out."""
        bs = self.settings.batch_size
        while filled < bs:
            chunk = list(islice(records, bs - filled))
            if not chunk:
                break
            slots = range(filled, filled + len(chunk))
            params = self.augment.params(aug_rng, slots)
            # a few records per task: dynamic balance between threads, little task overhead,
            # and a short tail (the batch waits for its last task while the other threads idle)
            step = max(1, -(-len(chunk) // (8 * self.threads)))
            tasks = [self.pool.submit(self._process_many, chunk[i:i + step], data, label,
                                      index, filled + i, params[i:i + step])
                     for i in range(0, len(chunk), step)]
            results = [problem for task in tasks for problem in task.result()]
            w = filled
            for record, slot, problem in zip(chunk, slots, results):
                if isinstance(problem, ImageError):
                    skip_or_raise(problem, self.settings.on_undecodable)
                    self.skipped += 1
                    continue
                if problem is not None:  # its labels do not fit label_width
                    self.skipped += 1
                    warn_skipped(str(RecordIOError(f"{record[0]}: {problem}", record[2],
                                                   record[3])))
                    continue
                if slot != w:
                    data[w], label[w], index[w] = data[slot], label[slot], index[slot]
                if first is not None and len(first) < bs:
                    first.append(record)
                w += 1
            filled = w
        return filled


class _Counted:
    """An iterator that counts the items taken from it."""

    def __init__(self, items: Iterator[Any]) -> None:
        self.items, self.count = items, 0

    def __iter__(self) -> "_Counted":
        return self

    def __next__(self) -> Any:
        item = next(self.items)
        self.count += 1
        return item


def describe_path(path: Any) -> str:
    """The file(s) of ``path_imgrec`` (one path or a list), for messages."""
    return path if isinstance(path, str) else ";".join(path)
