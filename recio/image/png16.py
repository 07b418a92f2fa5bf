"""The 16-bit samples of a colour PNG, which Pillow keeps only 8 bits of.

OpenCV (and so MXNet) computes the greyscale of a 16-bit colour PNG on all 16 bits and returns
``IMREAD_UNCHANGED`` pixels as uint16; :func:`read_png16` gives the codec those samples. It
reads only what such a file needs (IHDR, tRNS, IDAT; filters; Adam7 interlacing) and is used
for nothing else: Pillow decodes every other PNG. The Average and Paeth filters are undone
pixel by pixel, so this is slow for large images, which in image records are rare.
"""
from __future__ import annotations

import struct
import zlib
from typing import List, Optional, Tuple

import numpy as np

_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: colour type -> channels, for the 16-bit colour layouts read here
_CHANNELS = {2: 3, 4: 2, 6: 4}
#: Adam7 passes: (x0, y0, dx, dy)
_ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
          (0, 1, 1, 2))


def png16_layout(data: bytes) -> Optional[int]:
    """The colour type (2 RGB, 4 grey + alpha, 6 RGBA) of a 16-bit PNG with colour or alpha,
    else None (any other file), from the IHDR chunk, which a PNG must start with."""
    if len(data) < 26 or data[:8] != _PNG_SIGNATURE or data[12:16] != b"IHDR":
        return None
    depth, color_type = data[24], data[25]
    return color_type if depth == 16 and color_type in _CHANNELS else None


def read_png16(data: bytes) -> Tuple[np.ndarray, Optional[Tuple[int, ...]]]:
    """``(samples, key)``: the ``(H, W, C)`` uint16 samples of a PNG for which
    :func:`png16_layout` is not None, and the tRNS colour key of an RGB one (else None).

    Raises ``ValueError`` for a damaged file (the codec reports it as an ImageError).
    """
    width, height, color_type, interlace, idat, key = _chunks(data)
    channels = _CHANNELS[color_type]
    bpp = 2 * channels
    expected = sum(h * (1 + w * bpp) for w, h, _ in _passes(width, height, interlace))
    inflater = zlib.decompressobj()
    raw = inflater.decompress(idat, expected)
    if len(raw) < expected:
        raise ValueError(f"PNG image data ends after {len(raw)} of {expected} bytes")
    samples = np.empty((height, width, channels), np.uint16)
    pos = 0
    for w, h, (x0, y0, dx, dy) in _passes(width, height, interlace):
        size = h * (1 + w * bpp)
        rows = _unfilter(raw[pos:pos + size], w, h, bpp)
        samples[y0::dy, x0::dx] = rows.view(">u2").reshape(h, w, channels)
        pos += size
    return samples, key


def _chunks(data: bytes) -> Tuple[int, int, int, int, bytes, Optional[Tuple[int, ...]]]:
    pos, idat, key = 8, [], None
    width = height = color_type = interlace = None
    while pos + 8 <= len(data):
        length, kind = struct.unpack_from(">I4s", data, pos)
        body = data[pos + 8:pos + 8 + length]
        if len(body) < length:
            raise ValueError(f"PNG chunk {kind!r} is cut short")
        if kind == b"IHDR":
            width, height, _, color_type, _, _, interlace = struct.unpack(">IIBBBBB", body[:13])
        elif kind == b"tRNS" and color_type == 2 and length >= 6:
            key = struct.unpack(">HHH", body[:6])
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
        pos += 12 + length
    if width is None or not idat:
        raise ValueError("PNG without IHDR or image data")
    assert height is not None and color_type is not None and interlace is not None  # IHDR's
    return width, height, color_type, interlace, b"".join(idat), key


def _passes(width: int, height: int, interlace: int
            ) -> List[Tuple[int, int, Tuple[int, int, int, int]]]:
    """``(pass width, pass height, (x0, y0, dx, dy))`` of each non-empty pass."""
    if not interlace:
        return [(width, height, (0, 0, 1, 1))]
    out = []
    for x0, y0, dx, dy in _ADAM7:
        w, h = -(-(width - x0) // dx), -(-(height - y0) // dy)
        if w > 0 and h > 0:
            out.append((w, h, (x0, y0, dx, dy)))
    return out


def _unfilter(raw: bytes, width: int, height: int, bpp: int) -> np.ndarray:
    """Undo the PNG row filters: ``(height, width * bpp)`` bytes."""
    stride = width * bpp
    rows = np.frombuffer(raw, np.uint8).reshape(height, stride + 1)
    out = np.empty((height, stride), np.uint8)
    prior = np.zeros(stride, np.int64)
    for y in range(height):
        kind, line = rows[y, 0], rows[y, 1:].astype(np.int64)
        if kind == 0:
            cur = line
        elif kind == 1:  # Sub: a running sum along each byte lane
            cur = np.cumsum(line.reshape(width, bpp), axis=0).reshape(-1) & 0xFF
        elif kind == 2:  # Up
            cur = (line + prior) & 0xFF
        elif kind in (3, 4):
            cur = _unfilter_sequential(kind, line, prior, width, bpp)
        else:
            raise ValueError(f"PNG row {y} has an unknown filter type {kind}")
        out[y] = cur
        prior = cur
    return out


def _unfilter_sequential(kind: int, line: np.ndarray, prior: np.ndarray, width: int,
                         bpp: int) -> np.ndarray:
    """Average (3) and Paeth (4): each pixel depends on the one reconstructed before it."""
    cur = np.empty_like(line)
    left = np.zeros(bpp, np.int64)
    up_left = np.zeros(bpp, np.int64)
    for x in range(width):
        lane = slice(x * bpp, (x + 1) * bpp)
        up = prior[lane]
        if kind == 3:
            predicted = (left + up) >> 1
        else:
            p = left + up - up_left
            pa, pb, pc = np.abs(p - left), np.abs(p - up), np.abs(p - up_left)
            predicted = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, up_left))
        cur[lane] = (line[lane] + predicted) & 0xFF
        left, up_left = cur[lane], up
    return cur


__all__ = []
