"""``recio.mx.context``: ``Context``, ``cpu``, ``gpu``, ``cpu_pinned``, ``current_context``
(MXNet's ``mx.context``; the arrays themselves always live on the CPU)."""
from __future__ import annotations

import threading
from typing import Any, Union

_DEVICE_TYPES = {1: "cpu", 2: "gpu", 3: "cpu_pinned", 5: "cpu_shared"}
_DEVICE_IDS = {name: number for number, name in _DEVICE_TYPES.items()}


class Context:
    """A device, as MXNet names it: ``cpu(0)``, ``cpu_pinned(0)``, ``gpu(1)``. Usable as a
    ``with`` block that makes it the default context of new arrays."""

    _local = threading.local()
    device_typeid: int
    device_id: int

    def __init__(self, device_type: Union[str, "Context"], device_id: int = 0) -> None:
        if isinstance(device_type, Context):
            self.device_typeid, self.device_id = device_type.device_typeid, device_type.device_id
            return
        if device_type not in _DEVICE_IDS:
            raise ValueError(f"unknown device type {device_type!r}: expected one of "
                             f"{', '.join(_DEVICE_IDS)}")
        self.device_typeid, self.device_id = _DEVICE_IDS[device_type], int(device_id)

    @property
    def device_type(self) -> str:
        return _DEVICE_TYPES[self.device_typeid]

    def __eq__(self, other: object) -> bool:
        return (isinstance(other, Context) and self.device_typeid == other.device_typeid
                and self.device_id == other.device_id)

    def __hash__(self) -> int:
        return hash((self.device_typeid, self.device_id))

    def __repr__(self) -> str:
        return f"{self.device_type}({self.device_id})"

    __str__ = __repr__

    def __enter__(self) -> "Context":
        stack = getattr(Context._local, "stack", None)
        if stack is None:
            stack = Context._local.stack = []
        stack.append(self)
        return self

    def __exit__(self, *exc_info: Any) -> None:
        Context._local.stack.pop()

    @property
    def on_host(self) -> bool:
        """True for the CPU device types (where recio's arrays can live)."""
        return self.device_type != "gpu"


def cpu(device_id: int = 0) -> Context:
    """The CPU context (``mx.cpu()``)."""
    return Context("cpu", device_id)


def gpu(device_id: int = 0) -> Context:
    """A GPU context (``mx.gpu()``): a name only, recio keeps data on the CPU."""
    return Context("gpu", device_id)


def cpu_pinned(device_id: int = 0) -> Context:
    """Pinned CPU memory (``mx.cpu_pinned()``), where MXNet's ImageRecordIter puts batches."""
    return Context("cpu_pinned", device_id)


def current_context() -> Context:
    """The innermost ``with Context`` block's context, else ``cpu(0)``."""
    stack = getattr(Context._local, "stack", None)
    return stack[-1] if stack else cpu(0)


__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context"]
