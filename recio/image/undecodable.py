"""The one policy for image records nothing can decode, in every reader that decodes them.

An *undecodable record* is an image record whose image cannot be used: bytes no decoder reads
(text, an empty payload, a PNG cut short, a JPEG that holds its headers and no scan), a damaged
``IRHeader``, or an image declaring more than ``max_pixels`` pixels (the decompression-bomb
guard). A damaged JPEG that libjpeg recovers (a truncated scan, stray bytes) is *not* one: it
decodes as MXNet's decoder recovers it (``recio.image.pixels.codec``).

Every reader of image records takes ``on_undecodable`` (``recio.ImageBatchIter``,
``recio.mx.io.ImageRecordIter``, ``recio.mx.image.ImageIter``, gluon's ``ImageRecordDataset``,
``recio.torch.RecordDataset`` and ``RecordIterableDataset``):

* ``"skip"`` (the default): the record is left out and reading goes on, so an epoch never ends
  because of one image. A :class:`~recio.errors.SkippedRecordWarning` names it, with the text
  ``"raise"`` would have raised (file, byte offset, the key or the record's place in a stream,
  why) followed by ``; skipped``, and the reader counts it in ``num_skipped``. Python's warning
  registry shows each distinct message once.
* ``"raise"``: :class:`~recio.errors.ImageError` with that text, at the first one.

A reader that must hand back *something* for the record asked for (``RecordDataset[i]``, gluon's
``ImageRecordDataset[i]``, a batch of ``RecordDataset.__getitems__`` whose every image is
undecodable) gives the next decodable record in index order in its place
(:func:`next_decodable`), and the warning says which (``; skipped, key 8 in its place``); when
the next :data:`_MOST_PASSED_OVER` records do not decode either, the file holds something else
and it raises.

MXNet itself differs, which is why this is recio's rule and not a copy of MXNet's: its C++
``ImageRecordIter`` stops with an error or kills its process (SIGFPE) on such a record, and its
Python ``ImageIter`` raises ``RuntimeError("Broken image ...")`` (it skips only what its
``check_valid_image`` refuses, which recio keeps).
"""
from __future__ import annotations

import threading
import warnings
from typing import Callable, Optional, Tuple, TypeVar

from recio.errors import ImageError, SkippedRecordWarning

#: skip undecodable records (warned and counted), the default
SKIP = "skip"
#: raise ``ImageError`` at the first undecodable record
RAISE = "raise"
#: the values ``on_undecodable`` takes
ON_UNDECODABLE = (SKIP, RAISE)
#: how many undecodable records in a row :func:`next_decodable` passes over, looking for one
#: to stand in, before it calls the file one of other records
_MOST_PASSED_OVER = 100

T = TypeVar("T")


def check_policy(on_undecodable: str) -> str:
    """``on_undecodable`` itself when it is one of :data:`ON_UNDECODABLE`, else ``ValueError``."""
    if on_undecodable not in ON_UNDECODABLE:
        raise ValueError(f"on_undecodable must be 'skip' (leave the record out, warn and count "
                         f"it) or 'raise' (ImageError), got {on_undecodable!r}")
    return on_undecodable


def undecodable(reason: str, path: Optional[str], name: str,
                offset: Optional[int] = None) -> ImageError:
    """The error naming an undecodable record: ``FILE: byte OFFSET: NAME: reason`` (``name``
    is ``key 7``, or ``record #3 of part 0/2`` in a stream)."""
    return ImageError(f"{name}: {reason}", path, offset)


def skipped_text(text: str, instead: Optional[str] = None) -> str:
    """What a reader says of a record it skipped: ``text`` (the error ``"raise"`` would give)
    then ``; skipped``, and what came in its place (``instead``, e.g. ``"key 8"``) if
    anything. The commands print the same."""
    return f"{text}; skipped" + (f", {instead} in its place" if instead else "")


def warn_skipped(text: str, instead: Optional[str] = None, stacklevel: int = 1) -> None:
    """Warn with :func:`skipped_text`. ``stacklevel`` 1 attributes the warning to the line
    calling this (a reader's, in whatever thread or worker process it runs), 2 to its caller,
    as ``warnings.warn``'s does."""
    warnings.warn(skipped_text(text, instead), SkippedRecordWarning, stacklevel=stacklevel + 1)


def skip_or_raise(error: ImageError, on_undecodable: str, instead: Optional[str] = None,
                  stacklevel: int = 1) -> None:
    """Apply the policy to one undecodable record: raise ``error`` (``"raise"``), or warn that
    it was skipped (``"skip"``; the caller counts it)."""
    if on_undecodable == RAISE:
        raise error
    warn_skipped(str(error), instead, stacklevel + 1)


def next_decodable(error: ImageError, start: int, count: int,
                   read: Callable[[int], T]) -> Tuple[int, T]:
    """``(position, sample)`` of the first record after ``start`` in index order (wrapping
    around, ``count`` records) that ``read`` reads without :class:`ImageError`: what stands in
    for the undecodable record ``error`` names, which a reader must return something for. The
    undecodable records passed over are not warned about here (each is, when it is asked for
    itself). Past :data:`_MOST_PASSED_OVER` of them in a row this is no longer one bad image
    but a file of something else (or of nothing decodable): ``error`` is raised, saying so."""
    for step in range(1, min(count, _MOST_PASSED_OVER + 1)):
        position = (start + step) % count
        try:
            return position, read(position)
        except ImageError:
            continue
    what = (f"nor do the {_MOST_PASSED_OVER} records after it" if count > _MOST_PASSED_OVER + 1
            else f"none of the {count} records decodes")
    raise ImageError(f"{error.message}; {what}, so nothing can stand in for it (records of "
                     f"another kind? decode= reads them)", error.path, error.offset)


class SkipCount:
    """A count of skipped records that threads may add to at once (``num_skipped`` of the
    readers that run in one process)."""

    def __init__(self) -> None:
        self._value = 0
        self._lock = threading.Lock()

    def add(self, n: int = 1) -> None:
        with self._lock:
            self._value += n

    @property
    def value(self) -> int:
        return self._value
