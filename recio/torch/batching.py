"""Whole batches through ``DataLoader``: decoded in one call, handed over without copies.

``RecordDataset.__getitems__`` (which ``DataLoader`` calls with a batch's indices) decodes and
augments every image of the batch into one array. Two costs of the per-sample path go away with
it: ``default_collate`` stacking the samples (a copy), and, in a worker, that stack landing in
*fresh* shared memory, whose pages the kernel zero-fills and maps one by one (for a float32
64x3x224x224 batch that costs more CPU than decoding the 64 JPEGs; uint8 output is a quarter of
it). Here:

- the samples ``__getitems__`` returns are :class:`Sample` tuples ``(image, label)`` viewing the
  batch array; ``default_collate`` hands the whole batch on as it is (``Sample`` is registered in
  torch's ``default_collate_fn_map``, its documented extension point) when the samples are the
  batch's own, in order, else collates them as usual. A ``collate_fn`` of your own receives
  plain ``(image, label)`` tuples.
- in a DataLoader worker the batch array lives in shared memory taken from a small per-worker
  :class:`BatchPool` and is reused: the main process marks a buffer free (a flag byte in the
  same shared memory) when the batch tensor it received, and every view of it, is gone, and
  the worker reuses only buffers so marked and no longer referenced in the worker. A buffer
  whose batch left the worker another way (a custom ``collate_fn``) is never reused.
- in the main process (``num_workers=0``) the pool holds plain arrays, reused once nothing
  refers to them.

The images reach the training loop as one ``torch.Tensor`` per batch, as with
``default_collate``; labels as a tensor (or as ``target_transform``'s values collated).
"""
from __future__ import annotations

import os
import sys
import weakref
from typing import TYPE_CHECKING, Any, Dict, List, Optional, Tuple

import numpy as np

from recio import portable
from recio.image.pixels.codec import decode
from recio.optional import require

if TYPE_CHECKING:  # torch's own types for the checker; require() names what to install
    import torch
else:
    torch = require("torch", feature="recio.torch")
_collate = torch.utils.data._utils.collate  # default_collate's module: its extension point

#: bytes before the batch array in a shared buffer: the flag the main process clears (the
#: array starts aligned for any dtype)
_HEADER = 64
#: how many shared buffers a worker keeps; a batch that finds none free and reusable gets a
#: buffer outside the pool (as torch's own collate does), so nothing ever waits
POOL_SIZE = 8


class _Buffer:
    """One batch array (and, in a worker, the shared memory holding it)."""

    __slots__ = ("array", "shared", "flag", "sent")

    def __init__(self, shape: Tuple[int, ...], dtype: np.dtype, shared: bool) -> None:
        self.sent = False
        if not shared:
            self.array, self.shared, self.flag = np.empty(shape, dtype), None, None
            return
        nbytes = int(np.prod(shape)) * dtype.itemsize
        whole = torch.empty(_HEADER + nbytes, dtype=torch.uint8).share_memory_()
        self.flag = whole[:1].numpy()
        self.flag[0] = 0
        # the view that is pickled: torch sends the shared storage, the receiver maps it
        self.shared = whole[_HEADER:].view(_TORCH_DTYPES[dtype.str]).view(shape)
        self.array = self.shared.numpy()

    def idle(self) -> bool:
        """Nobody but the pool refers to the array (``getrefcount``: the attribute and its
        argument), and the main process, if the batch went there, has let go of it."""
        return sys.getrefcount(self.array) <= 2 and (self.flag is None or self.flag[0] == 0)


_TORCH_DTYPES = {np.dtype(np.uint8).str: torch.uint8, np.dtype(np.float32).str: torch.float32}


class BatchPool:
    """Batch arrays of one process, reused (see the module docstring). ``take(shape, dtype)``
    returns a buffer whose ``array`` the caller fills."""

    def __init__(self, size: int = POOL_SIZE) -> None:
        self.size = size
        self.buffers: List[_Buffer] = []
        self.shared = torch.utils.data.get_worker_info() is not None
        self.created = 0  # buffers allocated so far (the rest of the batches reused one)

    def take(self, shape: Tuple[int, ...], dtype: np.dtype) -> _Buffer:
        dtype = np.dtype(dtype)
        for buf in list(self.buffers):
            if buf.array.shape != shape or buf.array.dtype != dtype:
                continue
            if buf.idle():
                buf.sent = False
                if buf.flag is not None:
                    buf.flag[0] = 1
                return buf
            if buf.flag is not None and buf.flag[0] == 1 and not buf.sent and \
                    sys.getrefcount(buf.array) <= 2:
                self.buffers.remove(buf)  # left the worker some other way: never reuse it
        buf = _Buffer(shape, dtype, self.shared and dtype.str in _TORCH_DTYPES)
        self.created += 1
        if buf.flag is not None:
            buf.flag[0] = 1
        if len(self.buffers) < self.size:
            self.buffers.append(buf)
        else:  # a batch outside the pool: nothing to reuse, nothing to mark
            buf.flag = None
        return buf


