"""``gluon.utils.split_data`` and ``split_and_load``, as MXNet's (CPU contexts only)."""
from __future__ import annotations

from typing import Any, List, Sequence

from recio.mx import ndarray as nd
from recio.mx.context import Context
from recio.mx.ndarray import NDArray


def split_data(data: Any, num_slice: int, batch_axis: int = 0,
               even_split: bool = True) -> List[NDArray]:
    """Split ``data`` into ``num_slice`` parts along ``batch_axis`` (the last part takes the
    remainder when ``even_split=False``)."""
    data = data if isinstance(data, NDArray) else nd.array(data)
    size = data.shape[batch_axis]
    if even_split and size % num_slice != 0:
        raise ValueError(f"data with shape {data.shape} cannot be evenly split into {num_slice} "
                         f"slices along axis {batch_axis}; use a batch size that's a multiple "
                         f"of {num_slice} or set even_split=False")
    if num_slice == 1:
        return [data]
    step = size // num_slice
    if step == 0:
        raise ValueError(f"too many slices ({num_slice}) for {size} samples")
    out = []
    for i in range(num_slice):
        start = i * step
        stop = (i + 1) * step if i < num_slice - 1 else size
        index = [slice(None)] * len(data.shape)
        index[batch_axis] = slice(start, stop)
        out.append(data[tuple(index)])
    return out


def split_and_load(data: Any, ctx_list: Sequence[Context], batch_axis: int = 0,
                   even_split: bool = True) -> List[NDArray]:
    """:func:`split_data` into ``len(ctx_list)`` parts, each placed on its context."""
    data = data if isinstance(data, NDArray) else nd.array(data, ctx=ctx_list[0])
    if len(ctx_list) == 1:
        return [data.as_in_context(ctx_list[0])]
    parts = split_data(data, len(ctx_list), batch_axis, even_split)
    return [part.as_in_context(ctx) for part, ctx in zip(parts, ctx_list)]


__all__ = ["split_data", "split_and_load"]
