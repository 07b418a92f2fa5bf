"""The stream definitions of a CNTK Text Format file, which the file itself does not hold.

Each stream has a ``name`` (what the reader returns), an ``alias`` (the text after ``|`` in the
file), a ``dim`` and dense or sparse storage (:class:`CTFStream`); :func:`read_header` reads
them from ctf2bin's header file, one ``NAME ALIAS dense|sparse DIM`` per line.

Apart from the reader (``recio.sequence.ctf``) because the converters and the command line
take stream definitions without reading a CTF file, and CNTK's configuration rules (unique
names and aliases, at most one ``defines_mb_size``) belong to the definitions.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Dict, List, Optional, Sequence, Union

import numpy as np

from recio.errors import CTFError
from recio.storage import open_regular

PathLike = Union[str, "os.PathLike[str]"]

_INT32_MAX = 2**31 - 1


def is_terminator(byte: int) -> bool:
    """What ends a stream name for CNTK: a space, a tab, ``|``, a control byte or a byte >= 0x80
    (``char`` is signed on x86, so those count as "non-printable")."""
    return byte <= 0x20 or byte == 0x7C or byte >= 0x80


@dataclass(frozen=True)
class CTFStream:
    """One stream of a CTF file.

    ``name``: what the reader returns the stream as (CNTK's ``StreamDefs`` key, the first column
    of ctf2bin's header). ``alias``: the text after ``|`` in the file (``StreamDef(field=...)``).
    ``dim``: values per dense sample, or the bound of sparse indices. ``defines_mb_size``: this
    stream's line count is the sequence size (at most one stream may set it).
    """

    name: str
    alias: str
    dim: int
    is_sparse: bool = False
    defines_mb_size: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name:
            raise ValueError(f"stream name {self.name!r} must be a non-empty string")
        alias = self.alias
        if not isinstance(alias, str) or not alias:
            raise ValueError(f"stream {self.name!r}: the alias (the text after '|' in the "
                             f"file) must be a non-empty string")
        raw = alias.encode("latin-1", "replace")
        if not alias.isascii() or any(is_terminator(b) for b in raw) or alias.startswith("#"):
            raise ValueError(f"stream {self.name!r}: alias {alias!r} can never match in a CTF "
                             f"file: an alias is printable ASCII without spaces or '|' and does "
                             f"not start with '#' ('|#' starts a comment)")
        if isinstance(self.dim, bool) or not isinstance(self.dim, (int, np.integer)):
            raise ValueError(f"stream {self.name!r}: dim must be an integer, not {self.dim!r}")
        if not 1 <= int(self.dim) <= _INT32_MAX:
            raise ValueError(f"stream {self.name!r}: dim {self.dim} must be in [1, {_INT32_MAX}] "
                             f"(CNTK's limit)")
        object.__setattr__(self, "dim", int(self.dim))
        object.__setattr__(self, "is_sparse", bool(self.is_sparse))
        object.__setattr__(self, "defines_mb_size", bool(self.defines_mb_size))

    @property
    def storage(self) -> str:
        """``"sparse"`` or ``"dense"`` (CBF's and ctf2bin's word for it)."""
        return "sparse" if self.is_sparse else "dense"

    @classmethod
    def parse(cls, spec: str) -> "CTFStream":
        """A stream from ``NAME:ALIAS:dense|sparse:DIM`` (the CLI's ``--stream``); ValueError
        saying what is wrong otherwise."""
        parts = spec.split(":")
        if len(parts) != 4:
            raise ValueError(f"{spec!r}: write NAME:ALIAS:dense|sparse:DIM, e.g. "
                             f"features:F:dense:40")
        return _stream_from_fields(parts)


def _stream_from_fields(fields: Sequence[str]) -> CTFStream:
    """A stream from ``(name, alias, dense|sparse, dim)`` text fields (ValueError if bad)."""
    name, alias, storage, dim = fields
    kind = storage.lower()
    if kind not in ("dense", "sparse"):
        raise ValueError(f"storage {storage!r} must be 'dense' or 'sparse'")
    try:
        size = int(dim)
    except ValueError:
        raise ValueError(f"dim {dim!r} is not an integer") from None
    return CTFStream(name, alias, size, kind == "sparse")


def read_header(path: PathLike) -> List[CTFStream]:
    """The streams of a ctf2bin header file: one ``NAME ALIAS dense|sparse DIM`` per line,
    fields separated by any whitespace, in stream order. Blank lines and lines starting with
    ``#`` are ignored (ctf2bin itself crashes on a blank line). Raises CTFError naming the file
    and line for a malformed line or a name or alias given twice."""
    path = os.fspath(path)
    streams: List[CTFStream] = []
    seen: Dict[str, int] = {}
    offset = 0
    with open_regular(path) as f:
        raw_lines = f.read().splitlines(keepends=True)
    for number, raw in enumerate(raw_lines, 1):
        at, offset = offset, offset + len(raw)
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError:
            raise CTFError("line is not UTF-8 text; a header line is NAME ALIAS dense|sparse "
                           "DIM", path=path, line=number, offset=at) from None
        fields = text.split()
        if not fields or fields[0].startswith("#"):
            continue
        if len(fields) != 4:
            raise CTFError(f"expected 4 fields NAME ALIAS dense|sparse DIM, found {len(fields)} "
                           f"({text.strip()!r})", path=path, line=number, offset=at)
        try:
            stream = _stream_from_fields(fields)
        except ValueError as exc:
            raise CTFError(f"{exc} (line {text.strip()!r}; expected NAME ALIAS dense|sparse "
                           f"DIM)", path=path, line=number, offset=at) from None
        for key, what in ((f"name {stream.name}", "name"), (f"alias {stream.alias}", "alias")):
            if key in seen:
                raise CTFError(f"stream {what} {key.split(' ', 1)[1]!r} is already defined on "
                               f"line {seen[key]}; each stream needs its own {what}",
                               path=path, line=number, offset=at)
            seen[key] = number
        streams.append(stream)
    if not streams:
        raise CTFError("no stream definitions (one NAME ALIAS dense|sparse DIM per line)",
                       path=path, line=1, offset=0)
    return streams


def check_streams(streams: Optional[Sequence[Any]], path: str) -> List[CTFStream]:
    """The stream list a reader of ``path`` is given: CTFStream objects (or ``(name, alias, dim,
    is_sparse[, defines_mb_size])`` tuples), at least one (a CTF file cannot say them), unique
    names and aliases, at most one ``defines_mb_size`` (CNTK's configuration errors, as
    ValueError)."""
    out = [s if isinstance(s, CTFStream) else CTFStream(*s) for s in streams or []]
    if not out:
        raise ValueError(f"{path}: a CTF file does not name its streams or their dimensions; "
                         f"give streams=[CTFStream(name, alias, dim, is_sparse), ...] or "
                         f"streams=recio.sequence.ctf_streams.read_header(header_file)")
    for attr in ("name", "alias"):
        values = [getattr(s, attr) for s in out]
        twice = sorted({v for v in values if values.count(v) > 1})
        if twice:
            raise ValueError(f"stream {attr}(s) {twice} given twice; each stream needs its own "
                             f"{attr}")
    main = [s.name for s in out if s.defines_mb_size]
    if len(main) > 1:
        raise ValueError(f"only one stream may define the minibatch size, but {len(main)} do: "
                         f"{', '.join(main)}")
    return out
