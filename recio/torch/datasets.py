"""``RecordDataset``: the map-style PyTorch dataset over indexed ``.rec`` files.

Random access through the ``.idx`` (or a scan when there is none). Each process opens the
``.rec`` itself on first use (the process id is checked, as MXNet's ``MXRecordIO`` does), so a
dataset created in the main process is safe in ``DataLoader`` workers, forked or spawned; reads
are by position on a memory map, never via a shared file pointer. What a record becomes is its
``decode=`` (``recio.torch.decoders``: an image by default, or any callable). A record whose
image nothing decodes is skipped or raised as ``on_undecodable`` says
(``recio.image.undecodable``).
"""
from __future__ import annotations

import os
import time
import zlib
from collections import OrderedDict
from typing import (TYPE_CHECKING, Any, Callable, Iterable, List, Optional, Sequence, Tuple,
                    Union, cast)

import numpy as np

from recio import storage
from recio.errors import ImageError, RecordIOError
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS
from recio.image.undecodable import RAISE, SKIP, check_policy, next_decodable, warn_skipped
from recio.optional import require
from recio.records.cache.shard_cache import PREFETCH_THREADS, RECHECK_SECONDS, ShardCache
from recio.records.cache.prefetch import Prefetch
from recio.records.closed import check_open
from recio.records.diagnose import explain_indexed_read, open_checked_index
from recio.records.index import BY_KEY, EVERY_LINE, warn_repeated_keys
from recio.records.index_format import key_text
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.source import resolve_source
from recio.storage import PathLike, StorageOptions
from recio.torch.decoders import Decode, ImageDecoder, make_decoder
from recio.torch.skipcount import SkipCount

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
    from torch.utils.data import Dataset
else:
    torch = require("torch", feature="recio.torch")
    Dataset = torch.utils.data.Dataset

#: files a RecordDataset keeps open in a process (a reader holds two descriptors: its file
#: and its map's): a set of more shards reopens the least recently used
_MOST_OPEN = 256


