"""``ImageRecordIter``: batches of decoded, augmented images from a ``.rec``, as MXNet's C++ one.

Pipeline (all inside recio, no MXNet)::

    records (.idx order / permutation, or InputSplit stream + bounded shuffle buffer)
      -> decode + augment in ``preprocess_threads`` threads, straight into the batch array
      -> batches prefetched by a ``ThreadedIter`` (at most ``prefetch_buffer`` waiting)

Images are decoded by ``recio.image.codec.decode`` (MXNet's pixels, the decompression-bomb
guard, DCT-scaled JPEG decoding when ``resize`` allows); the decoders (Pillow, or simplejpeg when
installed) and NumPy's arithmetic release the GIL, so the threads run in parallel. A batch array
that the consumer no longer references is reused for a later batch (a float32 64x3x224x224 batch
is 38 MB of fresh pages otherwise).
Augmentation for one image, in MXNet's order: ``resize`` the shorter side, then a crop of
``data_shape`` (random with ``rand_crop``, else centred; images smaller than the crop are first
scaled up to cover it), then a horizontal flip with probability 1/2 (``rand_mirror``), then
``(x - mean) / std * scale`` into float32 NCHW RGB. ``dtype="uint8"`` skips normalisation (for
GPU-side normalisation), usually with ``layout="NHWC"``.

The random choices of every image are drawn in stream order from generators seeded by
``(seed, epoch)``, so a run is reproducible whatever the thread timing, and each ``reset()`` gives
a new order. Every record of the part appears exactly once per epoch; ``round_batch`` fills the
last batch from the start of the same epoch (``pad`` says how many were borrowed). Undecodable
records are skipped with a ``SkippedRecordWarning`` naming the record and counted in
``num_skipped``.

``RecordBatchIter`` is that machinery with the augmentation and the epoch rule passed in:
``recio.mx.io.ImageRecordIter`` runs it with ``recio.image.augment.MXAugmenter`` and MXNet's
epochs (``carry_over``).
"""
from __future__ import annotations

import math
import os
import sys
import threading
import warnings
import weakref
from concurrent.futures import ThreadPoolExecutor
from itertools import islice
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple, Union, cast

import numpy as np
from PIL import Image

from recio.errors import ImageError, RecordIOError
from recio.image import cvops
from recio.image.augment import RRC_ATTEMPTS, random_resized_crop_box
from recio.image.codec import DEFAULT_MAX_PIXELS, check_decoder, decode, jpeg_size
from recio.image.header import unpack
from recio.records.cache import ShardCache
from recio.records.diagnose import explain_indexed_read, open_checked_index
from recio.records.index import EVERY_LINE, warn_repeated_keys
from recio.records.index_format import key_text
from recio.records.reader import RecordReader
from recio.records.shuffle import ShuffleBuffer
from recio.records.split import InputSplit, SourceLayout, record_range
from recio.records.threaded import ThreadedIter
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]


class SkippedRecordWarning(RuntimeWarning):
    """A record was skipped because its image (or its label) could not be used."""


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


#: the random resized crop's default ranges, ImageNet's (torchvision's and GluonCV's defaults)
RRC_AREA = (0.08, 1.0)
RRC_RATIO = (3 / 4, 4 / 3)
#: the uniforms one image's random resized crop may use: three a box (area, aspect, side swap)
#: for RRC_ATTEMPTS boxes, and two for the position of the box that fits
_RRC_DRAWS = 3 * RRC_ATTEMPTS + 2
#: the name prefix of the decoding threads (close() on one of them must not wait for itself)
_DECODE_THREAD = "recio-decode"



