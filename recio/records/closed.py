"""What recio's readers, writers, splits, datasets and iterators are after ``close()``.

Every use of a closed object raises :class:`~recio.errors.ClosedError` (a ``ValueError``):
``I/O on a closed reader: data/train.rec``, naming its file, as Python's own files say
``I/O operation on closed file``; so does pickling it (a closed object would reopen its file
on the other side). ``close()`` itself may be called again.

Objects get this with no cost on their hot paths: ``close()`` puts a :class:`Closed`
placeholder where the object kept what it reads through (its byte source, its index, its
bound read functions), and any attribute, call, ``len``, iteration, membership test or item
access of the placeholder raises the error. Methods that touch none of those call
:func:`check_open`.
"""
from __future__ import annotations

from typing import Any, NoReturn, Optional

from recio.errors import ClosedError


class Closed:
    """Stands where a closed object kept its file, index or read functions: every use raises
    ``ClosedError(what, path)``."""

    __slots__ = ("_what", "_path")

    def __init__(self, what: str, path: Optional[str]) -> None:
        self._what = what
        self._path = path

    def error(self) -> ClosedError:
        """The error every use raises."""
        return ClosedError(self._what, self._path)

    def _refuse(self, *args: Any, **kwargs: Any) -> NoReturn:
        raise self.error()

    def __getattr__(self, name: str) -> Any:
        raise self.error()

    __call__ = __len__ = __iter__ = __contains__ = __getitem__ = _refuse

    def __reduce__(self) -> Any:
        raise self.error()

    def __repr__(self) -> str:
        return f"<closed {self._what}: {self._path}>"


def is_closed(value: Any) -> bool:
    """Whether ``value`` is the placeholder of a closed object's resource."""
    return type(value) is Closed


def check_open(closed: bool, what: str, path: Optional[str]) -> None:
    """Raise ``ClosedError(what, path)`` when ``closed``."""
    if closed:
        raise ClosedError(what, path)


def refuse_to_pickle(writer: Any) -> NoReturn:
    """``__getstate__`` of a writer (``recio.records.atomic.ManagedWriter``): its files are
    open, half written, in this process, and a copy elsewhere would write them too; so
    ``TypeError`` naming its file, or ``ClosedError`` for a closed one."""
    path = getattr(writer, "path", None)
    check_open(writer.closed, "writer", path)
    raise TypeError(f"a {type(writer).__name__} cannot be pickled: it is writing {path} in "
                    "this process; pickle what it writes instead, and open the writer where "
                    "it is used")
