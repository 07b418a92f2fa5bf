"""PyTorch datasets over ``.rec`` files: ``RecordDataset`` (map-style), ``RecordIterableDataset``.

Needs ``pip install 'recio[torch]'``; this module is only imported when used (``recio.torch``).

- ``RecordDataset``: random access through the ``.idx`` (or a scan when there is none). Each
  process opens the ``.rec`` itself on first use (the process id is checked, as MXNet's
  ``MXRecordIO`` does), so a dataset created in the main process is safe in ``DataLoader``
  workers, forked or spawned; reads are by position on a memory map, never via a shared
  file pointer.
- ``RecordIterableDataset``: streams one ``InputSplit`` part per reader, with
  ``part_index = rank * num_workers + worker_id`` and ``num_parts = world_size * num_workers``,
  so no two DataLoader workers (on any rank) read the same record.

Both return ``(image, label)``: the image decoded as chosen by ``decode`` (``"tensor"``: uint8
CHW, ``"numpy"``: uint8 HWC, ``"pil"``: a PIL image for torchvision transforms, ``"raw"``: the
undecoded bytes), then ``transform``; the label as a float32 tensor (scalar, or the vector of a
multi-label record), then ``target_transform``. JPEGs go through simplejpeg when it is installed
(``decoder="auto"``; ``"pillow"`` forces Pillow): the same pixels as Pillow for less CPU.
"""
from __future__ import annotations

import io
import os
from typing import Any, Callable, Iterator, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import ImageError, RecordIOError
from recio.image.header import unpack
from recio.image.imageiter import Augmenter, jpeg_module, buffered_shuffle
from recio.records.indexed import index_for
from recio.records.reader import RecordReader
from recio.records.split import InputSplit

try:
    import torch
    from torch.utils.data import Dataset, IterableDataset, get_worker_info
except ImportError as _exc:  # pragma: no cover - exercised only where torch is missing
    raise ImportError("recio.torch needs PyTorch: pip install 'recio[torch]' "
                      f"(import failed: {_exc})") from _exc


PathLike = Union[str, "os.PathLike[str]"]
_DECODES = ("tensor", "numpy", "pil", "raw")


class _Decoder:
    """Turns a record payload into ``(image, label)`` (picklable, shared by both datasets)."""

    def __init__(self, decode: str, mode: str, transform: Optional[Callable],
                 target_transform: Optional[Callable], decoder: str = "auto") -> None:
        self.decoder = decoder
        self._simplejpeg = jpeg_module(decoder) if decode in ("tensor", "numpy") else None
        if decode not in _DECODES:
            raise ValueError(f"decode must be one of {_DECODES}, got {decode!r}")
        if mode not in ("RGB", "L"):
            raise ValueError(f"mode must be 'RGB' or 'L', got {mode!r}")
        self.decode, self.mode = decode, mode
        self.transform, self.target_transform = transform, target_transform

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_simplejpeg"] = None  # a module does not pickle; found again in the worker
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        if self.decode in ("tensor", "numpy"):
            self._simplejpeg = jpeg_module(self.decoder)

    def __call__(self, payload: bytes, path: Optional[str], name: str,
                 offset: Optional[int] = None) -> Tuple[Any, Any]:
        try:
            header, img_bytes = unpack(payload)
        except RecordIOError as exc:
            raise RecordIOError(f"{name}: {exc.message}", path, offset) from None
        image: Any = img_bytes
        arr = None
        if self._simplejpeg is not None and img_bytes[:2] == b"\xff\xd8":
            try:  # same libjpeg-turbo as Pillow, same pixels, less CPU
                arr = self._simplejpeg.decode_jpeg(
                    img_bytes, colorspace="RGB" if self.mode == "RGB" else "GRAY")
            except ValueError:
                arr = None  # let Pillow try, and report
        if arr is not None:
            image = arr if self.decode == "numpy" else torch.from_numpy(
                arr.transpose(2, 0, 1).copy())
        elif self.decode != "raw":
            from PIL import Image, UnidentifiedImageError

            try:
                im = Image.open(io.BytesIO(img_bytes))
                if im.mode != self.mode:
                    im = im.convert(self.mode)
                else:
                    im.load()
            except UnidentifiedImageError:
                raise ImageError(f"{name}: its {len(img_bytes)} image bytes are not in a format "
                                 "Pillow can read", path, offset) from None
            except (OSError, ValueError, SyntaxError, EOFError) as exc:
                raise ImageError(f"{name}: cannot decode its image: {exc}", path, offset) from None
            if self.decode == "pil":
                image = im
            else:
                arr = np.asarray(im)
                if arr.ndim == 2:
                    arr = arr[:, :, None]
                image = (arr if self.decode == "numpy"
                         else torch.from_numpy(arr.transpose(2, 0, 1).copy()))
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


