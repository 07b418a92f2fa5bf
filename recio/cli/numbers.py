"""The numeric options of ``recio`` and ``im2rec``: a value that is not the number expected is
refused by saying what is expected, in the option's own terms, and what was given.

click's own types answer ``--resize abc`` with "'abc' is not a valid integer range" and
``--train-ratio 2`` with "2.0 is not in the range 0<=x<=1"; these say "expected a whole number
of pixels, 0 or more (0 keeps the size), got 'abc'" and "expected a fraction from 0 to 1
(e.g. 0.8), got 2". One type for whole numbers and fractions, one for sizes in bytes
(``32MB``, ``64K``), so every option words its refusal the same way.
"""
from __future__ import annotations

import math
from typing import Any, Optional, Union

import click

from recio import storage

Real = Union[int, float]


def _shown(value: Real) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


class Number(click.ParamType):
    """A whole number (``kind=int``) or any number (``float``) within ``[low, high]`` (None:
    unbounded). ``what`` names it in a refusal ("a whole number of pixels"); ``note`` follows
    the range ("(0 keeps the size)"); ``metavar`` is what ``--help`` shows after the option."""

    def __init__(self, kind: type = int, low: Optional[Real] = None, high: Optional[Real] = None,
                 what: Optional[str] = None, note: str = "", metavar: Optional[str] = None
                 ) -> None:
        self.kind, self.low, self.high = kind, low, high
        self.what = what or ("a whole number" if kind is int else "a number")
        self.note = note
        self.name = (metavar or ("N" if kind is int else "NUMBER")).lower()

    def expected(self) -> str:
        """``"a whole number of pixels, 0 or more (0 keeps the size)"``."""
        if self.low is not None and self.high is not None:
            if self.kind is int and self.high - self.low <= 2:
                choices = [str(v) for v in range(int(self.low), int(self.high) + 1)]
                span = f": {', '.join(choices[:-1])} or {choices[-1]}"
            else:
                span = f" from {_shown(self.low)} to {_shown(self.high)}"
        elif self.low is not None:
            span = f", {_shown(self.low)} or more"
        elif self.high is not None:
            span = f", {_shown(self.high)} or less"
        else:
            span = ""
        return f"{self.what}{span}{' ' + self.note if self.note else ''}"

    def convert(self, value: Any, param: Optional[click.Parameter],
                ctx: Optional[click.Context]) -> Any:
        if isinstance(value, bool):
            self.fail(f"expected {self.expected()}, got {value!r}", param, ctx)
        if isinstance(value, (int, float)) and not (self.kind is int and isinstance(value, float)):
            number: Real = self.kind(value)
        else:
            text = str(value).strip()
            try:
                number = int(text, 10) if self.kind is int else float(text)
            except ValueError:
                self.fail(f"expected {self.expected()}, got {value!r}", param, ctx)
            if not math.isfinite(number):
                self.fail(f"expected {self.expected()}, got {value!r}", param, ctx)
        if (self.low is not None and number < self.low) or \
                (self.high is not None and number > self.high):
            self.fail(f"expected {self.expected()}, got {_shown(number)}", param, ctx)
        return number

    def get_metavar(self, param: click.Parameter, ctx: Any = None) -> str:
        return self.name.upper()


class Size(click.ParamType):
    """A size in bytes as people write it (``600``, ``64K``, ``32MB``, ``32MiB``, ``50GB``:
    ``recio.storage.parse_size``); ``what`` names what it sizes."""

    name = "size"

    def __init__(self, what: str = "a size") -> None:
        self.what = what

    def convert(self, value: Any, param: Optional[click.Parameter],
                ctx: Optional[click.Context]) -> Any:
        if isinstance(value, int) and not isinstance(value, bool) and value >= 1:
            return value
        try:
            return storage.parse_size(value)
        except ValueError:
            self.fail(f"expected {self.what} such as 600 (bytes), 64K, 32MB, 32MiB or 50GB, "
                      f"got {value!r}", param, ctx)

    def get_metavar(self, param: click.Parameter, ctx: Any = None) -> str:
        return "SIZE"


#: the options several commands share
SEED = Number(int, what="a whole number", note="(the random seed)", metavar="SEED")
FRACTION = Number(float, 0, 1, what="a fraction", note="(e.g. 0.8)", metavar="FRACTION")
