"""``recio.mx.nd``: the part of MXNet's ``NDArray`` that code reading data touches, on NumPy.

An :class:`NDArray` wraps a NumPy array without copying it. It has what data-loading and
evaluation code calls on MXNet's: ``asnumpy()`` (a copy, as MXNet's), ``shape``, ``dtype`` (the
NumPy type, ``numpy.float32``, as MXNet reports it), ``size``, ``ndim``, ``context`` /
``ctx``, ``asscalar()``, ``astype``, ``copy``, ``copyto``, ``as_in_context`` (CPU contexts),
indexing (an NDArray again), iteration over the first axis, arithmetic and comparisons (NDArrays,
comparisons as 0/1 in the array's dtype, a Python number cast to that dtype first, as MXNet),
``reshape``, ``transpose``/``T``,
``flatten`` (to 2-d, as MXNet), ``expand_dims``, ``squeeze``, reductions (NDArrays),
``argmax``/``argmin`` (indices in the array's dtype, as MXNet), ``clip``, ``abs``, ``tolist``,
``wait_to_read``, and ``to_dlpack_for_read()`` / ``__dlpack__`` so that
``torch.from_dlpack`` takes it without a copy. ``numpy.asarray(nd)`` is a view, not a copy.

Arrays live on the CPU: a GPU context is accepted as a name (``mx.gpu(0)``) but moving data to
it raises ``ValueError`` saying to convert with ``asnumpy()`` and move the data with the
training framework. Autograd, symbols and operators beyond the above are not here.
"""
from __future__ import annotations

import numbers
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence, Tuple, Union

import numpy as np

from recio.mx.context import Context, cpu, cpu_pinned, current_context, gpu
from recio.mx.nd_file import read_arrays, write_arrays


def _host(ctx: Optional[Context]) -> Context:
    ctx = current_context() if ctx is None else Context(ctx)
    if not ctx.on_host:
        raise ValueError(f"recio.mx keeps arrays on the CPU and cannot place one on {ctx}: "
                         "take .asnumpy() and move the data with your training framework")
    return ctx


def _unwrap(value: Any) -> Any:
    return value._data if isinstance(value, NDArray) else value


#: an NDArray operator method: ``(self, other) -> NDArray``
_Operator = Callable[["NDArray", Any], "NDArray"]


def _arithmetic(op: Any, reverse: bool = False) -> _Operator:
    """``self op other`` (``other op self`` when ``reverse``) as a new NDArray; a Python number
    is cast to the array's dtype first, as MXNet does."""
    def operator(self: NDArray, other: Any) -> NDArray:
        other = _unwrap(other)
        if isinstance(other, numbers.Number) and not isinstance(other, bool):
            other = np.asarray(other).astype(self._data.dtype)  # scalars keep the dtype
        result = op(other, self._data) if reverse else op(self._data, other)
        return NDArray(result, self._ctx)
    return operator


def _in_place(op: Any) -> _Operator:
    """``self op= other``, in the array's dtype (cast as NumPy's ``casting="unsafe"``)."""
    def operator(self: NDArray, other: Any) -> NDArray:
        op(self._data, _unwrap(other), out=self._data, casting="unsafe")
        return self
    return operator


def _comparison(op: Any) -> _Operator:
    """``self op other`` as 0/1 in the array's dtype, as MXNet's comparisons."""
    def operator(self: NDArray, other: Any) -> NDArray:
        return NDArray(op(self._data, _unwrap(other)).astype(self._data.dtype), self._ctx)
    return operator


