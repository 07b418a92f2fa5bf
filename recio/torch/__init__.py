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

Both return ``(image, label)``: the image decoded as chosen by ``decode`` (``"tensor"``: uint8
CHW, ``"numpy"``: uint8 HWC, ``"pil"``: a PIL image for torchvision transforms, ``"raw"``: the
undecoded bytes), then ``transform``; the label as a float32 tensor (scalar, or the vector of a
multi-label record), then ``target_transform``. Images decode through
``recio.image.codec.decode``: MXNet's pixels (``mode="L"`` is OpenCV's greyscale), simplejpeg
for JPEGs when installed (``decoder="auto"``; ``"pillow"`` forces Pillow), and the
decompression-bomb guard (``max_pixels``).
"""
from __future__ import annotations

import os
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image

from recio.deprecation import renamed_keywords
from recio.errors import ImageError, RecordIOError
from recio.image.codec import DEFAULT_MAX_PIXELS, check_decoder, decode as decode_image
from recio.image.header import unpack
from recio.image.imageiter import Augmenter, buffered_shuffle
from recio.optional import require
from recio.records.index import open_index
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.shards import is_manifest, load_manifest
from recio.records.split import InputSplit, expand_source
from recio.storage import StorageOptions

torch = require("torch", feature="recio.torch")
Dataset = torch.utils.data.Dataset
IterableDataset = torch.utils.data.IterableDataset
get_worker_info = torch.utils.data.get_worker_info

PathLike = Union[str, "os.PathLike[str]"]
_DECODES = ("tensor", "numpy", "pil", "raw")


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
                 offset: Optional[int] = None) -> Tuple[Any, Any]:
        try:
            header, img_bytes = unpack(payload)
        except RecordIOError as exc:
            raise RecordIOError(f"{name}: {exc.message}", path, offset) from None
        image: Any = img_bytes
        if self.decode != "raw":
            image = self._image(img_bytes, path, name, offset)
        if self.transform is not None:
            image = self.transform(image)
        label: Any = header.label
        if self.target_transform is not None:
            label = self.target_transform(label)
        elif header.flag == 0:
            label = torch.tensor(label, dtype=torch.float32)
        else:
            label = torch.from_numpy(np.array(label, dtype=np.float32))
        return image, label

    def _image(self, img_bytes: bytes, path: Optional[str], name: str,
               offset: Optional[int]) -> Any:
        """The decoded image as ``decode`` asks: a PIL image, an HWC array or a CHW tensor."""
        try:
            arr = decode_image(img_bytes, 1 if self.mode == "RGB" else 0,
                               max_pixels=self.max_pixels, decoder=self.decoder)
        except ImageError as exc:
            raise ImageError(f"{name}: {exc.message}", path, offset) from None
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
    Paths may be URLs (``s3://...``, read through fsspec with ``storage_options``; each record
    is one ranged GET). Undecodable images raise ``ImageError`` naming the key. Safe in
    ``DataLoader(num_workers > 0)``: files reopen in each process.
    (``path_imgrec``/``path_imgidx`` are the deprecated names of ``rec_path``/``idx_path``.)
    """

    @renamed_keywords(path_imgrec="rec_path", path_imgidx="idx_path")
    def __init__(self, rec_path: Union[PathLike, Sequence[PathLike]],
                 idx_path: Optional[PathLike] = None,
                 keys: Optional[Sequence[Any]] = None, transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: str = "tensor",
                 mode: str = "RGB", key_type: Callable[[str], Any] = int,
                 decoder: str = "auto", max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None) -> None:
        several = isinstance(rec_path, (list, tuple))
        self.rec_path = ";".join(map(os.fspath, rec_path)) if several else os.fspath(rec_path)
        self.storage_options = storage_options
        if is_manifest(self.rec_path):  # its shards' indexes, which must exist
            if idx_path is not None:
                raise ValueError("idx_path goes with one .rec; a manifest names its shards' "
                                 "indexes")
            manifest = load_manifest(self.rec_path, storage_options)
            self._files = manifest.rec_paths()
            indexes = [open_index(s.idx, key_type, rec_size=s.rec_bytes,
                                  storage_options=storage_options) for s in manifest.shards]
        else:  # a path, a list, a glob or a folder, as InputSplit takes them
            self._files = expand_source(rec_path, storage_options)
            if idx_path is not None and (several or self._files != [self.rec_path]):
                raise ValueError("idx_path goes with one .rec; several files use the .idx "
                                 "beside each")
            # arrays (or the memory-mapped index cache), so forked DataLoader workers share
            # them instead of touching millions of Python objects
            indexes = [index_for(f, idx_path, key_type, storage_options=storage_options)
                       for f in self._files]
        self._indexes = indexes
        self.idx_path = indexes[0].path if len(indexes) == 1 else None
        if len(indexes) == 1:
            self._init_one(indexes[0], keys)
        else:
            self._init_shards(indexes, keys)
        self._decoder = _Decoder(decode, mode, transform, target_transform, decoder, max_pixels)
        self._readers: dict = {}
        self._pid: Optional[int] = None

    def _init_one(self, index: Any, keys: Optional[Sequence[Any]]) -> None:
        self._shard: Optional[np.ndarray] = None  # one file: no shard numbers
        if keys is None:
            self.keys: Sequence[Any] = index.keys_view() if not index.duplicates else \
                index.unique_keys()
            self.offsets = index.offsets if not index.duplicates else \
                np.asarray(index.offsets_of(self.keys), dtype=np.int64)
        else:
            self.keys = [k.item() if isinstance(k, np.generic) else k for k in keys]
            missing = [k for k in self.keys if k not in index]
            if missing:
                raise KeyError(f"{len(missing)} keys are not in the index "
                               f"{self.idx_path or self.rec_path}, e.g. {missing[:5]}")
            self.offsets = np.asarray(index.offsets_of(self.keys), dtype=np.int64)

    def _init_shards(self, indexes: Sequence[Any], keys: Optional[Sequence[Any]]) -> None:
        """Several shards: every record as (shard number, offset), keys across the set."""
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
        if self._pid != os.getpid():
            self._readers, self._pid = {}, os.getpid()  # a new fd and mmap in this process
        reader = self._readers.get(n)
        if reader is None:
            reader = self._readers[n] = RecordReader(self._files[n],
                                                     storage_options=self.storage_options)
            reader.set_index(self._indexes[n])  # a remote file: one GET a record
        return reader

    def _locate(self, i: int) -> Tuple[int, int]:
        return (0 if self._shard is None else int(self._shard[i])), int(self.offsets[i])

    def __len__(self) -> int:
        return len(self.keys)

    def read_record(self, i: int) -> bytes:
        """The raw payload of the i-th record (no decoding)."""
        n, offset = self._locate(i)
        return self._open(n).read_at(offset)

    def __getitem__(self, i: int) -> Tuple[Any, Any]:
        i = int(i)  # NumPy / torch integer indices work too
        if i < 0:
            i += len(self.keys)
        if not 0 <= i < len(self.keys):
            raise IndexError(f"index {i} out of range for {len(self.keys)} records")
        n, offset = self._locate(i)
        return self._decoder(self.read_record(i), self._files[n], f"key {self.keys[i]!r}",
                             offset)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_readers"], state["_pid"] = {}, None  # reopened by each worker
        return state


