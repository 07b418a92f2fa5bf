"""PyTorch datasets over ``.rec`` files: ``RecordDataset`` (map-style), ``RecordIterableDataset``.

Needs ``pip install 'recio[torch]'``; this module is only imported when used (``recio.torch``).

- ``RecordDataset``: random access through the ``.idx`` (or a scan when there is none). Each
  process opens the ``.rec`` itself on first use (the process id is checked, as MXNet's
  ``MXRecordIO`` does), so a dataset created in the main process is safe in ``DataLoader``
  workers, forked or spawned; reads are by position on a memory map, never via a shared
  file pointer.
- ``RecordIterableDataset``: streams one ``InputSplit`` part per reader: the process's part
  (``part_index``/``num_parts``, by default the ``torch.distributed`` rank and world size) is
  split again among its DataLoader workers, so no two workers (on any rank) read the same
  record.
- ``RecordSampler``: a ``DistributedSampler`` for ``RecordDataset`` whose order is a pure
  function of ``(seed, epoch)``.

Exact mid-epoch resume: ``RecordSampler`` and ``RecordIterableDataset`` have ``state_dict()`` /
``load_state_dict()`` as torchdata's ``StatefulDataLoader`` expects (``pip install torchdata``;
recio itself does not import it), so ``loader.state_dict()`` saves their position and
``loader.load_state_dict()`` continues exactly (same ranks and workers). A job restarted with
another number of ranks or DataLoader workers loads what every rank saved into the sampler or
dataset (``load_state_dict(saved)``, or ``resume_state(saved)`` for one merged dict) and builds a
new loader: the records not delivered before the stop come once each. States are small (their
size does not grow with the position) and a restore never replays.

Both datasets return ``(image, label)``: the image decoded as chosen by ``decode``
(``"tensor"``: uint8 CHW, ``"numpy"``: uint8 HWC, ``"pil"``: a PIL image for torchvision
transforms, ``"raw"``: the undecoded bytes), then ``transform``; the label as a float32 tensor
(scalar, or the vector of a multi-label record), then ``target_transform``. Images decode through
``recio.image.codec.decode``: MXNet's pixels (``mode="L"`` is OpenCV's greyscale), simplejpeg
for JPEGs when installed (``decoder="auto"``; ``"pillow"`` forces Pillow), and the
decompression-bomb guard (``max_pixels``).
"""
from __future__ import annotations

import os
import time
import warnings
import zlib
from collections import OrderedDict
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Mapping, Optional, Sequence,
                    Tuple, Union)

import numpy as np
from PIL import Image

from recio import storage
from recio.errors import ImageError, RecordIOError
from recio.image.codec import DEFAULT_MAX_PIXELS, check_decoder, decode as decode_image
from recio.image.header import unpack
from recio.image.imageiter import RRC_AREA, RRC_RATIO, Augmenter
from recio.optional import require
from recio.records.cache import (PREFETCH_THREADS, READ_AHEAD, RECHECK_SECONDS, Prefetch,
                                 ShardCache)
from recio.records.diagnose import explain_indexed_read, open_checked_index
from recio.records.index import BY_KEY, EVERY_LINE, key_text, warn_repeated_keys
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.shuffle import ShuffleBuffer
from recio.records.source import resolve_source
from recio.records.split import InputSplit, SourceLayout, load_record_offsets
from recio.storage import StorageOptions
from recio.torch import batching as _batching
from recio.torch.batching import collate_encoded, decode_on_device
from recio.torch import resume as _rs
from recio.torch.resume import resume_state

torch = require("torch", feature="recio.torch")
Dataset = torch.utils.data.Dataset
Sampler = torch.utils.data.Sampler
IterableDataset = torch.utils.data.IterableDataset
get_worker_info = torch.utils.data.get_worker_info

PathLike = Union[str, "os.PathLike[str]"]
_DECODES = ("tensor", "numpy", "pil", "raw")
#: files a RecordDataset keeps open in a process (a reader holds two descriptors: its file
#: and its map's): a set of more shards reopens the least recently used
_MOST_OPEN = 256


