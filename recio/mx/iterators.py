"""MXNet's Python data iterators (``mx.io.NDArrayIter``, ``ResizeIter``, ``PrefetchingIter``) and
the types every ``mx.io`` iterator shares: :class:`DataDesc`, :class:`DataBatch` and the
:class:`DataIter` base class.

They live apart from ``recio.mx.io`` (which imports them, so user code reaches them as
``mx.io.NDArrayIter``, as in MXNet) because ``recio.mx.image.ImageIter`` and ``recio.mx.io``'s
``MXDataIter`` build on the base types too.
"""
from __future__ import annotations

import threading
from collections import namedtuple
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio.errors import suggests_keywords
from recio.mx.ndarray import NDArray


class DataDesc(namedtuple("DataDesc", ["name", "shape"])):
    """Name, shape, dtype and layout of an input: a ``(name, shape)`` tuple (``desc[0]``,
    ``desc.name``, ``name, shape = desc``) with ``dtype`` and ``layout`` attributes."""

    dtype: Any
    layout: str

    def __new__(cls, name: str, shape: Tuple[int, ...], dtype: Any = np.float32,
                layout: str = "NCHW") -> "DataDesc":
        desc = super().__new__(cls, name, shape)
        desc.dtype = dtype
        desc.layout = layout
        return desc

    def __repr__(self) -> str:
        return f"DataDesc[{self.name},{self.shape},{self.dtype},{self.layout}]"

    @staticmethod
    def get_batch_axis(layout: Optional[str]) -> int:
        """The axis of ``N`` in ``layout`` (0 when there is no layout)."""
        return 0 if layout is None else layout.find("N")

    @staticmethod
    def get_list(shapes: Sequence[Tuple[str, Tuple[int, ...]]],
                 types: Optional[Sequence[Tuple[str, Any]]]) -> List["DataDesc"]:
        """DataDescs from ``(name, shape)`` pairs and optional ``(name, dtype)`` pairs."""
        if types is None:
            return [DataDesc(name, shape) for name, shape in shapes]
        by_name = dict(types)
        return [DataDesc(name, shape, by_name[name]) for name, shape in shapes]


class DataBatch:
    """One batch: ``data`` and ``label`` are lists of NDArrays; ``pad`` filler samples at the
    end; ``index`` the samples' ids (or None)."""

    # lists of NDArrays, None only where the caller gave None: code indexes them unchecked
    data: Any
    label: Any

    def __init__(self, data: Optional[Sequence[Any]], label: Optional[Sequence[Any]] = None,
                 pad: Optional[int] = None, index: Any = None, bucket_key: Any = None,
                 provide_data: Optional[List[DataDesc]] = None,
                 provide_label: Optional[List[DataDesc]] = None) -> None:
        if data is not None and not isinstance(data, (list, tuple)):
            raise TypeError("DataBatch data must be a list of NDArrays")
        if label is not None and not isinstance(label, (list, tuple)):
            raise TypeError("DataBatch label must be a list of NDArrays")
        self.data, self.label, self.pad, self.index = data, label, pad, index
        self.bucket_key = bucket_key
        self.provide_data, self.provide_label = provide_data, provide_label

    def __str__(self) -> str:
        data = [d.shape for d in self.data]
        label = [x.shape for x in self.label] if self.label else None
        return f"{type(self).__name__}: data shapes: {data} label shapes: {label}"


class DataIter:
    """MXNet's iterator base class: ``next()`` builds a :class:`DataBatch` from
    ``iter_next()``, ``getdata()``, ``getlabel()``, ``getpad()`` and ``getindex()``."""

    def __init__(self, batch_size: int = 0) -> None:
        self.batch_size = batch_size

    def __iter__(self) -> "DataIter":
        return self

    def reset(self) -> None:
        """Go back to the start of the data."""

    def next(self) -> DataBatch:
        if self.iter_next():
            return DataBatch(data=self.getdata(), label=self.getlabel(), pad=self.getpad(),
                             index=self.getindex())
        raise StopIteration

    def __next__(self) -> DataBatch:
        return self.next()

    def iter_next(self) -> bool:
        """Move to the next batch; False at the end."""
        return False

    def getdata(self) -> Any:
        return None

    def getlabel(self) -> Any:
        return None

    def getindex(self) -> Any:
        return None

    def getpad(self) -> Any:
        return None