class ImageAugment:
    """A transform for ``decode="raw"``: ImageRecordIter's decode + augmentation in one step.

    Decodes the image bytes, then resize / crop (random with ``rand_crop``) / mirror /
    ``(x - mean) / std * scale`` exactly as ``recio.ImageRecordIter`` does, straight into a
    float32 CHW tensor (uint8 with ``dtype="uint8"``). Random choices use torch's generator,
    which ``DataLoader`` seeds differently in each worker. Cheaper than decoding to a full-size
    tensor and cropping it afterwards::

        ds = RecordDataset("train.rec", decode="raw", transform=ImageAugment(
            (3, 224, 224), rand_crop=True, rand_mirror=True,
            mean=(123.68, 116.28, 103.53), std=(58.395, 57.12, 57.375)))
    """

    def __init__(self, data_shape: Sequence[int], resize: int = -1, rand_crop: bool = False,
                 rand_mirror: bool = False, mean: Optional[Sequence[float]] = None,
                 std: Optional[Sequence[float]] = None, scale: float = 1.0,
                 dtype: str = "float32", decoder: str = "auto",
                 max_pixels: int = DEFAULT_MAX_PIXELS) -> None:
        shape = tuple(int(v) for v in data_shape)
        if len(shape) != 3 or shape[0] not in (1, 3):
            raise ValueError(f"data_shape must be (channels, height, width) with 1 or 3 "
                             f"channels, got {tuple(data_shape)}")
        if np.dtype(dtype) not in (np.float32, np.uint8):
            raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")
        if np.dtype(dtype) == np.uint8 and (mean is not None or std is not None or scale != 1):
            raise ValueError("dtype='uint8' skips normalisation: leave mean/std/scale unset")
        self.shape, self.dtype = shape, np.dtype(dtype)
        self._torch_dtype = torch.uint8 if self.dtype == np.uint8 else torch.float32
        self.augmenter = Augmenter(shape, resize, rand_crop, rand_mirror, mean, std, scale,
                                   dtype, "NCHW", decoder, max_pixels)

    def __call__(self, img_bytes: bytes) -> "torch.Tensor":
        out = torch.empty(self.shape, dtype=self._torch_dtype)  # torch's allocator, reused
        self.augmenter(img_bytes, out.numpy(), torch.rand(3).tolist())
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