class Augmenter:
    """Decode one image record's bytes and write the augmented result into a batch slot.

    Shared read-only by the worker threads. ``params`` is one row of :meth:`params`: uniform
    numbers in [0, 1) drawn in stream order by the caller (crop x, crop y, mirror, then the
    random resized crop's draws), so a seed gives the same pixels whatever thread runs an image.
    Public so that custom loaders can reuse the augmentation (``recio.torch.ImageAugment`` does).

    ``random_resized_crop=True`` replaces the fixed-size crop by ImageNet's training crop: a box
    of ``area`` (fraction of the image, uniform) and aspect ``ratio`` (width / height, uniform,
    sides swapped with probability 1/2: MXNet's rule, ``recio.image.augment``'s
    ``random_resized_crop_box``; ten draws, else the largest centred box within ``ratio``),
    resized to ``data_shape`` bilinearly (``recio.image.cvops.resize``: OpenCV's pixels). A JPEG
    whose box shrinks by 2 or more is decoded at 1/2, 1/4 or 1/8 scale in the DCT domain first.
    """

    def __init__(self, data_shape: Sequence[int], resize: int = -1, rand_crop: bool = False,
                 rand_mirror: bool = False, mean: Optional[np.ndarray] = None,
                 std: Optional[np.ndarray] = None, scale: float = 1.0, dtype: str = "float32",
                 layout: str = "NCHW", decoder: str = "auto",
                 max_pixels: int = DEFAULT_MAX_PIXELS, *, random_resized_crop: bool = False,
                 area: Tuple[float, float] = RRC_AREA,
                 ratio: Tuple[float, float] = RRC_RATIO) -> None:
        c, h, w = (int(v) for v in data_shape)
        check_decoder(decoder)
        self.decoder, self.max_pixels = decoder, int(max_pixels)
        self.channels, self.height, self.width = c, h, w
        self.color = 1 if c == 3 else 0  # the decode flag: colour or greyscale
        self.resize = int(resize)
        self.rand_crop, self.rand_mirror = bool(rand_crop), bool(rand_mirror)
        self.random_resized_crop = bool(random_resized_crop)
        #: how many uniform numbers one image takes (a row of ``params``)
        self.draws = 3 + (_RRC_DRAWS if self.random_resized_crop else 0)
        self.area = (float(area[0]), float(area[1]))
        self.ratio = (float(ratio[0]), float(ratio[1]))
        if self.random_resized_crop:
            if not 0 < self.area[0] <= self.area[1] <= 1:
                raise ValueError(f"area must be a range 0 < min <= max <= 1 (fractions of the "
                                 f"image), got {tuple(area)}")
            if not 0 < self.ratio[0] <= self.ratio[1]:
                raise ValueError(f"ratio must be a range 0 < min <= max (width / height), got "
                                 f"{tuple(ratio)}")
        self.dtype, self.layout = np.dtype(dtype), layout
        self.sample_shape = (c, h, w) if layout == "NCHW" else (h, w, c)
        # (x - mean) * k with k = scale / std, shaped to broadcast over one sample
        shape = (c, 1, 1) if layout == "NCHW" else (1, 1, c)
        self.mean: Optional[np.ndarray] = None
        self.k: Optional[np.ndarray] = None
        if self.dtype == np.float32:
            if mean is not None:
                m = np.asarray(mean, dtype=np.float32)
                if m.ndim == 3 and layout == "NHWC":
                    m = m.transpose(1, 2, 0)
                m = m if m.ndim == 3 else m.reshape(shape)
                if np.any(m != 0):
                    self.mean = np.ascontiguousarray(m)
            s = np.ones(c, np.float32) if std is None else np.asarray(std, np.float32)
            k = (np.float32(scale) / s).astype(np.float32).reshape(shape)
            if np.any(k != 1):
                self.k = k
        # a per-channel mean over a CHW slot: the crop is first copied as uint8 CHW into a
        # per-thread scratch, then normalised with contiguous (SIMD) passes
        self._staged = layout == "NCHW" and (self.mean is None or self.mean.shape[1:] == (1, 1))
        self._scratch = threading.local()

    def params(self, rng: np.random.Generator, slots: Sequence[int]) -> np.ndarray:
        """The random numbers of the records going to ``slots``: three uniforms each (crop x,
        crop y, mirror), and with ``random_resized_crop`` the box's draws after them."""
        return rng.random((len(slots), self.draws))

    def decode(self, img_bytes: bytes) -> np.ndarray:
        """The image as a uint8 HWC array (C = 1 or 3), shorter side scaled to ``resize`` if set.

        JPEGs are decoded at 1/2, 1/4 or 1/8 scale in the DCT domain when that still leaves the
        shorter side at least ``resize``, which makes large photos much cheaper to decode.
        Undecodable bytes, or an image declaring more than ``max_pixels`` pixels, raise
        :class:`~recio.errors.ImageError`.
        """
        arr = self._decode(img_bytes)
        return arr[:, :, None] if arr.ndim == 2 else arr

    def _decode(self, img_bytes: bytes, min_side: int = 0, scratch: bool = False) -> np.ndarray:
        """Decoded (HW or HWC) and resized, uncropped (``scratch``: maybe in this thread's
        decode buffer, which the thread's next decode overwrites)."""
        img = decode(img_bytes, self.color, min_side=max(self.resize, min_side, 0),
                     max_pixels=self.max_pixels, decoder=self.decoder, scratch=scratch)
        if self.resize > 0:
            h, w = img.shape[:2]
            if min(w, h) != self.resize:
                size = ((self.resize, h * self.resize // w) if w <= h
                        else (w * self.resize // h, self.resize))
                img = _resize(img, max(1, size[0]), max(1, size[1]))
        return img

    def to_array(self, img_bytes: bytes, params: Sequence[float] = (0.5, 0.5, 1.0)) -> np.ndarray:
        """The augmented image as a uint8 HWC view: crop (random with ``rand_crop`` at
        fractions ``params[0:2]``, else centred; the random resized crop with
        ``random_resized_crop``), mirrored when ``params[2] < 0.5``."""
        return self._view(img_bytes, params, scratch=False)

    def _view(self, img_bytes: bytes, params: Sequence[float], scratch: bool) -> np.ndarray:
        if self.random_resized_crop:
            return self._mirror(self._resized_crop(img_bytes, params), params)
        img = self._decode(img_bytes, scratch=scratch)
        h, w = img.shape[:2]
        cw, ch = self.width, self.height
        if w < cw or h < ch:  # too small: scale up (keeping the aspect) until the crop fits
            s = max(cw / w, ch / h)
            w, h = max(cw, math.ceil(w * s)), max(ch, math.ceil(h * s))
            img = _resize(img, w, h)
        if self.rand_crop:
            x0 = min(int(params[0] * (w - cw + 1)), w - cw)
            y0 = min(int(params[1] * (h - ch + 1)), h - ch)
        else:
            x0, y0 = (w - cw) // 2, (h - ch) // 2
        return self._mirror(img[y0:y0 + ch, x0:x0 + cw], params)

    def _mirror(self, view: np.ndarray, params: Sequence[float]) -> np.ndarray:
        if view.ndim == 2:
            view = view[:, :, None]
        if self.rand_mirror and params[2] < 0.5:
            view = view[:, ::-1]
        return view

    def _resized_crop(self, img_bytes: bytes, params: Sequence[float]) -> np.ndarray:
        """The random resized crop (HW or HWC, ``data_shape``'s size), before the mirror."""
        draws = _Draws(params[3:])
        size = None if self.resize > 0 else jpeg_size(img_bytes)
        if size is None:  # not a JPEG (or resized first): decode, then draw on its size
            img, scale = self._decode(img_bytes, scratch=True), 1.0
            width, height = img.shape[1], img.shape[0]
            box = self._box(width, height, draws)
        else:  # a JPEG: draw the box first, then decode no larger than the box needs
            width, height = size
            box = self._box(width, height, draws)
            need = max(self.width / box[2], self.height / box[3])  # the box's scale factor
            min_side = math.ceil(need * min(width, height)) if need < 0.5 else 0
            img = self._decode(img_bytes, min_side, scratch=True)
            scale = img.shape[1] / width
        x, y, bw, bh = box
        x0, y0 = int(x * scale), int(y * scale)
        x1 = max(x0 + 1, min(img.shape[1], int(math.ceil((x + bw) * scale))))
        y1 = max(y0 + 1, min(img.shape[0], int(math.ceil((y + bh) * scale))))
        return cvops.resize(img[y0:y1, x0:x1], self.width, self.height, cvops.INTER_LINEAR)

    def _box(self, width: int, height: int, draws: "_Draws") -> Tuple[int, int, int, int]:
        box = random_resized_crop_box(width, height, self.area, self.ratio, draws)
        if box is not None:
            return box
        # every draw missed (an extreme aspect): the largest centred box within ``ratio``
        bw, bh = width, height
        if width / height < self.ratio[0]:
            bh = max(1, min(height, round(width / self.ratio[0])))
        elif width / height > self.ratio[1]:
            bw = max(1, min(width, round(height * self.ratio[1])))
        return (width - bw) // 2, (height - bh) // 2, bw, bh

    def __call__(self, img_bytes: bytes, out: np.ndarray, params: Sequence[float]) -> None:
        """Decode + augment into ``out`` (one sample of the batch array, in its layout/dtype)."""
        # the view is copied into ``out`` before this thread decodes again: the decode may
        # use the thread's scratch buffer
        view = self._view(img_bytes, params, scratch=True)
        if self.layout == "NCHW":
            src = view.transpose(2, 0, 1)
            if self._staged and (self.mean is not None or self.k is not None):
                src = self._stage(src)
        elif view.strides[1] < 0 and self.mean is None and self.k is None:
            # a mirrored HWC copy is much faster one channel at a time (long inner loops)
            for c in range(self.channels):
                out[:, :, c] = view[:, :, c]
            return
        else:
            src = view
        if self.mean is not None:
            np.subtract(src, self.mean, out=out)
            if self.k is not None:
                np.multiply(out, self.k, out=out)
        elif self.k is not None:
            np.multiply(src, self.k, out=out)
        else:
            out[...] = src

    def _stage(self, chw: np.ndarray) -> np.ndarray:
        """``chw`` (a strided uint8 view) copied into this thread's contiguous scratch: the
        float passes after it then run on contiguous memory (same values)."""
        scratch = getattr(self._scratch, "array", None)
        if scratch is None or scratch.shape != chw.shape:
            scratch = self._scratch.array = np.empty(chw.shape, np.uint8)
        scratch[...] = chw
        return scratch

    def __getstate__(self) -> dict:
        state = dict(self.__dict__)
        del state["_scratch"]  # per thread, and per process
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self._scratch = threading.local()


class _Draws:
    """A row of uniforms drawn ahead (in stream order, by the producer), served one by one as
    the two ``Generator`` methods ``random_resized_crop_box`` calls: the box rule stays in one
    place and the pixels do not depend on which thread runs the image."""

    __slots__ = ("values", "next")

    def __init__(self, values: Sequence[float]) -> None:
        self.values, self.next = values, 0

    def random(self) -> float:
        value = float(self.values[self.next])
        self.next += 1
        return value

    def integers(self, low: int, high: int) -> int:
        """Uniform in ``[low, high)``, as ``Generator.integers``."""
        return low + min(int(self.random() * (high - low)), high - low - 1)


def _resize(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Bilinear resize (Pillow's) of a uint8 HW or HWC array."""
    return np.asarray(Image.fromarray(img).resize((width, height), Image.Resampling.BILINEAR))


class _Engine:
    """The state the producer thread needs (no reference back to the iterator)."""

    def __init__(self, it: "RecordBatchIter") -> None:
        self.unpack = unpack
        self.path = it.path_imgrec
        self.batch_size, self.label_width = it.batch_size, it.label_width
        self.augment = it.augmenter
        self.data_shape = (it.batch_size,) + tuple(it.augmenter.sample_shape)
        self.dtype = np.dtype(it.augmenter.dtype)
        self.shuffle, self.seed = it.shuffle, it.seed
        self.shuffle_buffer = it.shuffle_buffer
        self.round_batch, self.carry_over = it.round_batch, it.carry_over
        self.part_index, self.num_parts = it.part_index, it.num_parts
        self.labels, self.strict_labels = it.labels, it.strict_labels
        # batch arrays handed out before, reused once nobody else holds them (see _new_data)
        self.buffers: List[np.ndarray] = []
        self.max_buffers = it.prefetch_buffer + 3
        self.recycle = sys.implementation.name == "cpython"
        self.skipped = 0
        self.reader = None
        self.keys: Optional[List[Any]] = None
        self.offsets: Optional[List[int]] = None
        self.storage_options = it.storage_options
        cache = ShardCache.configured(it.cache_dir, it.cache_limit, self.storage_options)
        self.layout: Optional[SourceLayout] = None
        if it.path_imgidx is not None:
            self.reader = RecordReader(self.path, storage_options=self.storage_options,
                                       shard_cache=cache)
            try:
                index = open_checked_index(self.path, it.path_imgidx, rec_size=self.reader.size,
                                           storage_options=self.storage_options,
                                           shard_cache=cache)
            except BaseException:
                self.reader.close()
                raise
            self.reader.source.use_index(index)  # a remote object: one GET a record
            self.index = index
            warn_repeated_keys(index, EVERY_LINE, self.path)
            keys, offsets = index.key_list(), index.offsets.tolist()
            lo, hi = record_range(len(keys), self.part_index, self.num_parts)
            self.keys, self.offsets = keys[lo:hi], offsets[lo:hi]
        elif cache is not None:  # found once, so a later epoch asks the store for nothing
            self.layout = SourceLayout(self.path, self.storage_options, cache)
        self.threads = it.preprocess_threads  # started last: a bad .idx must not leak threads
        self.pool = ThreadPoolExecutor(max_workers=it.preprocess_threads,
                                       thread_name_prefix=_DECODE_THREAD)

    def close(self) -> None:
        # a finalizer may run this on one of the pool's own threads, which cannot wait for itself
        own = threading.current_thread().name.startswith(_DECODE_THREAD)
        self.pool.shutdown(wait=not own, cancel_futures=True)
        if self.reader is not None:
            self.reader.close()
            self.reader = None

    # -- records ---------------------------------------------------------------------------
    def records(self, sweep: int) -> Iterator[Tuple[str, bytes]]:
        """``(name for messages, payload)`` of every record of the part, in sweep ``sweep``'s
        order (a new order for each sweep when shuffling)."""
        rng = np.random.default_rng([self.seed, sweep, self.part_index, 0])
        if self.keys is not None:
            order = rng.permutation(len(self.keys)) if self.shuffle else range(len(self.keys))
            assert self.reader is not None and self.offsets is not None  # open with the keys
            keys, offsets, read_at = self.keys, self.offsets, self.reader.read_at
            for i in order:
                try:
                    record = read_at(offsets[i])
                except RecordIOError as exc:  # the index's fault or the .rec's: say which
                    raise explain_indexed_read(self.reader, self.index, offsets[i],
                                               exc) from None
                yield f"key {key_text(keys[i])}", record
            return

        split = InputSplit(self.path, self.part_index, self.num_parts,
                           storage_options=self.storage_options, _layout=self.layout)
        part = "" if self.num_parts == 1 else f" of part {self.part_index}/{self.num_parts}"
        stream: Iterator[Tuple[str, bytes]] = (
            (f"record #{n}{part}", payload) for n, payload in enumerate(split))
        if self.shuffle:
            buffer: ShuffleBuffer[Tuple[str, bytes]] = ShuffleBuffer(self.shuffle_buffer, rng)
            stream = buffer.shuffle(stream)
        yield from stream

    # -- one record ------------------------------------------------------------------------
    def process(self, record: Tuple[str, bytes], data: np.ndarray, label: np.ndarray,
                index: np.ndarray, slot: int, params: np.ndarray) -> Optional[str]:
        """Decode ``record`` into slot ``slot``; returns None, or why the record was skipped
        (a label that does not fit with ``strict_labels`` raises :class:`RecordIOError`)."""
        name, payload = record
        img = b""
        try:
            header, img = self.unpack(payload)
            problem = self._label(name, header, label[slot])
            if problem is not None:
                return problem
            index[slot] = header.id
            self.augment(img, data[slot], params)
        except ImageError as exc:
            return exc.message
        return None

    def _label(self, name: str, header: Any, row: np.ndarray) -> Optional[str]:
        """Fill ``row`` with the record's labels (or its ``path_imglist`` line's)."""
        lw = self.label_width
        if self.labels is not None:
            found = self.labels.get(int(header.id))
            if found is None:
                raise RecordIOError(f"{name}: its image id {header.id} is not in path_imglist",
                                    path=_describe_path(self.path))
            row[:] = found
            return None
        count = 1 if header.flag == 0 else header.flag
        if count != lw and (self.strict_labels or count < lw):
            what = f"it has {count} label{'s' * (count != 1)} but label_width={lw}"
            if self.strict_labels:
                raise RecordIOError(f"{name}: {what}; set label_width={count} or give labels "
                                    "with path_imglist (MXNet requires them to match)",
                                    path=_describe_path(self.path))
            return what
        row[:] = header.label if header.flag == 0 else header.label[:lw]
        return None

    def _process_many(self, records: List[Tuple[str, bytes]], data: np.ndarray,
                      label: np.ndarray, index: np.ndarray, first_slot: int,
                      params: np.ndarray) -> List[Optional[str]]:
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
        bs = self.batch_size
        seed = [self.seed, sweep, self.part_index, 1] + ([offset] if offset else [])
        aug_rng = np.random.default_rng(seed)
        records = _Counted(islice(self.records(sweep), offset, None))
        first: List[Tuple[str, bytes]] = []  # the epoch's first good records, for round_batch
        while True:
            data = self._new_data()
            label = np.zeros((bs, self.label_width), dtype=np.float32)
            index = np.zeros(bs, dtype=np.uint64)
            filled = self._fill(records, data, label, index, 0, aug_rng, first)
            if filled == 0:
                return
            pad, resume = 0, None
            if filled < bs:
                pad = bs - filled
                if self.round_batch and self.carry_over:
                    # MXNet: fill from the next sweep, where the next epoch then continues
                    counted = _Counted(self.records(sweep + 1))
                    filled = self._fill(counted, data, label, index, filled, aug_rng, None)
                    resume = (sweep + 1, counted.count)
                elif self.round_batch and first:
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

    def _fill(self, records: Iterator[Tuple[str, bytes]], data: np.ndarray, label: np.ndarray,
              index: np.ndarray, filled: int, aug_rng: np.random.Generator,
              first: Optional[List[Tuple[str, bytes]]]) -> int:
        """Decode records into slots ``filled..`` until the batch is full or records run out."""
        bs = self.batch_size
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
                if problem is not None:
                    self.skipped += 1
                    warnings.warn(f"{_describe_path(self.path)}: {record[0]} skipped: {problem}",
                                  SkippedRecordWarning, stacklevel=2)
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


def _describe_path(path: Any) -> str:
    return path if isinstance(path, str) else ";".join(path)


def _close_all(box: List[Optional[ThreadedIter]], engine: _Engine) -> None:
    threaded, box[0] = box[0], None
    if threaded is not None:
        threaded.close()
    engine.close()


class RecordBatchIter:
    """Batches of decoded, augmented images from an image ``.rec``: the machinery under
    :class:`ImageRecordIter` and ``recio.mx.io.ImageRecordIter``.

    ``augmenter`` decodes one record's image into one slot of the batch: it has
    ``sample_shape`` and ``dtype`` (one sample's), ``params(rng, slots)`` (the random numbers of
    the records going to ``slots``, drawn in stream order from the epoch's generator) and
    ``augmenter(image_bytes, slot_array, params_row)``; :class:`Augmenter` and
    ``recio.image.augment.MXAugmenter`` are two. Batches are ``DataBatch`` objects whose
    ``data`` is ``(batch_size,) + sample_shape`` and ``label`` float32 ``(batch_size,
    label_width)``.

    ``labels`` (image id -> labels, e.g. from a ``.lst``) replaces the records' own labels;
    ``strict_labels`` raises :class:`~recio.errors.RecordIOError` for a record whose label count
    differs from ``label_width`` (else a record with too few is skipped, extra ones dropped).
    ``carry_over`` is MXNet's ``round_batch``: the epoch's last batch is filled from the start
    of the next pass over the records, and the next epoch continues from there when that batch
    had been made by the time of ``reset()`` (``round_batch`` alone fills it from the start of
    the same epoch, and every epoch starts afresh). MXNet's producer thread runs up to 16
    batches ahead of the consumer, so on a fast machine that batch has been made when it lies
    within 16 batches of the last one taken; ``carry_lookahead`` (16 for MXNet) makes that rule
    deterministic here: ``reset()`` reads ahead (decoding at most that many batches, as MXNet's
    producer would have) to find out.
    """

    def __init__(self, path_imgrec: Union[PathLike, Sequence[PathLike]], augmenter: Any,
                 batch_size: int, *, path_imgidx: Optional[PathLike] = None,
                 label_width: int = 1, shuffle: bool = False, seed: int = 0,
                 preprocess_threads: int = 4, prefetch_buffer: int = 4, num_parts: int = 1,
                 part_index: int = 0, round_batch: bool = True, shuffle_buffer: int = 1024,
                 labels: Optional[Dict[int, np.ndarray]] = None, strict_labels: bool = False,
                 carry_over: bool = False, carry_lookahead: int = 0,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None) -> None:
        _check_positive(batch_size=batch_size, label_width=label_width,
                        preprocess_threads=preprocess_threads, prefetch_buffer=prefetch_buffer,
                        num_parts=num_parts, shuffle_buffer=shuffle_buffer)
        if not 0 <= part_index < num_parts:
            raise ValueError(f"part_index must be in [0, num_parts={num_parts}), got {part_index}")
        if isinstance(path_imgrec, (list, tuple)):
            if path_imgidx is not None:
                raise ValueError("path_imgidx works with a single path_imgrec; pass one file")
            self.path_imgrec: Any = [os.fspath(p) for p in path_imgrec]
        else:
            self.path_imgrec = os.fspath(cast(PathLike, path_imgrec))  # not a list: one path
        self.path_imgidx = None if path_imgidx is None else os.fspath(path_imgidx)
        self.storage_options = storage_options
        self.cache_dir, self.cache_limit = cache_dir, cache_limit
        self.augmenter = augmenter
        self.batch_size, self.label_width = int(batch_size), int(label_width)
        self.shuffle, self.seed, self.shuffle_buffer = bool(shuffle), int(seed), int(shuffle_buffer)
        self.round_batch, self.carry_over = bool(round_batch), bool(carry_over)
        self.carry_lookahead = max(0, int(carry_lookahead))
        self.num_parts, self.part_index = int(num_parts), int(part_index)
        self.preprocess_threads = int(preprocess_threads)
        self.prefetch_buffer = int(prefetch_buffer)
        self.labels, self.strict_labels = labels, bool(strict_labels)
        self._engine = _Engine(self)
        self._epoch = 0
        self._start_at = (0, 0)  # this epoch's (sweep, offset)
        self._resume: Optional[Tuple[int, int]] = None  # where the next epoch carries on
        self._position = 0  # records of the sweep read for the batches taken so far
        self._ended = False
        self._box: List[Optional[ThreadedIter]] = [None]
        self._finalizer = weakref.finalize(self, _close_all, self._box, self._engine)
        self._start()

    def _start(self) -> None:
        engine, (sweep, offset) = self._engine, self._start_at
        self._resume, self._position, self._ended = None, offset, False
        self._box[0] = ThreadedIter(lambda: engine.batches(sweep, offset),
                                    capacity=self.prefetch_buffer, name="recio-ImageRecordIter")

    @property
    def epoch(self) -> int:
        """Number of the current epoch (0 at first, +1 per ``reset()``)."""
        return self._epoch

    @property
    def num_skipped(self) -> int:
        """Records skipped so far (all epochs) because they could not be decoded."""
        return self._engine.skipped

    @property
    def num_records(self) -> Optional[int]:
        """Records in this part when an ``.idx`` was given (else None: the file is streamed)."""
        return None if self._engine.keys is None else len(self._engine.keys)

    def __iter__(self) -> "RecordBatchIter":
        return self

    def __next__(self) -> DataBatch:
        threaded = self._box[0]
        if threaded is None:
            raise StopIteration
        try:
            batch, resume, self._position = next(threaded)
        except StopIteration:
            self._ended = True
            raise
        if resume is not None:
            self._resume = resume
        return batch

    def next(self) -> DataBatch:
        """The next batch of this epoch; ``StopIteration`` at its end (MXNet's ``next()``)."""
        return self.__next__()

    def reset(self) -> None:
        """Start the next epoch (new order and augmentation, reproducible from ``seed``)."""
        if self._box[0] is None:
            raise RuntimeError(f"{type(self).__name__} is closed")
        if self.carry_over and self.round_batch and self._resume is None and not self._ended:
            self._resume = self._read_ahead()
        self._box[0].close()
        self._epoch += 1
        sweep = self._start_at[0]
        self._start_at = self._resume if self._resume is not None else (sweep + 1, 0)
        self._start()

    def _read_ahead(self) -> Optional[Tuple[int, int]]:
        """Where the next epoch continues if this epoch's padded batch is within
        ``carry_lookahead`` batches (reading them, as MXNet's producer would have), else None."""
        remaining = self._engine.remaining(self._position)
        if remaining is not None and remaining > self.carry_lookahead * self.batch_size:
            return None
        threaded = self._box[0]
        assert threaded is not None  # _start() made it
        for _ in range(self.carry_lookahead):
            try:
                _, resume, self._position = next(threaded)
            except StopIteration:
                return None
            if resume is not None:
                return resume
        return None

    def close(self) -> None:
        """Stop the prefetch and decode threads and close the file. Idempotent."""
        self._finalizer()

    def __enter__(self) -> "RecordBatchIter":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class ImageRecordIter(RecordBatchIter):
    """Batches of images and labels from an image ``.rec``, with MXNet's parameter names, as
    NumPy arrays.

    This is recio's own iterator. Code ported from MXNet, which reads ``batch.data[0]`` (a list
    of NDArrays with ``.asnumpy()``), wants ``recio.mx.io.ImageRecordIter``: MXNet's
    ``DataBatch``, every MXNet parameter, MXNet's pixels and epoch boundaries. This one is for
    new code: ``batch.data`` is the NumPy array itself, JPEGs may decode at reduced size (much
    faster when ``resize`` shrinks them), it has ``layout="NHWC"``, URLs, shard sets, and every
    epoch holds each record exactly once.

    ``data_shape=(c, h, w)`` (c = 3 RGB or 1 grey); each batch is a ``DataBatch`` with ``data``
    float32 NCHW normalised as ``(x - mean) / std * scale`` (or uint8, skipping normalisation, with
    ``dtype="uint8"``; ``layout="NHWC"`` for channels-last), ``label`` float32
    ``(batch_size, label_width)`` and ``pad``. Iterate for one epoch; ``reset()`` starts the next::

        it = ImageRecordIter(path_imgrec="train.rec", path_imgidx="train.idx",
                             data_shape=(3, 224, 224), batch_size=64, shuffle=True,
                             rand_crop=True, rand_mirror=True, mean_r=123.68, mean_g=116.28,
                             mean_b=103.53, std_r=58.395, std_g=57.12, std_b=57.375)
        for epoch in range(10):
            for batch in it:
                train_step(batch.data, batch.label)
            it.reset()

    Without ``path_imgidx`` the file is streamed (``path_imgrec`` may then list several files,
    as ``InputSplit`` accepts, or be a shard set's manifest) and ``shuffle`` uses a buffer of
    ``shuffle_buffer`` records. Paths may be URLs (``s3://...``, with ``storage_options``);
    with ``cache_dir`` (or ``RECIO_CACHE_DIR``) their whole files are kept in that local
    folder, at most ``cache_limit`` bytes, and later epochs read local disk
    (``recio.records.cache``).
    ``num_parts``/``part_index`` read one part (by record count with an ``.idx``, by bytes as
    MXNet's InputSplit without). ``mean_img`` is an array of shape ``data_shape`` or a ``.npy``
    path (MXNet's ``.nd`` mean files are not read). Call ``close()`` (or use ``with``) to stop
    the threads at once; garbage collection does it too.

    Images decode as MXNet's do (``recio.image.codec.decode``; a 1-channel ``data_shape`` gets
    OpenCV's greyscale). JPEGs are decoded by simplejpeg (libjpeg-turbo, a dependency), PNGs by
    OpenCV when ``pip install 'recio[fast]'`` installed it, anything else by Pillow, all with
    the same pixels; ``decoder="pillow"`` or ``"simplejpeg"`` forces one. An image declaring
    more than ``max_pixels`` pixels is skipped undecoded (the decompression-bomb guard).

    ``random_resized_crop=True`` (instead of ``rand_crop``) is ImageNet's training crop: a box of
    ``min_random_area``-``max_random_area`` of the image (default 0.08-1) with aspect
    ``min_aspect_ratio``-``max_aspect_ratio`` (width / height, default 3/4-4/3), resized to
    ``data_shape`` (MXNet's parameter names; see :class:`Augmenter`).
    """

    def __init__(self, path_imgrec: Union[PathLike, Sequence[PathLike]],
                 data_shape: Sequence[int], batch_size: int,
                 path_imgidx: Optional[PathLike] = None, label_width: int = 1,
                 shuffle: bool = False, seed: int = 0, rand_crop: bool = False,
                 rand_mirror: bool = False, resize: int = -1,
                 mean_r: float = 0.0, mean_g: float = 0.0, mean_b: float = 0.0,
                 std_r: float = 1.0, std_g: float = 1.0, std_b: float = 1.0,
                 mean_img: Union[None, PathLike, np.ndarray] = None, scale: float = 1.0,
                 preprocess_threads: int = 4, prefetch_buffer: int = 4, num_parts: int = 1,
                 part_index: int = 0, round_batch: bool = True, data_name: str = "data",
                 label_name: str = "softmax_label", dtype: str = "float32",
                 layout: str = "NCHW", shuffle_buffer: int = 1024,
                 decoder: str = "auto", max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None, random_resized_crop: bool = False,
                 min_random_area: float = RRC_AREA[0], max_random_area: float = RRC_AREA[1],
                 min_aspect_ratio: float = RRC_RATIO[0],
                 max_aspect_ratio: float = RRC_RATIO[1]) -> None:
        shape = tuple(int(v) for v in data_shape)
        if len(shape) != 3 or shape[0] not in (1, 3) or min(shape) < 1:
            raise ValueError(f"data_shape must be (channels, height, width) with 1 or 3 channels, "
                             f"got {tuple(data_shape)}")
        if np.dtype(dtype) not in (np.float32, np.uint8):
            raise ValueError(f"dtype must be 'float32' or 'uint8', got {dtype!r}")
        if layout not in ("NCHW", "NHWC"):
            raise ValueError(f"layout must be 'NCHW' or 'NHWC', got {layout!r}")
        c = shape[0]
        mean = np.array([mean_r, mean_g, mean_b][:c] if c == 3 else [mean_r], np.float32)
        std = np.array([std_r, std_g, std_b][:c] if c == 3 else [std_r], np.float32)
        if np.any(std == 0):
            raise ValueError("std_r/std_g/std_b must not be 0: the data is divided by them")
        if mean_img is not None:
            mean = _load_mean_img(mean_img, shape)
        if np.dtype(dtype) == np.uint8 and (np.any(mean != 0) or np.any(std != 1) or scale != 1):
            raise ValueError("dtype='uint8' skips normalisation: leave mean_*/std_*/mean_img/scale "
                             "at their defaults and normalise on the device instead")
        self.dtype, self.layout = np.dtype(dtype), layout
        self.data_name, self.label_name = data_name, label_name
        if random_resized_crop and rand_crop:
            raise ValueError("random_resized_crop and rand_crop are two kinds of crop: choose one")
        augmenter = Augmenter(shape, resize, rand_crop, rand_mirror, mean, std, scale, dtype,
                              layout, decoder, max_pixels, random_resized_crop=random_resized_crop,
                              area=(min_random_area, max_random_area),
                              ratio=(min_aspect_ratio, max_aspect_ratio))
        sample = shape if layout == "NCHW" else (shape[1], shape[2], shape[0])
        self.provide_data = [(data_name, (int(batch_size),) + sample)]
        self.provide_label = [(label_name, (int(batch_size), int(label_width)))]
        super().__init__(path_imgrec, augmenter, batch_size, path_imgidx=path_imgidx,
                         label_width=label_width, shuffle=shuffle, seed=seed,
                         preprocess_threads=preprocess_threads, prefetch_buffer=prefetch_buffer,
                         num_parts=num_parts, part_index=part_index, round_batch=round_batch,
                         shuffle_buffer=shuffle_buffer, storage_options=storage_options,
                         cache_dir=cache_dir, cache_limit=cache_limit)


def _check_positive(**values: int) -> None:
    for name, value in values.items():
        if int(value) < 1:
            raise ValueError(f"{name} must be at least 1, got {value}")


def _load_mean_img(mean_img: Union[PathLike, np.ndarray],
                   shape: Tuple[int, int, int]) -> np.ndarray:
    if isinstance(mean_img, np.ndarray):
        arr = mean_img
    else:
        path = os.fspath(mean_img)
        if not path.endswith(".npy"):
            raise ValueError(f"mean_img {path!r}: only NumPy .npy files (or arrays) are read, "
                             "not MXNet .nd files; convert with numpy.save")
        arr = np.load(path)
    arr = np.asarray(arr, dtype=np.float32)
    if arr.shape != shape:
        raise ValueError(f"mean_img has shape {arr.shape}, expected data_shape {shape} (c, h, w)")
    return arr


__all__ = ["ImageRecordIter", "RecordBatchIter", "DataBatch", "Augmenter", "SkippedRecordWarning"]