class RecordDataset(Dataset):
    """Map-style dataset over an indexed ``.rec``: ``ds[i]`` is the i-th record's sample.

    The sample is ``(image, label)`` of an image record by default; ``decode=`` a callable
    ``bytes -> sample`` serves any record (``recio.sequence.unpack_sequence`` for sequences,
    ``bytes`` for raw payloads), as ``recio.torch.decoders`` says.

    ``idx_path`` defaults to the ``.idx`` beside the ``.rec`` (scanned when missing, keys
    ``0..n-1``). ``rec_path`` may also be a list of ``.rec`` files, a glob, or a shard set's
    manifest (``PREFIX.manifest.json``): the records of every file, in order (each file's keys
    from the ``.idx`` beside it). ``keys`` restricts and orders the records
    (e.g. ``range(1, n + 1)`` to leave out the header records of a face-recognition dataset).
    Paths may be URLs (``s3://...``, read through fsspec with ``storage_options``): each record
    is one ranged GET, or, with ``cache_dir`` (or ``RECIO_CACHE_DIR``), whole files are kept
    in that local folder, at most ``cache_limit`` bytes (``recio.records.cache.shard_cache``), so a
    record is read from local disk; a ``RecordSampler`` over the dataset downloads the files in the
    order its records come first. ``ds[i]`` reads line i of the index: an index whose keys repeat
    gives every line and a ``DuplicateKeyWarning`` naming the key (with ``keys``, a repeated key
    reads its last line, as MXNet does). Safe in ``DataLoader(num_workers > 0)``: files reopen in
    each process, which share the cache.

    A record whose image nothing decodes (``on_undecodable="skip"``, the default) is left out
    of its batch (``__getitems__``, which ``DataLoader`` calls), and ``ds[i]`` of it, or a
    batch with no decodable image, gets the next decodable record in index order in its place,
    so an epoch goes on. Each is named by a ``SkippedRecordWarning`` (file, key, byte offset,
    why, what stood in) and counted in ``num_skipped``, over the DataLoader workers too.
    ``on_undecodable="raise"`` raises ``ImageError`` naming the record instead.
    To resume exactly mid-epoch, sample it with ``RecordSampler``, which holds the position
    (``StatefulDataLoader(ds, sampler=RecordSampler(ds), ...)``).
    """

    def __init__(self, rec_path: Union[PathLike, Sequence[PathLike]],
                 idx_path: Optional[PathLike] = None,
                 keys: Optional[Sequence[Any]] = None, transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: Decode = "tensor",
                 mode: str = "RGB", key_type: Callable[[str], Any] = int,
                 max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None, on_undecodable: str = SKIP) -> None:
        self.on_undecodable = check_policy(on_undecodable)
        several = isinstance(rec_path, (list, tuple))
        if isinstance(rec_path, (list, tuple)):
            self.rec_path = ";".join(os.fspath(p) for p in rec_path)
        else:
            self.rec_path = os.fspath(cast(PathLike, rec_path))
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
        # indexes, which must exist; read by key (keys=...), so must the .idx of a .rec
        # (MissingIndexError: positions would answer other records)
        indexes = [open_checked_index(f.path, f.idx_path, key_type, rec_size=f.size,
                                      storage_options=storage_options, shard_cache=cache)
                   if f.manifest else
                   index_for(f.path, idx_path, key_type, storage_options=storage_options,
                             shard_cache=cache, scan=keys is None) for f in sources]
        self._indexes = indexes
        self.idx_path = indexes[0].path if len(indexes) == 1 else None
        if len(indexes) == 1:
            self._init_one(indexes[0], keys)
        else:
            self._init_shards(indexes, keys)
        self._decoder = make_decoder(decode, mode, transform, target_transform, max_pixels)
        self._readers: OrderedDict = OrderedDict()
        self._pid: Optional[int] = None
        self._prefetch: Optional[Prefetch] = None
        self._recheck = self._recheck_start()
        self._skips = SkipCount()  # shared memory: DataLoader workers add to it

    @property
    def num_skipped(self) -> int:
        """Undecodable records asked for so far, in this process and its DataLoader workers."""
        return self._skips.value

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
        check_open(self._closed, "RecordDataset", self.rec_path)
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

    #: set by ``close()``: every later use raises ``ClosedError``
    _closed = False

    def __len__(self) -> int:
        check_open(self._closed, "RecordDataset", self.rec_path)
        return len(self.keys)

    def read_record(self, i: int) -> bytes:
        """The raw payload of the i-th record (no decoding)."""
        n, offset = self._locate(i)
        reader = self._open(n)
        try:
            return reader.read_at(offset)
        except RecordIOError as exc:  # the index's fault or the .rec's: say which
            raise explain_indexed_read(reader, self._indexes[n], offset, exc) from None

    def __getitem__(self, i: int) -> Any:
        i = self._checked(i)
        try:
            return self._sample(i)
        except ImageError as error:
            return self._instead(i, [error])

    def _record(self, i: int) -> Tuple[bytes, str, str, int]:
        """``(payload, file, name, byte offset)`` of the i-th record."""
        n, offset = self._locate(i)
        return self.read_record(i), self._files[n], f"key {key_text(self.keys[i])}", offset

    def _sample(self, i: int) -> Any:
        return self._decoder(*self._record(i))

    def __getitems__(self, indices: Sequence[int]) -> List[Any]:
        """The samples of ``indices`` (``DataLoader`` calls this with a batch's indices), the
        undecodable ones left out (see the class docstring). With an ``ImageAugment``
        transform on raw records the whole batch is decoded into one array and collated
        without a copy (``recio.torch.batching``)."""
        decoder, positions = self._decoder, [self._checked(i) for i in indices]
        augment = decoder.batch_augment() if isinstance(decoder, ImageDecoder) else None
        errors: List[ImageError] = []
        if augment is not None and isinstance(decoder, ImageDecoder):
            samples, errors = decoder.batch([self._record(i) for i in positions], augment,
                                            skip=self.on_undecodable == SKIP)
        else:
            samples = []
            for i in positions:
                try:
                    samples.append(self._sample(i))
                except ImageError as error:
                    if self.on_undecodable == RAISE:
                        raise
                    errors.append(error)
        if not errors:
            return samples
        if not samples:  # never an empty batch: DataLoader would end the epoch on it
            return [self._instead(positions[-1], errors)]
        self._skipped(errors)
        return samples

    def _instead(self, last: int, errors: List[ImageError]) -> Any:
        """For undecodable records asked for (``errors``, ``last`` the last one's position):
        the next decodable record's sample (``"skip"``), or the first error (``"raise"``)."""
        if self.on_undecodable == RAISE:
            raise errors[0]
        position, sample = next_decodable(errors[-1], last, len(self.keys), self._sample)
        self._skipped(errors, f"key {key_text(self.keys[position])}")
        return sample

    def _skipped(self, errors: List[ImageError], instead: Optional[str] = None) -> None:
        for j, error in enumerate(errors):
            warn_skipped(str(error), instead if j == len(errors) - 1 else None)
        self._skips.add(len(errors))

    def _checked(self, i: Any) -> int:
        i = int(i)  # NumPy / torch integer indices work too
        if i < 0:
            i += len(self.keys)
        if not 0 <= i < len(self.keys):
            raise IndexError(f"index {i} out of range for {len(self.keys)} records")
        return i

    def close(self) -> None:
        """Close the ``.rec`` files this process has open for the dataset (on Windows a file
        held open cannot be replaced or deleted) and end it: every later read, ``len()`` and
        pickling raise :class:`~recio.errors.ClosedError` (``I/O on a closed RecordDataset:
        PATH``). The indexes stay (a large one is mapped from its sidecar cache until the
        dataset is gone). Closing again does nothing."""
        for reader in self._readers.values():
            reader.close()
        self._readers = OrderedDict()
        self._closed = True

    def __enter__(self) -> "RecordDataset":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __getstate__(self) -> dict:
        check_open(self._closed, "RecordDataset", self.rec_path)  # it would reopen elsewhere
        state = dict(self.__dict__)
        state["_readers"], state["_pid"] = OrderedDict(), None  # reopened by each worker
        state["_prefetch"], state["_recheck"] = None, self._recheck_start()
        return state

    def prefetch(self, positions: Iterable[np.ndarray]) -> Optional[Prefetch]:
        """With a cache, start downloading the files of the records at ``positions`` (chunks of
        ``ds[i]`` indices, in the order they will be read), each file in the order its first
        record comes, in the background, as far as the cache's limit allows; a prefetch this
        dataset started before is stopped. ``RecordSampler`` calls it at the start of each
        pass. Returns the running ``recio.records.cache.prefetch.Prefetch`` (None without a
        cache)."""
        check_open(self._closed, "RecordDataset", self.rec_path)
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
        check_open(self._closed, "RecordDataset", self.rec_path)
        n = len(self.keys)
        step = max(1, n // 1024)
        sample = np.asarray(self.offsets[::step], dtype=np.int64).tobytes()
        if self._shard is not None:
            sample += np.asarray(self._shard[::step], dtype=np.int64).tobytes()
        names = "\n".join(os.path.basename(f) for f in self._files)
        return f"{zlib.crc32(sample, zlib.crc32(f'{names}|{n}'.encode())):08x}"