class NDArray:
    """A NumPy array with MXNet's ``NDArray`` interface (see the module docstring)."""

    __slots__ = ("_data", "_ctx")
    __array_priority__ = 1000.0

    def __init__(self, data: Any, ctx: Optional[Context] = None) -> None:
        self._data = data if isinstance(data, np.ndarray) else np.asarray(data)
        self._ctx = _host(ctx)

    # -- what it is -------------------------------------------------------------------------
    @property
    def shape(self) -> Tuple[int, ...]:
        return self._data.shape

    @property
    def dtype(self) -> type:
        """The NumPy scalar type (``numpy.float32``), as MXNet's ``NDArray.dtype``."""
        return self._data.dtype.type

    @property
    def size(self) -> int:
        return int(self._data.size)

    @property
    def ndim(self) -> int:
        return self._data.ndim

    @property
    def context(self) -> Context:
        return self._ctx

    ctx = context
    stype = "default"

    # -- conversions ------------------------------------------------------------------------
    def asnumpy(self) -> np.ndarray:
        """A copy as a plain ``numpy.ndarray``."""
        return np.array(self._data, copy=True)

    def asscalar(self) -> Any:
        """The value of a one-element array, as a NumPy scalar of its dtype."""
        if self._data.size != 1:
            raise ValueError("The current array is not a scalar")
        return self._data.reshape(-1)[0]

    def tolist(self) -> Any:
        return self._data.tolist()

    def astype(self, dtype: Any, copy: bool = True) -> "NDArray":
        if not copy and np.dtype(dtype) == self._data.dtype:
            return self
        return NDArray(self._data.astype(dtype), self._ctx)

    def copy(self) -> "NDArray":
        return NDArray(self._data.copy(), self._ctx)

    def copyto(self, other: Union["NDArray", Context]) -> "NDArray":
        """Copy into ``other`` (an NDArray of the same shape) or onto a new array on a context."""
        if isinstance(other, NDArray):
            if other.shape != self.shape:
                raise ValueError(f"copyto: shape {self.shape} into {other.shape}")
            other._data[...] = self._data
            return other
        return NDArray(self._data.copy(), Context(other))

    def as_in_context(self, context: Context) -> "NDArray":
        """This array on ``context``: itself when already there, else a copy (CPU only)."""
        context = _host(context)
        return self if context == self._ctx else NDArray(self._data.copy(), context)

    def as_nd_ndarray(self) -> "NDArray":
        return self

    def as_np_ndarray(self) -> np.ndarray:
        return self._data

    def wait_to_read(self) -> None:
        """Nothing to wait for: the data is there."""

    wait_to_write = wait_to_read

    def to_dlpack_for_read(self) -> Any:
        """A DLPack capsule of the data (``torch.utils.dlpack.from_dlpack`` takes it)."""
        return self.__dlpack__()

    to_dlpack_for_write = to_dlpack_for_read

    def __dlpack__(self, **kwargs: Any) -> Any:
        if not hasattr(self._data, "__dlpack__"):
            raise RuntimeError(f"DLPack needs NumPy 1.22 or later (this is {np.__version__}); "
                               "use asnumpy() instead")
        return self._data.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self._data.__dlpack_device__()

    def __array__(self, dtype: Any = None, copy: Optional[bool] = None) -> np.ndarray:
        if copy:
            return np.array(self._data, dtype=dtype, copy=True)
        return self._data if dtype is None else self._data.astype(dtype, copy=False)

    # -- indexing ---------------------------------------------------------------------------
    def __getitem__(self, key: Any) -> "NDArray":
        """An NDArray (a view for basic indexing); one element comes as shape ``(1,)``."""
        key = tuple(_unwrap(k) for k in key) if isinstance(key, tuple) else _unwrap(key)
        value = self._data[key]
        if np.ndim(value) == 0:
            view = self._element_view(key)
            if view is not None:  # writable, as MXNet's: ``labels[i][:] = label`` sets labels[i]
                return NDArray(view, self._ctx)
        return self._wrap(value)

    def _element_view(self, key: Any) -> Optional[np.ndarray]:
        """The ``(1,)`` view of the one element that integer ``key`` picks, else None."""
        keys = key if isinstance(key, tuple) else (key,)
        if len(keys) != self._data.ndim or not all(
                isinstance(k, (int, np.integer)) and not isinstance(k, bool) for k in keys):
            return None
        last = int(keys[-1]) % self._data.shape[-1]
        row = self._data[tuple(keys[:-1])] if len(keys) > 1 else self._data
        return row[last:last + 1]

    def __setitem__(self, key: Any, value: Any) -> None:
        key = tuple(_unwrap(k) for k in key) if isinstance(key, tuple) else _unwrap(key)
        value = _unwrap(value)
        try:
            self._data[key] = value
        except (ValueError, TypeError):
            # MXNet puts a one-element array into one element (ImageIter's label of a list
            # line into its batch); NumPy 2 refuses to drop the dimension itself
            if np.size(value) != 1:
                raise
            self._data[key] = np.reshape(value, ())

    def __len__(self) -> int:
        return self._data.shape[0]

    def __iter__(self) -> Iterator["NDArray"]:
        for i in range(len(self)):
            yield self[i]

    def __bool__(self) -> bool:
        if self._data.size == 0:
            return False
        if self._data.size == 1:
            return bool(self._data.reshape(-1)[0])
        raise ValueError("The truth value of an NDArray with multiple elements is ambiguous.")

    __hash__ = object.__hash__

    def __repr__(self) -> str:
        shape = "x".join(str(n) for n in self.shape)
        return f"\n{self._data}\n<NDArray {shape} @{self._ctx}>"

    __str__ = __repr__

    # -- shape ------------------------------------------------------------------------------
    def reshape(self, *shape: Any, **kwargs: Any) -> "NDArray":
        """New shape (ints or one tuple; ``-1`` infers, ``0`` keeps that dimension)."""
        if len(shape) == 1 and isinstance(shape[0], (list, tuple)):
            shape = tuple(shape[0])
        shape = shape or tuple(kwargs.get("shape", ()))
        shape = tuple(self.shape[i] if s == 0 else s for i, s in enumerate(shape))
        return NDArray(self._data.reshape(shape), self._ctx)

    def transpose(self, *axes: Any) -> "NDArray":
        if len(axes) == 1 and isinstance(axes[0], (list, tuple)):
            axes = tuple(axes[0])
        return NDArray(self._data.transpose(*axes) if axes else self._data.T, self._ctx)

    @property
    def T(self) -> "NDArray":  # MXNet's name
        return NDArray(self._data.T, self._ctx)

    def flatten(self) -> "NDArray":
        """``(d0, d1 * d2 * ...)``, as MXNet's ``flatten``."""
        return NDArray(self._data.reshape(self.shape[0] if self.ndim else 1, -1), self._ctx)

    def expand_dims(self, axis: int) -> "NDArray":
        return NDArray(np.expand_dims(self._data, axis), self._ctx)

    def squeeze(self, axis: Optional[Union[int, Sequence[int]]] = None) -> "NDArray":
        return NDArray(np.squeeze(self._data, axis=axis), self._ctx)

    # -- arithmetic -------------------------------------------------------------------------
    def _wrap(self, value: Any) -> "NDArray":
        value = np.asarray(value)
        return NDArray(value.reshape(1) if value.ndim == 0 else value, self._ctx)

    def _reduce(self, fn: Any, axis: Any, keepdims: bool) -> "NDArray":
        return self._wrap(fn(self._data, axis=axis, keepdims=keepdims))

    def sum(self, axis: Any = None, keepdims: bool = False) -> "NDArray":
        return self._reduce(np.sum, axis, keepdims)

    def mean(self, axis: Any = None, keepdims: bool = False) -> "NDArray":
        return self._reduce(np.mean, axis, keepdims).astype(self._data.dtype, copy=False)

    def max(self, axis: Any = None, keepdims: bool = False) -> "NDArray":
        return self._reduce(np.max, axis, keepdims)

    def min(self, axis: Any = None, keepdims: bool = False) -> "NDArray":
        return self._reduce(np.min, axis, keepdims)

    def prod(self, axis: Any = None, keepdims: bool = False) -> "NDArray":
        return self._reduce(np.prod, axis, keepdims)

    def argmax(self, axis: Optional[int] = None, keepdims: bool = False) -> "NDArray":
        """Indices of the maxima, in the array's dtype (float32 for float32 data, as MXNet)."""
        return self._positions(np.argmax, axis, keepdims)

    def argmin(self, axis: Optional[int] = None, keepdims: bool = False) -> "NDArray":
        """Indices of the minima, in the array's dtype."""
        return self._positions(np.argmin, axis, keepdims)

    def _positions(self, find: Callable[..., Any], axis: Optional[int],
                   keepdims: bool) -> "NDArray":
        # (NumPy 2.5's stubs type argmax's keepdims as a literal, hence the plain callable)
        return self._wrap(np.asarray(find(self._data, axis=axis, keepdims=keepdims))
                          .astype(self._data.dtype))

    def clip(self, a_min: Any, a_max: Any) -> "NDArray":
        return NDArray(np.clip(self._data, a_min, a_max), self._ctx)

    def abs(self) -> "NDArray":
        return NDArray(np.abs(self._data), self._ctx)

    # MXNet's operators, each one line: the rules are the three functions above the class
    __add__ = _arithmetic(np.add)
    __radd__ = _arithmetic(np.add, reverse=True)
    __sub__ = _arithmetic(np.subtract)
    __rsub__ = _arithmetic(np.subtract, reverse=True)
    __mul__ = _arithmetic(np.multiply)
    __rmul__ = _arithmetic(np.multiply, reverse=True)
    __truediv__ = _arithmetic(np.true_divide)
    __rtruediv__ = _arithmetic(np.true_divide, reverse=True)
    __mod__ = _arithmetic(np.mod)
    __pow__ = _arithmetic(np.power)
    __rpow__ = _arithmetic(np.power, reverse=True)
    __iadd__ = _in_place(np.add)
    __isub__ = _in_place(np.subtract)
    __imul__ = _in_place(np.multiply)
    __itruediv__ = _in_place(np.true_divide)
    __eq__ = _comparison(np.equal)  # type: ignore[assignment]  # NDArray, not bool, as MXNet
    __ne__ = _comparison(np.not_equal)  # type: ignore[assignment]  # (and NumPy)
    __lt__ = _comparison(np.less)
    __le__ = _comparison(np.less_equal)
    __gt__ = _comparison(np.greater)
    __ge__ = _comparison(np.greater_equal)

    def __neg__(self) -> "NDArray":
        return NDArray(-self._data, self._ctx)

    def __abs__(self) -> "NDArray":
        return self.abs()