def _as_array(value: Any) -> np.ndarray:
    """NDArrays keep their dtype; everything else becomes float32, as MXNet's ``nd.array``."""
    if isinstance(value, NDArray):
        return value.asnumpy()
    return np.array(value, dtype=np.float32)


def _named_arrays(data: Any, allow_empty: bool, default_name: str
                  ) -> List[Tuple[str, np.ndarray]]:
    """MXNet's ``_init_data``: an array, a list or a dict of arrays, as sorted (name, array)."""
    if data is None:
        if not allow_empty:
            raise ValueError("data must not be None")
        return []
    if not isinstance(data, (list, tuple, dict)):
        data = [data]
    if isinstance(data, (list, tuple)):
        if not allow_empty and not data:
            raise ValueError("data must not be empty")
        names = [default_name] if len(data) == 1 else [f"_{i}_{default_name}"
                                                       for i in range(len(data))]
        data = dict(zip(names, data))
    return sorted((name, _as_array(value)) for name, value in data.items())


@suggests_keywords
class NDArrayIter(DataIter):
    """Batches from arrays in memory, as MXNet's ``mx.io.NDArrayIter``.

    ``data`` and ``label``: an array, a list or a dict of them (NumPy arrays or NDArrays;
    NumPy data becomes float32, as in MXNet). ``last_batch_handle``: ``'pad'`` fills the last
    batch from the start (``pad`` says how many), ``'discard'`` drops it, ``'roll_over'`` keeps
    the rest for the first batch of the next epoch. ``shuffle`` permutes the samples with
    ``numpy.random`` on every ``reset()`` (seed it with ``numpy.random.seed``, as for MXNet).
    """

    def __init__(self, data: Any, label: Any = None, batch_size: int = 1, shuffle: bool = False,
                 last_batch_handle: str = "pad", data_name: str = "data",
                 label_name: str = "softmax_label", layout: str = "NCHW") -> None:
        super().__init__(batch_size)
        if last_batch_handle not in ("pad", "discard", "roll_over"):
            raise ValueError(f"last_batch_handle must be 'pad', 'discard' or 'roll_over', got "
                             f"{last_batch_handle!r}")
        self.data = _named_arrays(data, False, data_name)
        self.label = _named_arrays(label, True, label_name)
        self.layout = layout
        self.axis = layout.find("N")
        self.num_data = self.data[0][1].shape[self.axis]
        for name, arr in self.data + self.label:
            if arr.shape[self.axis] != self.num_data:
                raise ValueError(f"{name} has {arr.shape[self.axis]} samples, "
                                 f"{self.data[0][0]} has {self.num_data}")
        self.idx = np.arange(self.num_data)
        self.shuffle = shuffle
        self.last_batch_handle = last_batch_handle
        self.batch_size = int(batch_size)
        self.cursor = -self.batch_size
        self._cache: Optional[Tuple[List[NDArray], List[NDArray]]] = None
        self.reset()

    def _descs(self, arrays: List[Tuple[str, np.ndarray]]) -> List[DataDesc]:
        out = []
        for name, arr in arrays:
            shape = list(arr.shape)
            shape[self.axis] = self.batch_size
            out.append(DataDesc(name, tuple(shape), arr.dtype.type, layout=self.layout))
        return out

    @property
    def provide_data(self) -> List[DataDesc]:
        return self._descs(self.data)

    @property
    def provide_label(self) -> List[DataDesc]:
        return self._descs(self.label)

    def hard_reset(self) -> None:
        """Back to the start, dropping any rolled-over samples."""
        if self.shuffle:
            self._shuffle()
        self.cursor = -self.batch_size
        self._cache = None

    def reset(self) -> None:
        if self.shuffle:
            self._shuffle()
        if (self.last_batch_handle == "roll_over"
                and self.num_data - self.batch_size < self.cursor < self.num_data):
            self.cursor = self.cursor - self.num_data - self.batch_size
        else:
            self.cursor = -self.batch_size

    def _shuffle(self) -> None:
        np.random.shuffle(self.idx)
        self.data = [(name, np.take(arr, self.idx, axis=self.axis)) for name, arr in self.data]
        self.label = [(name, np.take(arr, self.idx, axis=self.axis)) for name, arr in self.label]
        self.idx = np.arange(self.num_data)

    def iter_next(self) -> bool:
        self.cursor += self.batch_size
        return self.cursor < self.num_data

    def next(self) -> DataBatch:
        if not self.iter_next():
            raise StopIteration
        data, label = self.getdata(), self.getlabel()
        if data[0].shape[self.axis] != self.batch_size:  # roll_over: keep for the next epoch
            self._cache = (data, label)
            raise StopIteration
        return DataBatch(data=data, label=label, pad=self.getpad(), index=None)

    def _slice(self, arrays: List[Tuple[str, np.ndarray]], start: int, end: int
               ) -> List[np.ndarray]:
        return [np.take(arr, np.arange(start, end), axis=self.axis) for _, arr in arrays]

    def _batchify(self, arrays: List[Tuple[str, np.ndarray]], which: int) -> List[NDArray]:
        if self.cursor >= self.num_data:
            raise RuntimeError("NDArrayIter needs reset()")
        bs, n, axis = self.batch_size, self.num_data, self.axis
        if self.last_batch_handle == "roll_over" and -bs < self.cursor < 0:
            cached = self._cache[which] if self._cache is not None else None
            if cached is None:
                raise RuntimeError("the next epoch should have rolled-over samples")
            parts = zip([c.asnumpy() for c in cached],
                        self._slice(arrays, 0, self.cursor + bs))
            out = [np.concatenate(p, axis=axis) for p in parts]
        elif self.last_batch_handle == "pad" and self.cursor + bs > n:
            pad = bs - n + self.cursor
            head = self._slice(arrays, self.cursor, n)
            fill = [np.take(arr, np.arange(pad) % n, axis=axis) for _, arr in arrays]
            out = [np.concatenate(p, axis=axis) for p in zip(head, fill)]
        else:
            out = self._slice(arrays, self.cursor, min(self.cursor + bs, n))
        return [NDArray(a) for a in out]

    def getdata(self) -> List[NDArray]:
        return self._batchify(self.data, 0)

    def getlabel(self) -> List[NDArray]:
        return self._batchify(self.label, 1)

    def getpad(self) -> int:
        if self.last_batch_handle == "pad" and self.cursor + self.batch_size > self.num_data:
            return self.cursor + self.batch_size - self.num_data
        if self.last_batch_handle == "roll_over" and -self.batch_size < self.cursor < 0:
            return -self.cursor
        return 0