class RecordDataset(Dataset):
    """Map-style dataset over an indexed image ``.rec``: ``ds[i]`` is the i-th record's sample.

    ``path_imgidx`` defaults to the ``.idx`` beside the ``.rec`` (scanned when missing, keys
    ``0..n-1``). ``keys`` restricts and orders the records (e.g. ``range(1, n + 1)`` to leave out
    the header records of a face-recognition dataset). Undecodable images raise ``ImageError``
    naming the key. Safe in ``DataLoader(num_workers > 0)``: files reopen in each process.
    """

    def __init__(self, path_imgrec: PathLike, path_imgidx: Optional[PathLike] = None,
                 keys: Optional[Sequence[Any]] = None, transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: str = "tensor",
                 mode: str = "RGB", key_type: Callable[[str], Any] = int,
                 decoder: str = "auto") -> None:
        self.path_imgrec = os.fspath(path_imgrec)
        # arrays (or the memory-mapped index cache), so forked DataLoader workers share them
        # instead of touching millions of Python objects
        index = index_for(self.path_imgrec, path_imgidx, key_type)
        self.path_imgidx = index.path
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
                               f"{self.path_imgidx or self.path_imgrec}, e.g. {missing[:5]}")
            self.offsets = np.asarray(index.offsets_of(self.keys), dtype=np.int64)
        self._decoder = _Decoder(decode, mode, transform, target_transform, decoder)
        self._reader: Any = None
        self._pid: Optional[int] = None

    def _open(self) -> Any:
        if self._reader is None or self._pid != os.getpid():
            self._reader = RecordReader(self.path_imgrec)  # a new fd and mmap in this process
            self._pid = os.getpid()
        return self._reader

    def __len__(self) -> int:
        return len(self.keys)

    def read_record(self, i: int) -> bytes:
        """The raw payload of the i-th record (no decoding)."""
        return self._open().read_at(int(self.offsets[i]))

    def __getitem__(self, i: int) -> Tuple[Any, Any]:
        i = int(i)  # NumPy / torch integer indices work too
        if i < 0:
            i += len(self.keys)
        if not 0 <= i < len(self.keys):
            raise IndexError(f"index {i} out of range for {len(self.keys)} records")
        offset = int(self.offsets[i])
        return self._decoder(self._open().read_at(offset), self.path_imgrec,
                             f"key {self.keys[i]!r}", offset)

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        state["_reader"], state["_pid"] = None, None  # reopened by each worker
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
                 dtype: str = "float32", decoder: str = "auto") -> None:
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
                                   dtype, "NCHW", decoder)

    def __call__(self, img_bytes: bytes) -> "torch.Tensor":
        out = torch.empty(self.shape, dtype=self._torch_dtype)  # torch's allocator, reused
        self.augmenter(img_bytes, out.numpy(), torch.rand(3).tolist())
        return out


def _rank_and_world(rank: Optional[int], world_size: Optional[int]) -> Tuple[int, int]:
    if rank is not None and world_size is not None:
        return int(rank), int(world_size)
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return dist.get_rank(), dist.get_world_size()
    return 0, 1


class RecordIterableDataset(IterableDataset):
    """Streams image records; each (rank, DataLoader worker) reads its own ``InputSplit`` part.

    ``part_index = rank * num_workers + worker_id`` and ``num_parts = world_size * num_workers``
    (rank and world size from ``torch.distributed`` when initialised, or given), so the parts
    together are the whole input, each record read once. ``source`` is anything ``InputSplit``
    takes (a path, a list, ``a.rec;b.rec``, a directory, a glob). ``shuffle_buffer > 0`` shuffles
    within a bounded buffer, seeded by ``(seed, epoch, part)``; call ``set_epoch`` each epoch.
    ``balance="records"`` splits by record count from the ``.idx`` files so that ranks get equal
    shares (needed by DDP, which expects the same number of batches on every rank).
    """

    def __init__(self, source: Union[PathLike, Sequence[PathLike]],
                 transform: Optional[Callable] = None,
                 target_transform: Optional[Callable] = None, decode: str = "tensor",
                 mode: str = "RGB", shuffle_buffer: int = 0, seed: int = 0,
                 rank: Optional[int] = None, world_size: Optional[int] = None,
                 balance: str = "bytes", decoder: str = "auto") -> None:
        super().__init__()
        if isinstance(source, (list, tuple)):
            self.source: Any = [os.fspath(p) for p in source]
        else:
            self.source = os.fspath(source)
        if int(shuffle_buffer) < 0:
            raise ValueError(f"shuffle_buffer must be >= 0, got {shuffle_buffer}")
        if (rank is None) != (world_size is None):
            raise ValueError("give both rank and world_size, or neither")
        if rank is not None and not 0 <= rank < world_size:
            raise ValueError(f"rank must be in [0, world_size={world_size}), got {rank}")
        self.shuffle_buffer, self.seed, self.epoch = int(shuffle_buffer), int(seed), 0
        self.rank, self.world_size, self.balance = rank, world_size, balance
        self._decoder = _Decoder(decode, mode, transform, target_transform, decoder)

    def set_epoch(self, epoch: int) -> None:
        """Choose the epoch whose shuffle order is used (like ``DistributedSampler.set_epoch``)."""
        self.epoch = int(epoch)

    def part(self) -> Tuple[int, int]:
        """``(part_index, num_parts)`` this process/worker reads."""
        info = get_worker_info()
        num_workers, worker_id = (1, 0) if info is None else (info.num_workers, info.id)
        rank, world = _rank_and_world(self.rank, self.world_size)
        return rank * num_workers + worker_id, world * num_workers

    def __iter__(self) -> Iterator[Tuple[Any, Any]]:
        part_index, num_parts = self.part()
        split = InputSplit(self.source, part_index, num_parts, balance=self.balance)
        name = f"record #{{}} of part {part_index}/{num_parts}"
        stream: Iterator[Tuple[int, Tuple[str, int, bytes]]] = \
            enumerate(split.records_with_offsets())
        if self.shuffle_buffer:
            rng = np.random.default_rng([self.seed, self.epoch, part_index])
            stream = buffered_shuffle(stream, self.shuffle_buffer, rng)
        for n, (path, offset, payload) in stream:
            yield self._decoder(payload, path, name.format(n), offset)


__all__ = ["RecordDataset", "RecordIterableDataset", "ImageAugment"]
