"""``ImageBatchIter``: batches of decoded, augmented images from a ``.rec``, as MXNet's C++ one.

Pipeline (all inside recio, no MXNet)::

    records (.idx order / permutation, or InputSplit stream + bounded shuffle buffer)
      -> decode + augment in ``preprocess_threads`` threads, straight into the batch array
      -> batches prefetched by a ``ThreadedIter`` (at most ``prefetch_buffer`` waiting)

Images are decoded by ``recio.image.pixels.codec.decode`` (MXNet's pixels, the decompression-bomb
guard, DCT-scaled JPEG decoding when ``resize`` allows); OpenCV's decoder and NumPy's
arithmetic release the GIL, so the threads run in parallel. A batch array
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
``num_skipped``, or raise ``ImageError`` with ``on_undecodable="raise"``
(``recio.image.undecodable``).

``RecordBatchIter`` is that machinery with the augmentation and the epoch rule passed in:
``recio.mx.io.ImageRecordIter`` runs it with ``recio.image.batches.mxnet_augment.MXAugmenter`` and
MXNet's epochs (``carry_over``).

The parts have their own modules: ``recio.image.batches.augmenter`` (``Augmenter``, one image into
one batch slot) and ``recio.image.batches.engine`` (the decode thread pool, ``DataBatch``).
"""
from __future__ import annotations

import os
import weakref
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union, cast

import numpy as np

from recio.image.batches.augmenter import RRC_AREA, RRC_RATIO, Augmenter
from recio.image.batches.engine import BatchEngine, DataBatch, EngineSettings, describe_path
from recio.image.pixels.codec import DEFAULT_MAX_PIXELS
from recio.image.undecodable import SKIP, check_policy
from recio.records.closed import check_open
from recio.records.threaded import ThreadedIter
from recio.storage import StorageOptions

PathLike = Union[str, "os.PathLike[str]"]


def _close_all(box: List[Optional[ThreadedIter]], engine: BatchEngine) -> None:
    threaded, box[0] = box[0], None
    if threaded is not None:
        threaded.close()
    engine.close()


class RecordBatchIter:
    """Batches of decoded, augmented images from an image ``.rec``: the machinery under
    :class:`ImageBatchIter` and ``recio.mx.io.ImageRecordIter``.

    ``augmenter`` decodes one record's image into one slot of the batch: it has
    ``sample_shape`` and ``dtype`` (one sample's), ``params(rng, slots)`` (the random numbers of
    the records going to ``slots``, drawn in stream order from the epoch's generator) and
    ``augmenter(image_bytes, slot_array, params_row)``;
    :class:`~recio.image.batches.augmenter.Augmenter` and
    ``recio.image.batches.mxnet_augment.MXAugmenter`` are two. Batches are
    :class:`~recio.image.batches.engine.DataBatch` objects whose ``data`` is ``(batch_size,) +
    sample_shape`` and ``label`` float32 ``(batch_size, label_width)``.

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
    producer would have) to find out. ``on_undecodable``: ``recio.image.undecodable``.
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
                 cache_limit: Union[int, str, None] = None, on_undecodable: str = SKIP) -> None:
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
        self.on_undecodable = check_policy(on_undecodable)
        self._engine = BatchEngine(EngineSettings(
            self.path_imgrec, self.path_imgidx, augmenter, self.batch_size, self.label_width,
            self.shuffle, self.seed, self.shuffle_buffer, self.round_batch, self.carry_over,
            self.part_index, self.num_parts, labels, self.strict_labels, self.on_undecodable,
            self.preprocess_threads, self.prefetch_buffer, storage_options, cache_dir,
            cache_limit))
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
                                    capacity=self.prefetch_buffer, name="recio-ImageBatchIter")

    @property
    def epoch(self) -> int:
        """Number of the current epoch (0 at first, +1 per ``reset()``)."""
        return self._epoch

    @property
    def num_skipped(self) -> int:
        """Records skipped so far (all epochs): undecodable ones, and those whose labels do not
        fit ``label_width``."""
        return self._engine.skipped

    @property
    def num_records(self) -> Optional[int]:
        """Records in this part when an ``.idx`` was given (else None: the file is streamed)."""
        return None if self._engine.keys is None else len(self._engine.keys)

    def __iter__(self) -> "RecordBatchIter":
        return self

    @property
    def closed(self) -> bool:
        """Whether ``close()`` was called (every later batch, ``reset()`` and pickling raise
        ``ClosedError`` naming the file)."""
        return self._box[0] is None

    def _check_open(self) -> ThreadedIter:
        threaded = self._box[0]
        check_open(threaded is None, type(self).__name__, describe_path(self.path_imgrec))
        assert threaded is not None  # checked above
        return threaded

    def __next__(self) -> DataBatch:
        threaded = self._box[0]
        if threaded is None:
            threaded = self._check_open()
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
        self._check_open()
        if self.carry_over and self.round_batch and self._resume is None and not self._ended:
            self._resume = self._read_ahead()
        self._check_open().close()
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

    def __getstate__(self) -> Any:
        """Not picklable: it runs threads over an open file (make one in each process)."""
        self._check_open()
        raise TypeError(f"a {type(self).__name__} cannot be pickled: it runs threads over "
                        f"{describe_path(self.path_imgrec)}; create it in the process that uses it")

    def __enter__(self) -> "RecordBatchIter":
        return self

    def __exit__(self, *exc_info: Any) -> None:
        self.close()


class ImageBatchIter(RecordBatchIter):
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

        it = ImageBatchIter(path_imgrec="train.rec", path_imgidx="train.idx",
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
    (``recio.records.cache.shard_cache``).
    ``num_parts``/``part_index`` read one part (by record count with an ``.idx``, by bytes as
    MXNet's InputSplit without). ``mean_img`` is an array of shape ``data_shape`` or a ``.npy``
    path (MXNet's ``.nd`` mean files are not read). Call ``close()`` (or use ``with``) to stop
    the threads at once; garbage collection does it too.

    Images decode as MXNet's do (``recio.image.pixels.codec.decode``, OpenCV's pixels; a 1-channel
    ``data_shape`` gets OpenCV's greyscale). An image nothing decodes, or declaring more than
    ``max_pixels`` pixels (the decompression-bomb guard), is skipped with a
    ``SkippedRecordWarning`` naming its file, key and byte offset, and counted in
    ``num_skipped``; ``on_undecodable="raise"`` raises ``ImageError`` instead
    (``recio.image.undecodable``).

    ``random_resized_crop=True`` (instead of ``rand_crop``) is ImageNet's training crop: a box of
    ``min_random_area``-``max_random_area`` of the image (default 0.08-1) with aspect
    ``min_aspect_ratio``-``max_aspect_ratio`` (width / height, default 3/4-4/3), resized to
    ``data_shape`` (MXNet's parameter names; see :class:`~recio.image.batches.augmenter.Augmenter`).
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
                 max_pixels: int = DEFAULT_MAX_PIXELS, *,
                 storage_options: StorageOptions = None,
                 cache_dir: Union[PathLike, bool, None] = None,
                 cache_limit: Union[int, str, None] = None, random_resized_crop: bool = False,
                 min_random_area: float = RRC_AREA[0], max_random_area: float = RRC_AREA[1],
                 min_aspect_ratio: float = RRC_RATIO[0],
                 max_aspect_ratio: float = RRC_RATIO[1], on_undecodable: str = SKIP) -> None:
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
                              layout, max_pixels, random_resized_crop=random_resized_crop,
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
                         cache_dir=cache_dir, cache_limit=cache_limit,
                         on_undecodable=on_undecodable)


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