def give_back(buffer: _Buffer) -> None:
    """Return a buffer taken from the pool whose batch is not handed out after all."""
    if buffer.flag is not None:
        buffer.flag[0] = 0


def shrink(buffer: _Buffer, n: int) -> _Buffer:
    """A buffer holding the first ``n`` rows of ``buffer`` (a batch some of whose records were
    skipped), outside the pool (a batch of that size is rare: nothing to reuse); ``buffer``
    goes back to the pool."""
    smaller = _Buffer((n,) + buffer.array.shape[1:], buffer.array.dtype, shared=False)
    smaller.array[...] = buffer.array[:n]
    give_back(buffer)
    return smaller


_POOL: List[Any] = [None, None]  # (process id, pool): one pool a process, made on first use


def pool() -> BatchPool:
    """This process's pool (a DataLoader worker gets its own, with shared buffers)."""
    if _POOL[0] != os.getpid():
        _POOL[0], _POOL[1] = os.getpid(), BatchPool()
    return _POOL[1]


class Batch:
    """What ``__getitems__`` decoded: the buffer and the collated labels."""

    __slots__ = ("buffer", "labels", "size", "__weakref__")

    def __init__(self, buffer: _Buffer, labels: Any, size: int) -> None:
        self.buffer, self.labels, self.size = buffer, labels, size

    def collated(self) -> List[Any]:
        """``[images, labels]`` as ``default_collate`` returns them; in a worker, the images in
        a wrapper that pickles as the shared buffer (and is rebuilt as a tensor)."""
        buf = self.buffer
        if buf.flag is not None:
            buf.sent = True  # on its way: reused only once the main process lets go of it
            return [_SharedImages(buf), _wire(self.labels)]
        return [torch.from_numpy(buf.array), self.labels]


class Sample(tuple):
    """``(image, label)`` of one record of a :class:`Batch` (a plain tuple to any code that
    does not know it); pickles as a plain tuple."""

    batch: Batch
    position: int

    def __new__(cls, image: Any, label: Any, batch: Batch, position: int) -> "Sample":
        self = super().__new__(cls, (image, label))
        self.batch, self.position = batch, position
        return self

    def __reduce__(self) -> Tuple[Any, ...]:
        return tuple, (tuple(self),)


def collate_labels(labels: List[Any]) -> Any:
    """The batch's labels as ``default_collate`` makes them (float32 scalars: one vector)."""
    if labels and all(isinstance(v, torch.Tensor) and v.ndim == 0 and v.dtype == torch.float32
                      for v in labels):
        return torch.from_numpy(np.fromiter((float(v) for v in labels), np.float32, len(labels)))
    return _collate.default_collate(labels)


def samples(buffer: _Buffer, labels: Any, per_sample_labels: List[Any]) -> List[Sample]:
    """The batch's samples, in order (what ``__getitems__`` returns)."""
    batch = Batch(buffer, labels, len(per_sample_labels))
    images = torch.from_numpy(buffer.array)
    return [Sample(images[j], lab, batch, j) for j, lab in enumerate(per_sample_labels)]


def _collate_samples(batch: List[Sample], *, collate_fn_map: Optional[dict] = None) -> Any:
    """``default_collate`` for :class:`Sample`: the batch as decoded when the samples are all of
    one batch, in order; else what ``default_collate`` gives for tuples."""
    first = batch[0].batch
    if len(batch) == first.size and all(s.batch is first and s.position == j
                                        for j, s in enumerate(batch)):
        return first.collated()
    return [_collate.collate([s[k] for s in batch], collate_fn_map=collate_fn_map)
            for k in (0, 1)]


class _SharedImages:
    """The images of a worker's batch on their way to the main process."""

    __slots__ = ("buffer",)

    def __init__(self, buffer: _Buffer) -> None:
        self.buffer = buffer

    def __reduce__(self) -> Tuple[Any, ...]:
        return _received, (self.buffer.shared, os.getpid())


