"""``recio.mx.context``: ``Context``, ``cpu``, ``gpu``, ``cpu_pinned``, ``current_context``
(MXNet's ``mx.context``; the arrays themselves always live on the CPU)."""
from recio.mx.ndarray import Context, cpu, cpu_pinned, current_context, gpu

__all__ = ["Context", "cpu", "gpu", "cpu_pinned", "current_context"]