# -- mx.nd functions ----------------------------------------------------------------------------
def array(source_array: Any, ctx: Optional[Context] = None, dtype: Any = None) -> NDArray:
    """A new NDArray holding a copy of ``source_array``: float32 unless ``dtype`` is given or
    the source is an NDArray (MXNet converts NumPy arrays to float32 too)."""
    source = _unwrap(source_array)
    if dtype is None:
        dtype = source.dtype if isinstance(source_array, NDArray) else np.float32
    return NDArray(np.array(source, dtype=dtype, copy=True), ctx)


def _shape(shape: Union[int, Sequence[int]]) -> Tuple[int, ...]:
    return (int(shape),) if isinstance(shape, (int, numbers.Integral)) else tuple(shape)


def empty(shape: Union[int, Sequence[int]], ctx: Optional[Context] = None,
          dtype: Any = np.float32) -> NDArray:
    return NDArray(np.empty(_shape(shape), dtype), ctx)


def zeros(shape: Union[int, Sequence[int]], ctx: Optional[Context] = None,
          dtype: Any = np.float32, **_: Any) -> NDArray:
    return NDArray(np.zeros(_shape(shape), dtype), ctx)


def ones(shape: Union[int, Sequence[int]], ctx: Optional[Context] = None,
         dtype: Any = np.float32, **_: Any) -> NDArray:
    return NDArray(np.ones(_shape(shape), dtype), ctx)