#: worker process id -> the shared buffers (storages) last received from it, kept mapped in the
#: main process: when the worker sends a buffer again, torch finds its storage mapped already
#: (by the file's identity), and the batch costs no page faults here. At most POOL_SIZE a
#: worker; a worker's are dropped once it has exited (checked as batches arrive).
_MAPPED: Dict[int, Dict[int, Any]] = {}


def _received(images: "torch.Tensor", pid: int) -> "torch.Tensor":
    """In the main process: the batch tensor, whose buffer is marked free for its worker when
    the tensor and every view of it are gone (they all hold the array the finalizer watches)."""
    storage = images.untyped_storage()
    mapped = _MAPPED.get(pid)
    if mapped is None:
        for other in [p for p in _MAPPED if not portable.process_alive(p)]:
            del _MAPPED[other]
        mapped = _MAPPED[pid] = {}
    mapped[storage.data_ptr()] = storage
    while len(mapped) > POOL_SIZE:
        del mapped[next(iter(mapped))]
    array = images.numpy()
    whole = torch.empty(0, dtype=torch.uint8).set_(storage)
    weakref.finalize(array, _release, whole)
    return torch.from_numpy(array)


def _release(whole: "torch.Tensor") -> None:
    whole[0] = 0


class _ArrayTensor:
    """A small tensor sent by value (pickled with NumPy), not through shared memory."""

    __slots__ = ("array",)

    def __init__(self, array: np.ndarray) -> None:
        self.array = array

    def __reduce__(self) -> Tuple[Any, ...]:
        return torch.from_numpy, (self.array,)


def _wire(labels: Any) -> Any:
    if isinstance(labels, torch.Tensor) and labels.numel() <= 65536:
        return _ArrayTensor(labels.numpy())
    return labels


_collate.default_collate_fn_map[Sample] = _collate_samples


# -- encoded batches, for decoding on the GPU ---------------------------------------------------
def collate_encoded(batch: List[Tuple[Any, Any]]) -> List[Any]:
    """``collate_fn`` for ``RecordDataset(decode="raw")`` without a transform: ``[images,
    labels]`` with ``images`` a list of 1-D uint8 tensors, each an image's encoded bytes (what
    :func:`decode_on_device` takes; a fifth of a decoded crop through worker shared memory),
    and the labels collated as ``default_collate`` does."""
    images = [torch.frombuffer(bytearray(img), dtype=torch.uint8) for img, _ in batch]
    return [images, _collate.default_collate([label for _, label in batch])]


def decode_on_device(images: List[Any], device: Any = "cuda", mode: str = "RGB"
                     ) -> List["torch.Tensor"]:
    """Decode a batch of encoded images (bytes, or the uint8 tensors of
    :func:`collate_encoded`) into uint8 CHW tensors on ``device``.

    On a CUDA device the JPEGs are decoded together by nvJPEG, through
    ``torchvision.io.decode_jpeg(..., device=device)`` (``pip install torchvision``, the build
    matching your CUDA torch); other formats, and every image on the CPU, are decoded by
    ``recio.image.pixels.codec.decode`` (MXNet's pixels) and moved to ``device``. ``mode``:
    ``"RGB"`` or ``"L"`` (greyscale, ``1 x H x W``).
    """
    if mode not in ("RGB", "L"):
        raise ValueError(f"mode must be 'RGB' or 'L', got {mode!r}")
    device = torch.device(device)
    data = [img if isinstance(img, torch.Tensor) else torch.frombuffer(bytearray(img),
                                                                       dtype=torch.uint8)
            for img in images]
    out: List[Any] = [None] * len(data)
    jpegs = [i for i, d in enumerate(data) if bytes(d[:3].tolist()) == b"\xff\xd8\xff"]
    if device.type == "cuda" and jpegs:
        io = require("torchvision", feature="decode_on_device on a CUDA device").io
        read = io.ImageReadMode.RGB if mode == "RGB" else io.ImageReadMode.GRAY
        for i, image in zip(jpegs, io.decode_jpeg([data[i] for i in jpegs], mode=read,
                                                   device=device)):
            out[i] = image
    for i, d in enumerate(data):
        if out[i] is None:
            array = decode(d.numpy(), 1 if mode == "RGB" else 0)
            if array.ndim == 2:
                array = array[:, :, None]
            out[i] = torch.from_numpy(np.ascontiguousarray(array.transpose(2, 0, 1))).to(device)
    return out