class _OverBatches(DataIter):
    """An iterator whose ``getdata()`` etc. read its ``current_batch``."""

    current_batch: Optional[DataBatch] = None

    def getdata(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.data

    def getlabel(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.label

    def getindex(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.index

    def getpad(self) -> Any:
        assert self.current_batch is not None, "call iter_next() first"
        return self.current_batch.pad


@suggests_keywords
class ResizeIter(_OverBatches):
    """``size`` batches per epoch from ``data_iter``, restarting it when it runs out."""

    def __init__(self, data_iter: DataIter, size: int, reset_internal: bool = True) -> None:
        super().__init__()
        self.data_iter, self.size, self.reset_internal = data_iter, size, reset_internal
        self.cur = 0
        self.current_batch: Optional[DataBatch] = None
        # MXNet's iterators all have these; its DataIter base class (so this one) does not
        self.provide_data = data_iter.provide_data  # type: ignore[attr-defined]
        self.provide_label = data_iter.provide_label  # type: ignore[attr-defined]
        self.batch_size = data_iter.batch_size
        if hasattr(data_iter, "default_bucket_key"):
            self.default_bucket_key = data_iter.default_bucket_key

    def reset(self) -> None:
        self.cur = 0
        if self.reset_internal:
            self.data_iter.reset()

    def iter_next(self) -> bool:
        if self.cur == self.size:
            return False
        try:
            self.current_batch = self.data_iter.next()
        except StopIteration:
            self.data_iter.reset()
            self.current_batch = self.data_iter.next()
        self.cur += 1
        return True


@suggests_keywords
class PrefetchingIter(_OverBatches):
    """Reads the next batches of one or more iterators in background threads and joins them
    (``rename_data`` / ``rename_label``: one ``{old: new}`` dict per iterator).

    The threads are not daemons (MXNet's are): a program that ends meanwhile, on a Ctrl-C say,
    first lets each finish the batch it reads. A daemon thread still decoding in OpenCV when
    Python shuts down aborts the process ("terminate called without an active exception")."""

    def __init__(self, iters: Union[DataIter, List[DataIter]],
                 rename_data: Optional[List[Dict[str, str]]] = None,
                 rename_label: Optional[List[Dict[str, str]]] = None) -> None:
        super().__init__()
        self.iters = iters if isinstance(iters, list) else [iters]
        if not self.iters:
            raise ValueError("PrefetchingIter needs at least one iterator")
        self.rename_data, self.rename_label = rename_data, rename_label
        self.batch_size = self.provide_data[0][1][0]
        self.current_batch: Optional[DataBatch] = None
        self._fetched = threading.Event()
        self._results: List[Any] = []
        self._fetch()

    def _fetch(self) -> None:
        self._results = [None] * len(self.iters)
        fetched, left, lock = threading.Event(), [len(self.iters)], threading.Lock()

        def run(i: int) -> None:
            try:
                self._results[i] = ("batch", self.iters[i].next())
            except StopIteration:
                self._results[i] = ("end", None)
            except BaseException as exc:  # re-raised in the consumer
                self._results[i] = ("error", exc)
            finally:
                with lock:
                    left[0] -= 1
                    if not left[0]:
                        fetched.set()

        self._fetched = fetched
        for i in range(len(self.iters)):
            try:
                threading.Thread(target=run, args=(i,), name="recio-PrefetchingIter").start()
            except BaseException:  # no thread for the others: their results never come
                for j in range(i, len(self.iters)):
                    self._results[j] = ("end", None)
                fetched.set()
                raise

    def _wait(self) -> List[Any]:
        # an event, not Thread.join: a Ctrl-C that interrupts a join makes Python 3.9 to 3.12
        # take the thread for ended, and then not wait for it before shutting down either
        while not self._fetched.wait(0.25):  # short waits: Ctrl-C reaches this thread (Windows)
            pass
        for kind, value in self._results:
            if kind == "error":
                raise value
        return self._results

    def _renamed(self, which: str, renames: Optional[List[Dict[str, str]]]) -> List[DataDesc]:
        out: List[DataDesc] = []
        for i, it in enumerate(self.iters):
            if renames is None:  # as MXNet: the iterators' own, (name, shape) tuples included
                out.extend(getattr(it, which))
                continue
            for desc in getattr(it, which):
                desc = desc if isinstance(desc, DataDesc) else DataDesc(*desc)
                if renames is not None:
                    desc = DataDesc(renames[i][desc.name], desc.shape, desc.dtype)
                out.append(desc)
        return out

    @property
    def provide_data(self) -> List[DataDesc]:
        return self._renamed("provide_data", self.rename_data)

    @property
    def provide_label(self) -> List[DataDesc]:
        return self._renamed("provide_label", self.rename_label)

    def reset(self) -> None:
        self._wait()
        for it in self.iters:
            it.reset()
        self._fetch()

    def iter_next(self) -> bool:
        results = self._wait()
        if results[0][0] == "end":
            if any(kind != "end" for kind, _ in results):
                raise RuntimeError("the iterators of a PrefetchingIter ended at different "
                                   "batches")
            return False
        batches = [batch for _, batch in results]
        if any(b is None or b.pad != batches[0].pad for b in batches):
            raise RuntimeError("the iterators of a PrefetchingIter disagree on the batch "
                               "boundaries")
        self.current_batch = DataBatch(sum((list(b.data) for b in batches), []),
                                       sum((list(b.label) for b in batches), []),
                                       batches[0].pad, batches[0].index,
                                       provide_data=self.provide_data,
                                       provide_label=self.provide_label)
        self._fetch()
        return True

    def next(self) -> DataBatch:
        if self.iter_next():
            assert self.current_batch is not None  # iter_next() set it
            return self.current_batch
        raise StopIteration