def full(shape: Union[int, Sequence[int]], val: Any, ctx: Optional[Context] = None,
         dtype: Any = np.float32) -> NDArray:
    return NDArray(np.full(_shape(shape), val, dtype), ctx)


def arange(start: Any, stop: Any = None, step: Any = 1.0, repeat: int = 1,
           ctx: Optional[Context] = None, dtype: Any = np.float32) -> NDArray:
    # arange(0, start, step): what NumPy does with arange(start, step=step)
    values = np.arange(start, stop, step, dtype=dtype) if stop is not None else np.arange(
        0, start, step, dtype=dtype)
    return NDArray(np.repeat(values, repeat), ctx)


def concat(*arrays: Any, dim: int = 1) -> NDArray:
    """Join along ``dim`` (MXNet's default is 1)."""
    return NDArray(np.concatenate([_unwrap(a) for a in arrays], axis=dim),
                   arrays[0].context if isinstance(arrays[0], NDArray) else None)


def stack(*arrays: Any, axis: int = 0) -> NDArray:
    return NDArray(np.stack([_unwrap(a) for a in arrays], axis=axis),
                   arrays[0].context if isinstance(arrays[0], NDArray) else None)


def tile(data: Any, reps: Sequence[int]) -> NDArray:
    return NDArray(np.tile(_unwrap(data), tuple(reps)))


def dot(lhs: Any, rhs: Any) -> NDArray:
    """Matrix product over the last axis of ``lhs`` and the first of ``rhs``."""
    ctx = lhs.context if isinstance(lhs, NDArray) else None
    return NDArray(np.dot(_unwrap(lhs), _unwrap(rhs)), ctx)


def flip(data: Any, axis: int) -> NDArray:
    """Reverse ``data`` along ``axis``."""
    return NDArray(np.flip(_unwrap(data), axis=axis).copy(),
                   data.context if isinstance(data, NDArray) else None)


def _axes(data: Any, axis: Any, exclude: bool) -> Optional[Tuple[int, ...]]:
    """MXNet's reduction ``axis`` (``()`` or None: every axis; ``exclude``: all but these)."""
    if axis is None or axis == ():
        return None
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if exclude:
        ndim = np.ndim(data)
        axes = tuple(i for i in range(ndim) if i not in {a % ndim for a in axes})
    return axes