class _Decoder:
    """Turns a record payload into ``(image, label)`` (picklable, shared by both datasets)."""

    def __init__(self, decode: str, mode: str, transform: Optional[Callable],
                 target_transform: Optional[Callable], decoder: str = "auto",
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        if decode not in _DECODES:
            raise ValueError(f"decode must be one of {_DECODES}, got {decode!r}")
        if mode not in ("RGB", "L"):
            raise ValueError(f"mode must be 'RGB' or 'L', got {mode!r}")
        check_decoder(decoder)
        self.decode, self.mode = decode, mode
        self.decoder, self.max_pixels = decoder, int(max_pixels)
        self.transform, self.target_transform = transform, target_transform

    def __call__(self, payload: bytes, path: Optional[str], name: str,
                 offset: Optional[int] = None, keyed: bool = True) -> Tuple[Any, Any]:
        try:
            header, img_bytes = unpack(payload)
        except RecordIOError as exc:
            raise RecordIOError(f"{name}: {exc.message}", path, offset) from None
        image: Any = img_bytes
        try:
            if self.decode != "raw":
                image = self._image(img_bytes)
            if self.transform is not None:
                image = self.transform(image)  # ImageAugment may decode the raw bytes itself
        except ImageError as exc:  # say which record: one without a key by its image id too
            who = name if keyed else f"{name} (image id {header.id})"
            raise ImageError(f"{who}: {exc.message}", path, offset) from None
        return image, self.label(header)

    def label(self, header: Any) -> Any:
        """The sample's label: ``target_transform``'s value, else a float32 tensor (a scalar,
        or the record's label vector)."""
        if self.target_transform is not None:
            return self.target_transform(header.label)
        if header.flag == 0:
            return torch.tensor(header.label, dtype=torch.float32)
        return torch.from_numpy(np.array(header.label, dtype=np.float32))

    def batch_augment(self) -> Optional["ImageAugment"]:
        """The ``ImageAugment`` that can decode a whole batch at once (``decode="raw"`` and an
        ``ImageAugment`` transform), else None."""
        if self.decode == "raw" and isinstance(self.transform, ImageAugment):
            return self.transform
        return None

    def batch(self, payloads: Sequence[Tuple[bytes, Optional[str], str, Optional[int]]],
              augment: "ImageAugment") -> List[Any]:
        """Decode and augment ``(payload, path, name, offset)`` records into one batch array
        (``recio.torch.batching``): the samples ``DataLoader`` collates without a copy."""
        n = len(payloads)
        buf = _batching.pool().take((n,) + augment.shape, augment.dtype)
        params = augment.draw(n)
        labels: List[Any] = []
        run = augment.augmenter
        for j, (payload, path, name, offset) in enumerate(payloads):
            try:
                header, img_bytes = unpack(payload)
            except RecordIOError as exc:
                raise RecordIOError(f"{name}: {exc.message}", path, offset) from None
            try:
                run(img_bytes, buf.array[j], params[j])
            except ImageError as exc:
                raise ImageError(f"{name}: {exc.message}", path, offset) from None
            labels.append(self.label(header))
        collated = _batching.collate_labels(labels)
        return _batching.samples(buf, collated, labels)

    def _image(self, img_bytes: bytes) -> Any:
        """The decoded image as ``decode`` asks: a PIL image, an HWC array or a CHW tensor."""
        arr = decode_image(img_bytes, 1 if self.mode == "RGB" else 0,
                           max_pixels=self.max_pixels, decoder=self.decoder)
        if self.decode == "pil":
            return Image.fromarray(arr)
        if arr.ndim == 2:
            arr = arr[:, :, None]
        if self.decode == "numpy":
            return arr
        return torch.from_numpy(np.ascontiguousarray(arr.transpose(2, 0, 1)))


class RecordDataset(Dataset):
    """Map-style dataset over an indexed image ``.rec``: ``ds[i]`` is the i-th record's sample.

    ``idx_path`` defaults to the ``.idx`` beside the ``.rec`` (scanned when missing, keys
    ``0..n-1``). ``rec_path`` may also be a list of ``.rec`` files, a glob, or a shard set's
    manifest (``PREFIX.manifest.json``): the records of every file, in order (each file's keys
    from the ``.idx`` beside it). ``keys`` restricts and orders the records
    (e.g. ``range(1, n + 1)`` to leave out the header records of a face-recognition dataset).
    Paths may be URLs (``s3://...``, read through fsspec with ``storage_options``): each record
    is one ranged GET, or, with ``cache_dir`` (or ``RECIO_CACHE_DIR``), whole files are kept
    in that local folder, at most ``cache_limit`` bytes (``recio.records.cache``), so a record
    is read from local disk; a ``RecordSampler`` over the dataset downloads the files in the
    order its records come first. ``ds[i]`` reads line i of the index: an index whose keys
    repeat gives every line and a ``DuplicateKeyWarning`` naming the key (with ``keys``, a
    repeated key reads its last line, as MXNet does). Undecodable images raise ``ImageError``
    naming the key. Safe in ``DataLoader(num_workers > 0)``: files reopen in each process,
    which share the cache.
    To resume exactly mid-epoch, sample it with ``RecordSampler``, which holds the position
    (``StatefulDataLoader(ds, sampler=RecordSampler(ds), ...)``).
    """

    def __init__(self, rec_path: Union[PathLike, Sequence[PathLike]],
                 idx_path: Optional[PathLike] = None,
                 keys: Optional[Sequence[Any]] = None, transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: str = "tensor",
                 mode: str = "RGB", key_type: Callable[[str], Any] = int,
                 decoder: str = "auto", max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None) -> None:
        several = isinstance(rec_path, (list, tuple))
        self.rec_path = ";".join(map(os.fspath, rec_path)) if several else os.fspath(rec_path)
        self.storage_options = storage_options
        cache = self._cache = ShardCache.configured(cache_dir, cache_limit, storage_options)
        # a path, a list, a glob, a folder or a manifest, as InputSplit takes them
        sources = resolve_source(rec_path, storage_options, cache)
        self._files = [f.path for f in sources]
        if idx_path is not None and any(f.manifest for f in sources):
            raise ValueError("idx_path goes with one .rec; a manifest names its shards' indexes")
        if idx_path is not None and (several or self._files != [self.rec_path]):
            raise ValueError("idx_path goes with one .rec; several files use the .idx beside each")
        # arrays (or the memory-mapped index cache), so forked DataLoader workers share them
        # instead of touching millions of Python objects; a manifest's shards have their
        # indexes, which must exist
        indexes = [open_checked_index(f.path, f.idx_path, key_type, rec_size=f.size,
                                      storage_options=storage_options, shard_cache=cache)
                   if f.manifest else
                   index_for(f.path, idx_path, key_type, storage_options=storage_options,
                             shard_cache=cache) for f in sources]
        self._indexes = indexes
        self.idx_path = indexes[0].path if len(indexes) == 1 else None
        if len(indexes) == 1:
            self._init_one(indexes[0], keys)
        else:
            self._init_shards(indexes, keys)
        self._decoder = _Decoder(decode, mode, transform, target_transform, decoder, max_pixels)
        self._readers: OrderedDict = OrderedDict()
        self._pid: Optional[int] = None
        self._prefetch: Optional[Prefetch] = None
        self._recheck = self._recheck_start()

    def _recheck_start(self) -> Optional[float]:
        """When to look for evicted copies first: only a cache with a limit evicts."""
        return None if self._cache is None or self._cache.limit is None else 0.0

    def _drop_evicted(self) -> None:
        """Close the readers whose cache copy was evicted (a later read downloads it again), so
        that their disk space is freed: a worker would otherwise keep every shard it read."""
        for n in [n for n, reader in self._readers.items() if reader.evicted()]:
            self._readers.pop(n).close()
        self._recheck = time.monotonic() + RECHECK_SECONDS

    def _init_one(self, index: Any, keys: Optional[Sequence[Any]]) -> None:
        self._shard: Optional[np.ndarray] = None  # one file: no shard numbers
        if keys is None:  # every line of the index, a repeated key too (said by a warning)
            warn_repeated_keys(index, EVERY_LINE, self._files[0], stacklevel=5)
            self.keys: Sequence[Any] = index.keys_view()
            self.offsets = index.offsets
        else:
            warn_repeated_keys(index, BY_KEY, self._files[0], stacklevel=5)
            self.keys = [k.item() if isinstance(k, np.generic) else k for k in keys]
            missing = [k for k in self.keys if k not in index]
            if missing:
                raise KeyError(f"{len(missing)} keys are not in the index "
                               f"{self.idx_path or self.rec_path}, e.g. {missing[:5]}")
            self.offsets = np.asarray(index.offsets_of(self.keys), dtype=np.int64)

    def _init_shards(self, indexes: Sequence[Any], keys: Optional[Sequence[Any]]) -> None:
        """Several shards: every record as (shard number, offset), keys across the set."""
        for n, index in enumerate(indexes):
            warn_repeated_keys(index, EVERY_LINE if keys is None else BY_KEY, self._files[n],
                               stacklevel=5)
        shard = np.concatenate([np.full(len(ix), n, np.int32) for n, ix in enumerate(indexes)])
        offsets = np.concatenate([ix.offsets for ix in indexes]).astype(np.int64)
        all_keys = [k for ix in indexes for k in ix.key_list()]
        if keys is None:
            self.keys, self._shard, self.offsets = all_keys, shard, offsets
            return
        where = {k: i for i, k in enumerate(all_keys)}  # a repeated key: the last one
        self.keys = [k.item() if isinstance(k, np.generic) else k for k in keys]
        missing = [k for k in self.keys if k not in where]
        if missing:
            raise KeyError(f"{len(missing)} keys are not in the shard set {self.rec_path}, "
                           f"e.g. {missing[:5]}")
        chosen = np.asarray([where[k] for k in self.keys], np.int64)
        self._shard, self.offsets = shard[chosen], offsets[chosen]

    def _open(self, n: int = 0) -> Any:
        """The reader of file ``n`` in this process: at most ``_MOST_OPEN`` stay open (each
        holds two file descriptors), the least recently used is closed for another."""
        if self._pid != os.getpid():
            self._readers, self._pid = OrderedDict(), os.getpid()  # new fds and maps here
        if self._recheck is not None and time.monotonic() >= self._recheck:
            self._drop_evicted()
        reader = self._readers.get(n)
        if reader is None:
            if len(self._readers) >= _MOST_OPEN:
                self._readers.popitem(last=False)[1].close()
            reader = self._readers[n] = RecordReader(self._files[n],
                                                     storage_options=self.storage_options,
                                                     shard_cache=self._cache)
            reader.source.use_index(self._indexes[n])  # a remote file: one GET a record
        elif len(self._readers) > 1:
            self._readers.move_to_end(n)
        return reader

    def _locate(self, i: int) -> Tuple[int, int]:
        return (0 if self._shard is None else int(self._shard[i])), int(self.offsets[i])

    def __len__(self) -> int:
        return len(self.keys)

    def read_record(self, i: int) -> bytes:
        """The raw payload of the i-th record (no decoding)."""
        n, offset = self._locate(i)
        reader = self._open(n)
        try:
            return reader.read_at(offset)
        except RecordIOError as exc:  # the index's fault or the .rec's: say which
            raise explain_indexed_read(reader, self._indexes[n], offset, exc) from None

    def __getitem__(self, i: int) -> Tuple[Any, Any]:
        i = self._checked(i)
        n, offset = self._locate(i)
        return self._decoder(self.read_record(i), self._files[n], f"key {key_text(self.keys[i])}",
                             offset)

    def __getitems__(self, indices: Sequence[int]) -> List[Any]:
        """The samples of ``indices`` (``DataLoader`` calls this with a batch's indices). With an
        ``ImageAugment`` transform on raw records the whole batch is decoded into one array and
        collated without a copy (``recio.torch.batching``); otherwise ``[ds[i] for i in
        indices]``."""
        augment = self._decoder.batch_augment()
        if augment is None:
            return [self[i] for i in indices]
        records = []
        for i in indices:
            i = self._checked(i)
            n, offset = self._locate(i)
            records.append((self.read_record(i), self._files[n], f"key {key_text(self.keys[i])}",
                            offset))
        return self._decoder.batch(records, augment)

    def _checked(self, i: Any) -> int:
        i = int(i)  # NumPy / torch integer indices work too
        if i < 0:
            i += len(self.keys)
        if not 0 <= i < len(self.keys):
            raise IndexError(f"index {i} out of range for {len(self.keys)} records")
        return i

    def close(self) -> None:
        """Close the ``.rec`` files this process has open for the dataset (a later read opens
        them again): on Windows a file held open cannot be replaced or deleted. The indexes
        stay (a large one is mapped from its sidecar cache until the dataset is gone)."""
        for reader in self._readers.values():
            reader.close()
        self._readers = OrderedDict()

    def __enter__(self) -> "RecordDataset":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_readers"], state["_pid"] = OrderedDict(), None  # reopened by each worker
        state["_prefetch"], state["_recheck"] = None, self._recheck_start()
        return state

    def prefetch(self, positions: Iterable[np.ndarray]) -> Optional[Prefetch]:
        """With a cache, start downloading the files of the records at ``positions`` (chunks of
        ``ds[i]`` indices, in the order they will be read), each file in the order its first
        record comes, in the background, as far as the cache's limit allows; a prefetch this
        dataset started before is stopped. ``RecordSampler`` calls it at the start of each
        pass. Returns the running ``recio.records.cache.Prefetch`` (None without a cache)."""
        if self._cache is None or not any(storage.is_url(f) for f in self._files):
            return None
        seen = np.zeros(len(self._files), dtype=bool)
        order: List[int] = []
        for chunk in positions:
            files = (np.zeros(len(chunk), np.int64) if self._shard is None
                     else self._shard[np.asarray(chunk, dtype=np.int64)])
            found, first = np.unique(files, return_index=True)
            new = ~seen[found]
            order += found[new][np.argsort(first[new], kind="stable")].tolist()
            seen[found] = True
            if seen.all():
                break
        if self._prefetch is not None:
            self._prefetch.stop()
        self._prefetch = self._cache.prefetch([self._files[n] for n in order],
                                              threads=PREFETCH_THREADS)
        return self._prefetch

    def fingerprint(self) -> str:
        """A short digest of which records ``ds[0..n-1]`` are (the files' names, the record
        count and a sample of the offsets): a ``RecordSampler`` state saved for other data is
        refused on load."""
        n = len(self.keys)
        step = max(1, n // 1024)
        sample = np.asarray(self.offsets[::step], dtype=np.int64).tobytes()
        if self._shard is not None:
            sample += np.asarray(self._shard[::step], dtype=np.int64).tobytes()
        names = "\n".join(os.path.basename(f) for f in self._files)
        return f"{zlib.crc32(sample, zlib.crc32(f'{names}|{n}'.encode())):08x}"


def _world(num_replicas: Optional[int], rank: Optional[int]) -> Tuple[int, int]:
    """``(num_replicas, rank)``: as given, else from ``torch.distributed`` when initialised,
    else ``(1, 0)``."""
    dist = torch.distributed
    ready = dist.is_available() and dist.is_initialized()
    if num_replicas is None:
        num_replicas = dist.get_world_size() if ready else 1
    if rank is None:
        rank = dist.get_rank() if ready else 0
    num_replicas, rank = int(num_replicas), int(rank)
    if num_replicas < 1:
        raise ValueError(f"num_replicas must be at least 1, got {num_replicas}")
    if not 0 <= rank < num_replicas:
        raise ValueError(f"rank must be in [0, num_replicas={num_replicas}), got {rank}")
    return num_replicas, rank


class _Run:
    """One pass of a RecordSampler: the base it starts from and how far this rank got."""

    __slots__ = ("epoch", "cursor", "skip", "start", "yielded", "active")

    def __init__(self, epoch: int, cursor: int = 0, skip: Sequence[int] = (),
                 yielded: int = 0) -> None:
        self.epoch, self.cursor, self.skip = int(epoch), int(cursor), [int(v) for v in skip]
        self.start = self.yielded = int(yielded)
        self.active = False


class RecordSampler(Sampler):
    """A ``DistributedSampler`` for ``RecordDataset`` that resumes exactly, mid-epoch.

    ``RecordSampler(dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
    drop_last=False, pad=False)``: rank ``rank`` of ``num_replicas`` (default: the
    ``torch.distributed`` rank and world size when initialised, else 0 of 1) gets every
    ``num_replicas``-th index of the epoch's order, a permutation that depends only on
    ``(seed, epoch)`` (NumPy PCG64; call ``set_epoch`` each epoch). ``data_source`` is the
    dataset (its length is used; a ``RecordDataset`` is also fingerprinted, and one reading
    URLs through a cache is told each pass's order, so it downloads the shards in the order
    their records come) or a record count.

    End of the epoch: by default (``pad=False``) every record is handed out exactly once, also
    across a resume into another number of ranks, and ranks may get one index fewer (DDP then
    needs ``join()`` or ``drop_last`` on the loader). ``pad=True`` is ``DistributedSampler``'s
    rule: every rank gets the same count, so up to ``num_replicas - 1`` records are handed out
    a second time at the end of the epoch (after a resume, at the end of the resumed part);
    ``drop_last=True`` instead leaves out up to ``num_replicas - 1`` records. With one rank,
    or a count that ``num_replicas`` divides, all three give every record exactly once.

    Resume (the ``Stateful`` protocol of torchdata's ``StatefulDataLoader``, which saves and
    restores it as part of ``loader.state_dict()``): ``state_dict()`` is a small dict (epoch,
    seed, the base ``cursor``/``skip`` of positions delivered before this run, this rank's
    ``yielded`` count); its size does not grow with the position, and ``load_state_dict``
    rebuilds the epoch's order and continues at the next unseen index without replaying.
    ``load_state_dict`` takes this rank's own state, any rank's (ranks in lockstep, as DDP),
    every rank's (a list), a ``StatefulDataLoader`` state or ``recio.torch.resume_state()``'s
    merged state, and adapts to another ``num_replicas``: every new rank loads the same saved
    state and the ranks together hand out each remaining record once (padding aside). The
    state counts what the loader *delivered* only through ``StatefulDataLoader`` (or a plain
    ``DataLoader`` with ``num_workers=0``): a plain loader with workers draws indices ahead.
    """

    def __init__(self, data_source: Any, num_replicas: Optional[int] = None,
                 rank: Optional[int] = None, shuffle: bool = True, seed: int = 0,
                 drop_last: bool = False, pad: bool = False) -> None:
        if isinstance(data_source, (int, np.integer)):
            self.num_records, fingerprint = int(data_source), None
        else:
            self.num_records = len(data_source)
            fp = getattr(data_source, "fingerprint", None)
            fingerprint = fp() if callable(fp) else None
        if self.num_records < 0:
            raise ValueError(f"a record count must be >= 0, got {self.num_records}")
        self.source = fingerprint
        self.num_replicas, self.rank = _world(num_replicas, rank)
        self.shuffle, self.seed = bool(shuffle), int(seed)
        self.drop_last, self.pad = bool(drop_last), bool(pad)
        self.epoch = 0
        # a RecordDataset with a cache: told the order of each pass (it downloads ahead)
        self._dataset = data_source if isinstance(data_source, RecordDataset) else None
        self._pending: Optional[_Run] = None  # a loaded state, used by the next __iter__
        self._run: Optional[_Run] = None  # the pass in progress (or the last one)
        self._order: Optional[Tuple[Tuple[int, int, int], np.ndarray]] = None

    def set_epoch(self, epoch: int) -> None:
        """Use epoch ``epoch``'s order from the next iteration on (as
        ``DistributedSampler.set_epoch``); a loaded state of another epoch is dropped."""
        self.epoch = int(epoch)
        run = self._pending
        if run is not None and run.epoch != self.epoch and self._counts(run)[1] <= run.start:
            self._pending = None  # that epoch was over: nothing is dropped
        if self._pending is not None and self._pending.epoch != self.epoch:
            warnings.warn(f"set_epoch({self.epoch}) drops the loaded state of epoch "
                          f"{self._pending.epoch}: this epoch starts from its beginning "
                          f"(call set_epoch with the saved epoch to resume it)", stacklevel=2)
            self._pending = None

    # -- iteration ------------------------------------------------------------------------
    def _counts(self, run: _Run) -> Tuple[int, int]:
        m = _rs.remaining_count(self.num_records, run.cursor, run.skip)
        return m, _rs.rank_count(m, self.num_replicas, self.rank, self.drop_last, self.pad)

    def __len__(self) -> int:
        run = self._pending
        if run is None and self._run is not None and self._run.active:
            run = self._run
        if run is None:
            run = _Run(self.epoch)
        return self._counts(run)[1] - run.start

    def _epoch_order(self, epoch: int) -> np.ndarray:
        key = (self.seed, epoch, self.num_records)
        if self._order is None or self._order[0] != key:
            self._order = (key, _rs.epoch_order(self.seed, epoch, self.num_records))
        return self._order[1]

    def __iter__(self) -> Iterator[int]:
        # a generator: StatefulDataLoader calls iter() before load_state_dict, and the body
        # (which takes the loaded state) runs at the first next()
        run = self._pending if self._pending is not None else _Run(self.epoch)
        self._pending = None
        run.active = True
        self._run = run
        if self._dataset is not None:
            self._dataset.prefetch(self._chunks(run, 1 << 16, 1 << 20))
        for indices in self._chunks(run, 256, 1 << 16):  # small first: the first comes at once
            for index in indices.tolist():
                run.yielded += 1  # before the yield: the loader reads the state between batches
                yield index
        run.active = False

    def _chunks(self, run: _Run, first: int, most: int) -> Iterator[np.ndarray]:
        """The indices ``run`` hands out from its start, in chunks of ``first`` growing to
        ``most``."""
        m, count = self._counts(run)
        order = self._epoch_order(run.epoch) if self.shuffle else None
        skip = np.asarray(run.skip, dtype=np.int64)
        lo, chunk = run.start, first
        while lo < count:
            hi = min(count, lo + chunk)
            t = _rs.dealt_indices(self.rank, self.num_replicas, lo, hi, m)
            pos = _rs.positions(run.cursor, skip, t)
            yield order[pos] if order is not None else pos
            lo, chunk = hi, min(chunk * 2, most)

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """This rank's position: what was delivered before this pass (``cursor``, ``skip``)
        and how many indices it has handed out since (``yielded``). Plain ints and lists."""
        run = self._pending
        if run is None:
            run = self._run if self._run is not None and self._run.epoch == self.epoch \
                else _Run(self.epoch)
        return {"format": _rs.SAMPLER_FORMAT, "version": _rs.VERSION,
                "num_records": self.num_records, "source": self.source, "seed": self.seed,
                "shuffle": self.shuffle, "epoch": run.epoch, "drop_last": self.drop_last,
                "pad": self.pad, "num_replicas": self.num_replicas, "rank": self.rank,
                "cursor": run.cursor, "skip": list(run.skip), "yielded": run.yielded}

    def load_state_dict(self, state_dict: Any) -> None:
        """Continue from a saved position (see the class docstring for what it accepts); the
        next iteration hands out this rank's share of the records not delivered yet, in the
        saved epoch's order. ``ValueError`` when the state is for other data (record count,
        files) or another seed / shuffle, or when the states given do not fit together."""
        states = _rs.states_of(state_dict, _rs.SAMPLER_FORMAT, "RecordSampler")
        for s in states:
            _rs.mismatch(s, {"num_records": self.num_records, "source": self.source,
                             "seed": self.seed, "shuffle": self.shuffle}, "RecordSampler")
        _rs.check_sampler_group(states)
        s0 = states[0]
        epoch = int(s0["epoch"])
        same_shape = (int(s0["num_replicas"]) == self.num_replicas
                      and bool(s0["drop_last"]) == self.drop_last
                      and bool(s0.get("pad", True)) == self.pad
                      and len({int(s["yielded"]) for s in states}) == 1)
        if same_shape:  # every rank continues where it was: exactly the uninterrupted order
            run = _Run(epoch, s0["cursor"], s0["skip"], int(s0["yielded"]))
        else:
            cursor, skip = _rs.merge_sampler(states, self.num_records)
            run = _Run(epoch, cursor, skip)
        self.epoch = epoch
        self._pending = run


class ImageAugment:
    """A transform for ``decode="raw"``: ImageRecordIter's decode + augmentation in one step.

    Decodes the image bytes, then resize / crop (random with ``rand_crop``, or ImageNet's random
    resized crop with ``random_resized_crop``) / mirror / ``(x - mean) / std * scale`` exactly as
    ``recio.ImageRecordIter`` does, straight into a float32 CHW tensor (uint8 with
    ``dtype="uint8"``, for normalising on the device). Random choices use torch's generator,
    which ``DataLoader`` seeds differently in each worker.

    Given to ``RecordDataset``, it is also the fast path: ``DataLoader`` then gets each batch
    decoded in one call into one array and passed from the worker without a copy (see
    ``RecordDataset.__getitems__``)::

        ds = RecordDataset("train.rec", decode="raw", transform=ImageAugment(
            (3, 224, 224), random_resized_crop=True, rand_mirror=True, dtype="uint8"))

    ``random_resized_crop``: a box of ``area`` (fraction of the image, default 0.08-1) and
    aspect ``ratio`` (width / height, default 3/4-4/3) resized to ``data_shape``
    (``recio.image.imageiter.Augmenter`` says how the box is drawn and decoded).
    """

    def __init__(self, data_shape: Sequence[int], resize: int = -1, rand_crop: bool = False,
                 rand_mirror: bool = False, mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None, scale: float = 1.0,
                 dtype: str = "float32", decoder: str = "auto",
                 max_pixels: int = DEFAULT_MAX_PIXELS, *, random_resized_crop: bool = False,
                 area: Tuple[float, float] = RRC_AREA,
                 ratio: Tuple[float, float] = RRC_RATIO) -> None:
        shape = tuple(int(v) for v in data_shape)
        if len(shape) != 3 or shape[0] not in (1, 3):
            raise ValueError(f"data_shape must be (channels, height, width) with 1 or 3 "
                             f"channels, got {tuple(data_shape)}")
        if np.dtype(dtype) not in (np.float32, np.uint8):
            raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")
        if np.dtype(dtype) == np.uint8 and (mean is not None or std is not None or scale != 1):
            raise ValueError("dtype='uint8' skips normalisation: leave mean/std/scale unset")
        if random_resized_crop and rand_crop:
            raise ValueError("random_resized_crop and rand_crop are two kinds of crop: choose one")
        self.shape, self.dtype = shape, np.dtype(dtype)
        self._torch_dtype = torch.uint8 if self.dtype == np.uint8 else torch.float32
        self.augmenter = Augmenter(shape, resize, rand_crop, rand_mirror, mean, std, scale,
                                   dtype, "NCHW", decoder, max_pixels,
                                   random_resized_crop=random_resized_crop, area=area,
                                   ratio=ratio)

    def draw(self, n: int) -> np.ndarray:
        """The random numbers of ``n`` images (``Augmenter.params``' rows), from torch's
        generator."""
        return torch.rand((n, self.augmenter.draws), dtype=torch.float64).numpy()

    def __call__(self, img_bytes: bytes) -> "torch.Tensor":
        out = torch.empty(self.shape, dtype=self._torch_dtype)  # torch's allocator, reused
        self.augmenter(img_bytes, out.numpy(), self.draw(1)[0])
        return out


def _process_part(part_index: Optional[int], num_parts: Optional[int]) -> Tuple[int, int]:
    """This process's ``(part_index, num_parts)``: as given, else the ``torch.distributed`` rank
    and world size when initialised, else ``(0, 1)``."""
    if part_index is not None and num_parts is not None:
        return int(part_index), int(num_parts)
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class _Resume:
    """A loaded RecordIterableDataset state: the readers' states by slot (all of them, or the
    one StatefulDataLoader hands a worker) and, when complete, their merge (fits any shape)."""

    __slots__ = ("epoch", "slots", "by_slot", "merged")

    def __init__(self, epoch: int, slots: int, by_slot: Dict[int, Dict[str, Any]],
                 merged: Optional[Dict[str, Any]]) -> None:
        self.epoch, self.slots, self.by_slot, self.merged = epoch, slots, by_slot, merged


class _Live:
    """A reader's progress through its work, kept up to date before every record is handed
    out (what ``state_dict()`` reports while iterating)."""

    __slots__ = ("plan", "intervals", "iv", "pos", "queued", "qi", "buf_off", "draining",
                 "shuffler", "rng", "yielded")

    def __init__(self, plan: Dict[str, Any], rng: Optional[np.random.Generator]) -> None:
        self.plan = plan
        self.intervals = [list(iv) for iv in plan["intervals"]]
        self.iv = 0
        self.pos = self.intervals[0][0] if self.intervals else 0
        self.queued = [int(v) for v in plan["queued"]]
        self.qi = 0
        # a restored shuffle buffer (records by offset), until the pass makes the buffer
        self.buf_off = [int(v) for v in plan["buffer"]]
        self.draining = bool(plan["draining"]) and rng is not None
        if rng is None and self.buf_off:  # no shuffling now: buffered records go first
            self.queued, self.buf_off = self.buf_off + self.queued, []
        #: the pass's shuffle buffer of records (offset at [1]), once it is made
        self.shuffler: Optional[ShuffleBuffer] = None
        self.rng = rng
        self.yielded = int(plan["yielded"])

    def state(self) -> Dict[str, Any]:
        intervals: List[List[int]] = []
        if self.iv < len(self.intervals):
            a, b = self.intervals[self.iv]
            if max(self.pos, a) < b:
                intervals.append([max(self.pos, a), b])
            intervals.extend(list(iv) for iv in self.intervals[self.iv + 1:])
        if self.shuffler is not None:
            buffer, draining = [rec[1] for rec in self.shuffler.held()], self.shuffler.draining
        else:
            buffer, draining = list(self.buf_off), self.draining
        p = self.plan
        return _rs.stream_state(
            epoch=p["epoch"], seed=p["seed"], source=p["source"], slot=p["slot"],
            slots=p["slots"], intervals=intervals, queued=self.queued[self.qi:],
            resumes=p["resumes"], base_delivered=p["base_delivered"], base=p["base"],
            buffer=buffer, draining=draining,
            rng=self.rng.bit_generator.state if self.rng is not None else None,
            yielded=self.yielded, ranks=int(p.get("ranks", 1)))


def _files_in_order(layout: Any, live: _Live) -> List[int]:
    """The numbers of the files a reader's pass reads, in the order it first reads them: the
    files of its restored shuffle buffer and queued records, then of its byte ranges."""
    order: Dict[int, None] = {}
    for g in live.buf_off + live.queued:
        order.setdefault(layout.file_of(g), None)
    for a, b in live.intervals:
        i = layout.file_of(a)
        while i < len(layout.paths) and layout.starts[i] < b:
            order.setdefault(i, None)
            i += 1
    return list(order)


def _source_id(layout: Any) -> Dict[str, Any]:
    """What a RecordIterableDataset state was saved for: the number of (non-empty) files, their
    bytes, and a digest of their names and sizes (names without folders: the data may move)."""
    names = "\n".join(f"{os.path.basename(p)}:{n}" for p, n in zip(layout.paths, layout.sizes))
    return {"files": len(layout.paths), "bytes": layout.total,
            "names": f"{zlib.crc32(names.encode()):08x}"}


def _check_source(saved: Any, here: Dict[str, Any]) -> None:
    if saved == here:
        return
    saved = saved if isinstance(saved, Mapping) else {}
    if saved.get("files") != here["files"] or saved.get("bytes") != here["bytes"]:
        what = (f"{saved.get('files')} file(s) of {saved.get('bytes', 0):,} bytes in the state, "
                f"{here['files']} file(s) of {here['bytes']:,} bytes here")
    else:
        what = "files of the same sizes but other names (or sizes in another order)"
    raise ValueError(f"this RecordIterableDataset state was saved for other data: {what}")


class RecordIterableDataset(IterableDataset):
    """Streams image records; each (process, DataLoader worker) reads its own ``InputSplit`` part.

    The process reads part ``part_index`` of ``num_parts`` (default: the ``torch.distributed``
    rank and world size when initialised, else the whole input); its DataLoader workers split
    that again: worker ``w`` of ``W`` reads part ``part_index * W + w`` of ``num_parts * W``. So
    the parts together are the whole input, each record read once. ``source`` is anything
    ``InputSplit`` takes (a path, a list, ``a.rec;b.rec``, a directory, a glob, a shard set's
    manifest; URLs too, streamed through fsspec with ``storage_options``, or with ``cache_dir``
    (or ``RECIO_CACHE_DIR``) read from local copies of the whole files kept in that folder, at
    most ``cache_limit`` bytes, each reader downloading its next files while it reads one:
    see ``recio.records.cache``). The files are found when the dataset is made.
    ``shuffle_buffer > 0`` shuffles within a bounded buffer, seeded by ``(seed, epoch, part)``;
    call ``set_epoch`` each epoch. ``balance="records"`` splits by record count from the
    ``.idx`` files so that ranks get equal shares (needed by DDP, which expects the same number
    of batches on every rank).

    Exact mid-epoch resume (torchdata's ``StatefulDataLoader`` protocol): ``state_dict()`` is
    a reader's *remaining work* (its unread byte ranges, the records in its shuffle buffer and
    the buffer's generator), which ``StatefulDataLoader`` saves for each worker as part of
    ``loader.state_dict()``; its size does not grow with the position, and a restore reads
    only what is still to be read. Same ranks and workers: ``loader.load_state_dict(saved)``
    continues every reader exactly where it was (the same order an uninterrupted run gives).
    Another number of ranks or workers (which StatefulDataLoader refuses): give the dataset
    what every rank saved and iterate a **new** loader::

        ds = RecordIterableDataset("train.rec", shuffle_buffer=1000, part_index=rank,
                                   num_parts=world)
        ds.load_state_dict([torch.load(f"loader{r}.pt") for r in range(old_world)])
        loader = StatefulDataLoader(ds, batch_size=64, num_workers=3)   # any shape
        for batch in loader: ...   # the records not delivered before the stop, each once

    (``recio.torch.resume_state(saved)`` gives the same merged state as one small dict to keep.)
    A loaded state is used by one pass (the loader's next iteration, in all its workers); the
    pass after it reads the whole epoch. It belongs to its epoch: ``set_epoch`` with another
    epoch drops it. Loading a state saved for other files or another ``seed`` raises
    ``ValueError``; so does a reader's state loaded into a reader of another shape (see above
    for the way to change shape).
    """

    def __init__(self, source: Union[PathLike, Sequence[PathLike]],
                 transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: str = "tensor",
                 mode: str = "RGB", shuffle_buffer: int = 0, seed: int = 0,
                 part_index: Optional[int] = None, num_parts: Optional[int] = None,
                 balance: str = "bytes", decoder: str = "auto",
                 max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None) -> None:
        super().__init__()
        self.storage_options = storage_options
        if isinstance(source, (list, tuple)):
            self.source: Any = [os.fspath(p) for p in source]
        else:
            self.source = os.fspath(source)
        if int(shuffle_buffer) < 0:
            raise ValueError(f"shuffle_buffer must be >= 0, got {shuffle_buffer}")
        if (part_index is None) != (num_parts is None):
            raise ValueError("give both part_index and num_parts, or neither")
        if part_index is not None and not 0 <= part_index < num_parts:
            raise ValueError(f"part_index must be in [0, num_parts={num_parts}), "
                             f"got {part_index}")
        self.shuffle_buffer, self.seed, self.epoch = int(shuffle_buffer), int(seed), 0
        self.part_index, self.num_parts, self.balance = part_index, num_parts, balance
        self._decoder = _Decoder(decode, mode, transform, target_transform, decoder, max_pixels)
        self._cache = ShardCache.configured(cache_dir, cache_limit, storage_options)
        # the files, their sizes (and with a cache what each must be), found once: every
        # reader and pass uses these
        self._layout = SourceLayout(self.source, storage_options, self._cache)
        self._resume: Optional[_Resume] = None
        # a state loaded in the main process is for one pass: the first pass of DataLoader
        # workers to start writes its base seed here (shared memory), later passes skip it
        self._claim: Optional[Any] = None
        self._live: Optional[_Live] = None
        self._loads = 0  # bumped by every load: a cached plan is for one loaded state
        self._planned: Optional[Tuple[Any, Any]] = None
        # persistent DataLoader workers keep the copy of the dataset they started with:
        # set_epoch writes [epoch, calls so far] here (shared memory) for them to take up
        self._epoch_cell = torch.zeros(2, dtype=torch.int64).share_memory_()
        self._epoch_seen = 0

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose shuffle order is used (like ``DistributedSampler.set_epoch``);
        a loaded state of another epoch is dropped. Persistent DataLoader workers take it up
        at their next pass."""
        self._set_epoch(epoch)
        cell = self._epoch_cell
        cell[0], cell[1] = self.epoch, int(cell[1]) + 1
        self._epoch_seen = int(cell[1])

    def _set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)
        r = self._resume
        if r is not None and r.epoch != self.epoch:
            used = self._claim is not None and int(self._claim[0]) != -1  # by workers' pass
            if not used and any(_rs.stream_left(st) for st in r.by_slot.values()):
                warnings.warn(f"set_epoch({self.epoch}) drops the loaded state of epoch "
                              f"{r.epoch}: this epoch starts from its beginning (call "
                              f"set_epoch with the saved epoch to resume it)", stacklevel=2)
            self._resume, self._claim = None, None

    def part(self) -> Tuple[int, int]:
        """``(part_index, num_parts)`` of the ``InputSplit`` this process/worker reads."""
        info = get_worker_info()
        num_workers, worker_id = (1, 0) if info is None else (info.num_workers, info.id)
        index, count = _process_part(self.part_index, self.num_parts)
        return index * num_workers + worker_id, count * num_workers

    # -- what a reader reads ------------------------------------------------------------------
    def _plan(self, slot: int, slots: int) -> Tuple[Dict[str, Any], Any]:
        """Reader ``slot`` of ``slots``'s work for this pass, as a state, and the layout."""
        r = self._resume_for_this_pass()
        key = (self.epoch, slot, slots, self._loads, r is not None)
        if self._planned is not None and self._planned[0] == key:
            return self._planned[1]
        ranks = _process_part(self.part_index, self.num_parts)[1]
        if r is not None:
            layout = self._layout
            _check_source(next(iter(r.by_slot.values()))["source"], _source_id(layout))
            mine = r.by_slot.get(slot) if r.slots == slots else None
            if mine is not None and int(mine.get("ranks", ranks)) == ranks:
                plan = dict(mine)  # the same reader of the same shape: exactly where it was
            elif r.merged is not None:  # another shape: a share of everything left
                plan = _rs.share(r.merged, slot, slots,
                                 self._bounds(r.merged["intervals"], slots, layout), ranks)
            else:
                raise ValueError(self._misfit(r, slot, slots))
        else:
            split = InputSplit(self.source, slot, slots, balance=self.balance,
                               storage_options=self.storage_options, _layout=self._layout)
            layout = split.layout
            plan = _rs.stream_state(
                epoch=self.epoch, seed=self.seed, source=_source_id(layout), slot=slot,
                slots=slots, intervals=[[split.begin, split.end]] if split.begin < split.end
                else [], queued=[], resumes=0, base_delivered=0, base="start", ranks=ranks)
        self._planned = (key, (plan, layout))
        return plan, layout

    def _resume_for_this_pass(self) -> Optional[_Resume]:
        """The loaded state, unless it is for another epoch or an earlier pass used it."""
        r = self._resume
        if r is None or r.epoch != self.epoch:
            return None
        if self._claim is None:
            return r
        claimed, info = int(self._claim[0]), get_worker_info()
        if info is None:  # the main process: only before any pass of workers used it
            return r if claimed == -1 else None
        this_pass = int(info.seed) - int(info.id)  # the loader iterator's base seed
        if claimed == -1:
            self._claim[0] = this_pass  # its workers start together and write the same value
            return r
        return r if claimed == this_pass else None

    def _bounds(self, intervals: List[List[int]], slots: int, layout: Any) -> List[float]:
        if self.balance == "records":
            records = np.asarray(load_record_offsets(layout, None), dtype=np.int64).reshape(-1, 2)
            heads = np.sort(np.asarray(layout.starts, np.int64)[records[:, 0]] + records[:, 1])
            return _rs.record_bounds(intervals, slots, heads)
        return _rs.byte_bounds(intervals, slots, lambda pos: layout.to_head(pos, 4 << 20))

    @staticmethod
    def _misfit(r: _Resume, slot: int, slots: int) -> str:
        have = ", ".join(str(q) for q in sorted(r.by_slot))
        return (f"this RecordIterableDataset was given the state of reader {have} of {r.slots} "
                f"but runs as reader {slot} of {slots} (a reader is one DataLoader worker of "
                f"one rank, numbered rank * num_workers + worker): the number of ranks or "
                f"DataLoader workers changed. StatefulDataLoader.load_state_dict cannot change "
                f"them; instead pass every rank's saved loader state to "
                f"dataset.load_state_dict([...]) (or recio.torch.resume_state) and iterate a "
                f"new loader without calling loader.load_state_dict")

    def __iter__(self) -> Iterator[Tuple[Any, Any]]:
        calls = int(self._epoch_cell[1])
        if calls != self._epoch_seen and get_worker_info() is not None:
            # a persistent worker: the main process called set_epoch since this copy was made
            self._epoch_seen = calls
            self._set_epoch(int(self._epoch_cell[0]))
        self._live = None  # state_dict() reports this pass's start until it begins
        return self._records()

    def _records(self) -> Iterator[Tuple[Any, Any]]:
        part_index, num_parts = self.part()
        plan, layout = self._plan(part_index, num_parts)
        if self._resume is not None:
            self._resume, self._claim = None, None  # used once: the next pass starts afresh
            self._loads += 1  # (and the plan made from it is not reused)
        rng = None
        if self.shuffle_buffer:
            if plan["rng"] is None and plan["resumes"] == 0:
                rng = np.random.default_rng([self.seed, self.epoch, part_index])
            else:
                rng = np.random.default_rng([self.seed, self.epoch, part_index, num_parts,
                                             int(plan["resumes"])])
            if plan["rng"] is not None:
                rng.bit_generator.state = plan["rng"]
        live = self._live = _Live(plan, rng)
        decode = self._decoder
        where = f"of part {part_index}/{num_parts}"
        readers: Dict[str, Any] = {}

        def read_at(g: int) -> Tuple[None, int, str, int, bytes]:
            i = layout.file_of(g)
            path, off = layout.paths[i], g - layout.starts[i]
            reader = readers.get(path)
            if reader is None:
                reader = readers[path] = RecordReader(path, storage_options=self.storage_options,
                                                      shard_cache=self._cache)
            return None, g, path, off, reader.read_at(off)

        def records() -> Iterator[Tuple[Optional[int], int, str, int, bytes]]:
            n = 0
            while live.qi < len(live.queued):
                rec = read_at(live.queued[live.qi])
                live.qi += 1
                yield (n,) + rec[1:]
                n += 1
            while live.iv < len(live.intervals):
                end = live.intervals[live.iv][1]
                i = layout.file_of(live.pos)
                while i < len(layout.paths) and layout.starts[i] < end:
                    first, path = layout.starts[i], layout.paths[i]
                    lo, hi = max(live.pos, first) - first, min(end, layout.starts[i + 1]) - first
                    if lo < hi:
                        if ahead is not None:
                            ahead.reached(step[i])
                        with RecordReader(path, storage_options=self.storage_options,
                                          shard_cache=self._cache) as rd:
                            rd.source.limit(hi)
                            rd.seek(lo)
                            for off, payload in rd.records_with_offsets():
                                after = rd.tell()
                                live.pos = first + after  # read: no longer unread work
                                yield n, first + off, path, off, payload
                                n += 1
                                if after >= hi:
                                    break
                    live.pos = max(live.pos, first + hi)
                    i += 1
                live.iv += 1
                if live.iv < len(live.intervals):
                    live.pos = live.intervals[live.iv][0]

        def out(rec: Tuple[Optional[int], int, str, int, bytes]) -> Tuple[Any, Any]:
            n, _, path, off, payload = rec
            name = f"record #{n} {where}" if n is not None else f"record at byte {off} {where}"
            return decode(payload, path, name, off, keyed=False)

        files = _files_in_order(layout, live)
        step = {f: k for k, f in enumerate(files)}
        ahead = None if self._cache is None else self._cache.prefetch(
            [layout.paths[i] for i in files], ahead=READ_AHEAD)
        try:
            if rng is None:
                for rec in records():
                    item = out(rec)
                    live.yielded += 1  # before the yield: the loader reads the state then
                    yield item
                return
            # a restored buffer's records are read by offset; live.state() saves the offsets
            live.shuffler = ShuffleBuffer(self.shuffle_buffer, rng,
                                          [read_at(g) for g in live.buf_off], live.draining)
            for rec in live.shuffler.shuffle(records()):
                item = out(rec)
                live.yielded += 1
                yield item
        finally:
            if ahead is not None:
                ahead.stop()
            for reader in readers.values():
                reader.close()

    # -- state ----------------------------------------------------------------------------
    def state_dict(self) -> Dict[str, Any]:
        """This reader's remaining work in the epoch (see the class docstring): plain ints,
        lists and strings. In a DataLoader worker it is the worker's own; use the loader's
        ``state_dict()`` to save them all."""
        if self._live is not None:
            return self._live.state()
        plan, _ = self._plan(*self.part())
        return dict(plan)

    def load_state_dict(self, state_dict: Any) -> None:
        """Resume from what was saved: this reader's own state (as ``StatefulDataLoader`` gives
        it to each worker), or every reader's (a ``StatefulDataLoader`` state, a list of them
        with one per rank, or ``recio.torch.resume_state``'s merge), which fits any number of
        ranks and workers. The next pass delivers the records not delivered before, each once.
        ``ValueError`` for a state of other files or another seed, states that do not fit
        together, or a reader's state in a reader of another shape."""
        states = _rs.states_of(state_dict, _rs.STREAM_FORMAT, "RecordIterableDataset")
        here = _source_id(self._layout)
        for s in states:
            _check_source(s.get("source"), here)
            _rs.mismatch(s, {"seed": self.seed}, "RecordIterableDataset")
        _rs.same(states, ("epoch", "base", "slots"), "RecordIterableDataset")
        slots = int(states[0]["slots"])
        by_slot = {int(s["slot"]): s for s in states}
        if len(by_slot) != len(states):
            raise ValueError("two states of the same reader: pass each reader's state once")
        if len(states) > 1 and set(by_slot) != set(range(slots)):
            missing = sorted(set(range(slots)) - set(by_slot))
            raise ValueError(f"got the states of {len(by_slot)} of the {slots} readers of the "
                             f"saved job (readers {missing} are missing; a reader is one "
                             f"DataLoader worker of one rank): pass every rank's saved state")
        # every reader's state: their merge fits any shape (a lone reader's fits only its own)
        merged = _rs.merge_stream(states) if set(by_slot) == set(range(slots)) else None
        resume = _Resume(int(states[0]["epoch"]), slots, by_slot, merged)
        if get_worker_info() is not None:  # StatefulDataLoader restoring its workers
            slot, now = self.part()
            if merged is None and not (slots == now and slot in by_slot):
                raise ValueError(self._misfit(resume, slot, now))
            self._claim = None
        else:
            self._claim = torch.full((1,), -1, dtype=torch.int64).share_memory_()
        self._resume, self.epoch = resume, resume.epoch
        self._loads += 1
        self._live = None

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_live"], state["_planned"] = None, None  # per process
        return state


__all__ = ["RecordDataset", "RecordSampler", "RecordIterableDataset", "ImageAugment",
           "resume_state", "collate_encoded", "decode_on_device"]