class RecordIterableDataset(IterableDataset):
    """Streams image records; each (process, DataLoader worker) reads its own ``InputSplit`` part.

    The process reads part ``part_index`` of ``num_parts`` (default: the ``torch.distributed``
    rank and world size when initialised, else the whole input); its DataLoader workers split
    that again: worker ``w`` of ``W`` reads part ``part_index * W + w`` of ``num_parts * W``. So
    the parts together are the whole input, each record read once. ``source`` is anything
    ``InputSplit`` takes (a path, a list, ``a.rec;b.rec``, a directory, a glob, a shard set's
    manifest; URLs too, read through fsspec with ``storage_options``).
    ``shuffle_buffer > 0`` shuffles within a bounded buffer, seeded by ``(seed, epoch, part)``;
    call ``set_epoch`` each epoch. ``balance="records"`` splits by record count from the
    ``.idx`` files so that ranks get equal shares (needed by DDP, which expects the same number
    of batches on every rank). (``rank``/``world_size`` are the deprecated names of
    ``part_index``/``num_parts``.)
    """

    @renamed_keywords(rank="part_index", world_size="num_parts")
    def __init__(self, source: Union[PathLike, Sequence[PathLike]],
                 transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: str = "tensor",
                 mode: str = "RGB", shuffle_buffer: int = 0, seed: int = 0,
                 part_index: Optional[int] = None, num_parts: Optional[int] = None,
                 balance: str = "bytes", decoder: str = "auto",
                 max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None) -> None:
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

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose shuffle order is used (like ``DistributedSampler.set_epoch``)."""
        self.epoch = int(epoch)

    def part(self) -> Tuple[int, int]:
        """``(part_index, num_parts)`` of the ``InputSplit`` this process/worker reads."""
        info = get_worker_info()
        num_workers, worker_id = (1, 0) if info is None else (info.num_workers, info.id)
        index, count = _process_part(self.part_index, self.num_parts)
        return index * num_workers + worker_id, count * num_workers

    def __iter__(self) -> Iterator[Tuple[Any, Any]]:
        part_index, num_parts = self.part()
        split = InputSplit(self.source, part_index, num_parts, balance=self.balance,
                           storage_options=self.storage_options)
        name = f"record #{{}} of part {part_index}/{num_parts}"
        stream: Iterator[Tuple[int, Tuple[str, int, bytes]]] = \
            enumerate(split.records_with_offsets())
        if self.shuffle_buffer:
            rng = np.random.default_rng([self.seed, self.epoch, part_index])
            stream = buffered_shuffle(stream, self.shuffle_buffer, rng)
        for n, (path, offset, payload) in stream:
            yield self._decoder(payload, path, name.format(n), offset)


__all__ = ["RecordDataset", "RecordIterableDataset", "ImageAugment"]