def _reduction(fn: Any, data: Any, axis: Any, keepdims: bool, exclude: bool) -> NDArray:
    values = _unwrap(data)
    out = np.asarray(fn(values, axis=_axes(values, axis, exclude), keepdims=keepdims))
    out = out.astype(np.asarray(values).dtype, copy=False)  # MXNet keeps the input's dtype
    return NDArray(out.reshape(1) if out.ndim == 0 else out,
                   data.context if isinstance(data, NDArray) else None)


def sum(data: Any, axis: Any = (), keepdims: bool = False,  # noqa: A001 - MXNet's name
        exclude: bool = False) -> NDArray:
    """``mx.nd.sum``: over ``axis`` (all by default: shape ``(1,)``), in the input's dtype."""
    return _reduction(np.sum, data, axis, keepdims, exclude)


def mean(data: Any, axis: Any = (), keepdims: bool = False, exclude: bool = False) -> NDArray:
    return _reduction(np.mean, data, axis, keepdims, exclude)


def max(data: Any, axis: Any = (), keepdims: bool = False,  # noqa: A001 - MXNet's name
        exclude: bool = False) -> NDArray:
    return _reduction(np.max, data, axis, keepdims, exclude)


def min(data: Any, axis: Any = (), keepdims: bool = False,  # noqa: A001 - MXNet's name
        exclude: bool = False) -> NDArray:
    return _reduction(np.min, data, axis, keepdims, exclude)


def _like(data: Any, values: np.ndarray) -> NDArray:
    return NDArray(values, data.context if isinstance(data, NDArray) else None)


def transpose(data: Any, axes: Optional[Sequence[int]] = None) -> NDArray:
    """``mx.nd.transpose``: permute by ``axes`` (reverse them when not given)."""
    values = _unwrap(data)
    return _like(data, np.transpose(values, None if not axes else tuple(axes)))


def reshape(data: Any, shape: Sequence[int]) -> NDArray:
    return data.reshape(tuple(shape)) if isinstance(data, NDArray) else NDArray(
        np.reshape(data, tuple(shape)))


def expand_dims(data: Any, axis: int) -> NDArray:
    return _like(data, np.expand_dims(_unwrap(data), axis))


def swapaxes(data: Any, dim1: int = 0, dim2: int = 0) -> NDArray:
    return _like(data, np.swapaxes(_unwrap(data), dim1, dim2))


def clip(data: Any, a_min: Any, a_max: Any) -> NDArray:
    values = np.asarray(_unwrap(data))
    return _like(data, np.clip(values, a_min, a_max).astype(values.dtype, copy=False))


def cast(data: Any, dtype: Any) -> NDArray:
    return _like(data, np.asarray(_unwrap(data)).astype(dtype))


def zeros_like(data: Any) -> NDArray:
    return _like(data, np.zeros_like(_unwrap(data)))


def ones_like(data: Any) -> NDArray:
    return _like(data, np.ones_like(_unwrap(data)))


def waitall() -> None:
    """Nothing runs asynchronously here."""


# -- MXNet's .nd files (the format: recio.mx.nd_file) ------------------------------------------
def save(fname: str, data: Union[NDArray, List[NDArray], Dict[str, NDArray]]) -> None:
    """``mx.nd.save``: write arrays in MXNet's ``.nd`` format (readable by MXNet's
    ``mx.nd.load``), atomically."""
    if isinstance(data, NDArray):
        data = [data]
    names: List[str] = []
    if isinstance(data, dict):
        names, arrays = list(data.keys()), list(data.values())
    else:
        arrays = list(data)
    write_arrays(fname, [arr.asnumpy() if isinstance(arr, NDArray) else arr for arr in arrays],
                 names)


def load(fname: str) -> Union[List[NDArray], Dict[str, NDArray]]:
    """``mx.nd.load``: arrays from an MXNet ``.nd`` file (a dict when they have names)."""
    values, names = read_arrays(fname)
    arrays = [NDArray(value) for value in values]
    return dict(zip(names, arrays)) if names else arrays


__all__ = ["NDArray", "Context", "cpu", "gpu", "cpu_pinned", "current_context", "array", "empty",
           "zeros", "ones", "full", "arange", "concat", "stack", "tile", "dot", "flip", "waitall",
           "save", "load", "sum", "mean", "max", "min", "transpose", "reshape", "expand_dims",
           "swapaxes", "clip", "cast", "zeros_like", "ones_like"]
