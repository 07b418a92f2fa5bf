"""MXNet's ``.nd`` file format (what ``mx.nd.save`` writes and ``mx.nd.load`` reads): a list of
dense arrays, optionally named, in little-endian bytes MXNet 1.9.1 reads back.

The format works on NumPy arrays; ``recio.mx.ndarray``'s ``save`` and ``load`` wrap them as
NDArrays.
"""
from __future__ import annotations

from typing import Any, List, Sequence, Tuple

import numpy as np

from recio.errors import RecordIOError
from recio.records.atomic import atomic_open

_LIST_MAGIC = 0x112
_V2_MAGIC = 0xF993FAC9
_V1_MAGIC = 0xF993FAC8
#: MXNet's type flags
_TYPE_FLAGS = {0: np.float32, 1: np.float64, 2: np.float16, 3: np.uint8, 4: np.int32,
               5: np.int8, 6: np.int64, 7: np.bool_}
_FLAG_OF = {np.dtype(t): flag for flag, t in _TYPE_FLAGS.items()}


def write_arrays(fname: str, arrays: Sequence[Any], names: Sequence[str]) -> None:
    """Write ``arrays`` (NumPy arrays, or what ``numpy.ascontiguousarray`` takes) and their
    ``names`` (none, or one each) in MXNet's ``.nd`` format, atomically."""
    parts = [np.array([_LIST_MAGIC, 0, len(arrays)], "<u8").tobytes()]
    for arr in arrays:
        values = np.ascontiguousarray(arr)
        if values.dtype not in _FLAG_OF:
            raise ValueError(f"cannot save a {values.dtype} array in MXNet's format")
        parts.append(np.array([_V2_MAGIC, 0, values.ndim], "<u4").tobytes())
        parts.append(np.array(values.shape, "<i8").tobytes())
        if values.ndim:
            parts.append(np.array([1, 0, _FLAG_OF[values.dtype]], "<i4").tobytes())
            parts.append(values.astype(values.dtype.newbyteorder("<")).tobytes())
    parts.append(np.array([len(names)], "<u8").tobytes())
    for name in names:
        raw = name.encode()
        parts.append(np.array([len(raw)], "<u8").tobytes() + raw)
    with atomic_open(fname, "wb") as f:
        f.write(b"".join(parts))


def read_arrays(fname: str) -> Tuple[List[np.ndarray], List[str]]:
    """The arrays of an MXNet ``.nd`` file and their names (an empty list when unnamed)."""
    with open(fname, "rb") as f:
        raw = f.read()
    reader = _Reader(raw, fname)
    magic, _, count = reader.u64(), reader.u64(), reader.u64()
    if magic != _LIST_MAGIC:
        raise RecordIOError(f"not an MXNet .nd file (magic {magic:#x})", path=fname, offset=0)
    arrays = [reader.array() for _ in range(count)]
    names = [reader.text() for _ in range(reader.u64())]
    if names and len(names) != len(arrays):
        raise RecordIOError(f"{len(arrays)} arrays but {len(names)} names", path=fname)
    return arrays, names


class _Reader:
    """The fields of an ``.nd`` file in order; a short file raises naming the byte offset."""

    def __init__(self, raw: bytes, path: str) -> None:
        self.raw, self.pos, self.path = raw, 0, path

    def take(self, n: int) -> bytes:
        if self.pos + n > len(self.raw):
            raise RecordIOError(f"the file ends inside an array ({n} bytes needed)",
                                path=self.path, offset=self.pos)
        chunk = self.raw[self.pos:self.pos + n]
        self.pos += n
        return chunk

    def u64(self) -> int:
        return int(np.frombuffer(self.take(8), "<u8")[0])

    def u32(self) -> int:
        return int(np.frombuffer(self.take(4), "<u4")[0])

    def i32(self) -> int:
        return int(np.frombuffer(self.take(4), "<i4")[0])

    def text(self) -> str:
        return self.take(self.u64()).decode()

    def array(self) -> np.ndarray:
        start = self.pos
        magic = self.u32()
        if magic == _V2_MAGIC:
            if self.i32() != 0:
                raise RecordIOError("sparse arrays are not read", path=self.path, offset=start)
        elif magic != _V1_MAGIC:
            raise RecordIOError(f"unknown array format {magic:#x}", path=self.path, offset=start)
        ndim = self.u32()
        shape = tuple(int(v) for v in np.frombuffer(self.take(8 * ndim), "<i8"))
        if not ndim:
            return np.zeros((0,), np.float32)
        self.i32(), self.i32()  # the context it was saved from
        flag = self.i32()
        if flag not in _TYPE_FLAGS:
            raise RecordIOError(f"unknown type flag {flag}", path=self.path, offset=self.pos)
        dtype = np.dtype(_TYPE_FLAGS[flag]).newbyteorder("<")
        count = int(np.prod(shape))
        values = np.frombuffer(self.take(count * dtype.itemsize), dtype).reshape(shape)
        return values.astype(dtype.newbyteorder("="))
