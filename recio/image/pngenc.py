"""PNG files as OpenCV's ``cv2.imencode('.png', img, [cv2.IMWRITE_PNG_COMPRESSION, level])``
writes them, byte for byte, without OpenCV: what MXNet's ``pack_img(..., img_fmt='.png')`` and
``im2rec --encoding .png`` store.

OpenCV hands the rows to libpng with the compression level it was given (clamped to 0-9) and
zlib's default strategy; everything else is libpng's default, which this module repeats
(checked against ``cv2.imencode`` by tests/test_image_codec.py):

* chunks ``IHDR`` (8 or 16 bits, grey / RGB / RGBA, no interlacing), ``IDAT``, ``IEND``;
  16-bit samples big-endian;
* each row's filter chosen as libpng's ``png_write_find_filter`` does: of None, Sub, Up,
  Average and Paeth (only None/Up for a one-pixel-wide image, None/Sub for a one-row one), the
  one whose filtered bytes have the smallest sum of ``min(v, 256 - v)``, the first on a tie;
* the filtered rows deflated by zlib at the level, memory level 8, with the window libpng
  picks: 15 bits, halved while the image's filtered bytes plus 262 fit in half the window
  (images of at most 16 KiB of filtered bytes); then the stream's header declares the
  smallest window that holds those bytes (libpng's ``optimize_cmf``);
* the zlib stream cut into ``IDAT`` chunks of 8 KiB (libpng's buffer).

The deflate stream is Python's ``zlib`` module; it equals OpenCV's when both are zlib 1.2.x or
1.3.x (a Python built on zlib-ng writes other, equally valid, bytes).
"""
from __future__ import annotations

import struct
import zlib

import numpy as np

#: libpng's compression buffer: each full buffer becomes one IDAT chunk
_IDAT_SIZE = 8192
_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: zlib's largest stored block, and its pending buffer at memory level 8 (libpng's)
_STORED_MAX = 65535
_PENDING_SIZE = 65536
#: colour type by channel count
_COLOR_TYPE = {1: 0, 3: 2, 4: 6}


def _chunk(kind: bytes, data: bytes) -> bytes:
    return struct.pack(">I", len(data)) + kind + data + struct.pack(
        ">I", zlib.crc32(data, zlib.crc32(kind)) & 0xFFFFFFFF)


def encode_png(image: np.ndarray, level: int = 3) -> bytes:
    """PNG bytes of ``image`` as ``cv2.imencode`` writes them at compression ``level``
    (clamped to 0-9). ``image``: uint8 or uint16, ``(H, W)`` or ``(H, W, 1)`` grey,
    ``(H, W, 3)`` **RGB** or ``(H, W, 4)`` RGBA (the sample order of the file; OpenCV's BGR
    arrays are reversed first)."""
    pixels = image if image.ndim == 3 else image[:, :, None]
    if pixels.dtype not in (np.uint8, np.uint16) or pixels.shape[2] not in _COLOR_TYPE \
            or pixels.ndim != 3 or 0 in pixels.shape:
        raise ValueError(f"encode_png takes uint8/uint16 (H, W[, 1-4]) arrays, not "
                         f"{pixels.dtype} {image.shape}")
    height, width, channels = pixels.shape
    depth = 8 * pixels.dtype.itemsize
    raw = np.ascontiguousarray(pixels.astype(">u2") if depth == 16 else pixels)
    rows = raw.view(np.uint8).reshape(height, width * channels * pixels.dtype.itemsize)
    filtered = _filter_rows(rows, channels * pixels.dtype.itemsize)
    level = min(max(int(level), 0), 9)
    bits = _window_bits(filtered.size)
    if level == 0:
        stream = _stored(filtered, bits)
    else:
        compressor = zlib.compressobj(level, zlib.DEFLATED, bits, 8, zlib.Z_DEFAULT_STRATEGY)
        stream = compressor.compress(filtered.data) + compressor.flush()
    stream = _smallest_window(stream, filtered.size)
    header = struct.pack(">IIBBBBB", width, height, depth, _COLOR_TYPE[channels], 0, 0, 0)
    parts = [_SIGNATURE, _chunk(b"IHDR", header)]
    parts += [_chunk(b"IDAT", stream[i:i + _IDAT_SIZE])
              for i in range(0, len(stream), _IDAT_SIZE)]
    parts.append(_chunk(b"IEND", b""))
    return b"".join(parts)


def _window_bits(data_size: int) -> int:
    """zlib's window for ``data_size`` bytes of filtered rows (libpng's ``png_deflate_claim``)."""
    bits = 15
    if data_size <= 16384:
        half = 1 << (bits - 1)
        while data_size + 262 <= half:
            half >>= 1
            bits -= 1
    return bits


def _stored(filtered: np.ndarray, bits: int) -> bytes:
    """The zlib stream of level 0 as libpng gets it from zlib (1.2.11 and later): zlib's stored
    blocks end where its ``deflate_stored`` ends them, which depends on how the data arrives
    (libpng: one row a call, until the row is taken) and on the room left in libpng's 8 KiB
    output buffer; ``_StoredDeflate`` follows that, block for block."""
    deflate = _StoredDeflate(filtered.data.cast("B"), bits)
    row = filtered.shape[1]
    for end in range(row, filtered.size + 1, row):
        deflate.feed(end)
    deflate.feed(filtered.size, final=True)
    return bytes(deflate.stream)


class _StoredDeflate:
    """zlib's ``deflate()`` with ``deflate_stored`` (level 0), memory level 8, called as
    libpng's ``png_compress_IDAT`` calls it; only positions are tracked, the blocks copy
    ``data``."""

    def __init__(self, data: memoryview, bits: int) -> None:
        self.data = data
        self.w_size = 1 << bits
        self.window_size = 2 * self.w_size
        self.stream = bytearray()
        cmf = 0x08 | ((bits - 8) << 4)
        self.pending = bytearray((cmf, 0x1F - (cmf << 8) % 0x1F))  # FLEVEL 0, no dictionary
        self.avail_out = _IDAT_SIZE
        self.next_in = 0  # offset in data of the next byte to read
        self.avail_in = 0
        self.base = 0  # data offset of window[0]
        self.strstart = self.block_start = 0
        self.finished = False  # the last block is written
        self.trailer = False

    def feed(self, end: int, final: bool = False) -> None:
        """Hand ``data[next_in:end]`` (one row) to deflate until it is taken, as libpng does
        (``Z_NO_FLUSH``); ``final``: the ``Z_FINISH`` call that follows the last row, until the
        stream ends."""
        self.avail_in = end - self.next_in
        while True:
            done = self._deflate(final)
            if self.avail_out == 0:  # libpng writes a full IDAT and gives a fresh buffer
                self.avail_out = _IDAT_SIZE
                continue
            if done or (not final and self.avail_in == 0):
                return

    def _out(self, chunk: bytes) -> None:
        self.stream += chunk
        self.avail_out -= len(chunk)

    def _flush_pending(self) -> None:
        n = min(len(self.pending), self.avail_out)
        self._out(bytes(self.pending[:n]))
        del self.pending[:n]

    def _deflate(self, final: bool) -> bool:
        """One ``deflate()`` call; True once the stream is complete (Z_STREAM_END)."""
        if self.pending:
            self._flush_pending()
            if self.avail_out == 0:
                return False
        if not self.finished:
            self._deflate_stored(final)
            if not self.finished or self.pending:
                return False
        if not final:
            return False
        if not self.trailer:
            self.trailer = True
            self.pending += struct.pack(">I", zlib.adler32(self.data) & 0xFFFFFFFF)
            self._flush_pending()
        return not self.pending

    def _window_append(self, used: int) -> None:
        """The window after ``used`` bytes went straight to the output (zlib keeps them as
        history): appended, the window slid down first when they do not fit; a block starts
        after them."""
        if used >= self.w_size:
            self.base = self.next_in - self.w_size
            self.strstart = self.w_size
        else:
            if self.window_size - self.strstart <= used:
                self.strstart -= self.w_size
                self.base += self.w_size
            self.strstart += used
        self.block_start = self.strstart

    def _block_header(self, length: int, last: bool) -> bytes:
        return struct.pack("<BHH", int(last), length, length ^ 0xFFFF)

    def _deflate_stored(self, final: bool) -> None:
        min_block = min(_PENDING_SIZE - 5, self.w_size)
        # blocks straight to the output, while worthy (at least min_block) or, when finishing,
        # the rest if it fits
        while self.avail_out >= 5:
            left = self.strstart - self.block_start
            length = min(_STORED_MAX, left + self.avail_in, self.avail_out - 5)
            if length < min_block and (not final or length != left + self.avail_in):
                break
            last = final and length == left + self.avail_in
            self._out(self._block_header(length, last))
            from_window = min(left, length)
            start = self.base + self.block_start
            self._out(bytes(self.data[start:start + from_window]))
            self.block_start += from_window
            direct = length - from_window
            self._out(bytes(self.data[self.next_in:self.next_in + direct]))
            self.next_in += direct
            self.avail_in -= direct
            if direct:  # the window keeps the last bytes copied past it
                self._window_append(direct)
            if last:
                self.finished = True
                return
        # fill the window
        have = self.window_size - self.strstart
        if self.avail_in > have and self.block_start >= self.w_size:
            self.block_start -= self.w_size
            self.strstart -= self.w_size
            self.base += self.w_size
            have += self.w_size
        have = min(have, self.avail_in)
        self.next_in += have
        self.avail_in -= have
        self.strstart += have
        # a block through the pending buffer
        have = min(_PENDING_SIZE - 5, _STORED_MAX)
        min_block = min(have, self.w_size)
        left = self.strstart - self.block_start
        if left >= min_block or ((left or final) and final and self.avail_in == 0
                                 and left <= have):
            length = min(left, have)
            last = final and self.avail_in == 0 and length == left
            start = self.base + self.block_start
            self.pending += self._block_header(length, last)
            self.pending += self.data[start:start + length]
            self.block_start += length
            self.finished = last
            self._flush_pending()


def _smallest_window(stream: bytes, data_size: int) -> bytes:
    """The zlib header rewritten to declare the smallest window that holds ``data_size`` bytes
    (libpng's ``optimize_cmf``; the data is unchanged)."""
    cmf = stream[0]
    if data_size > 16384 or (cmf & 0x0F) != 8 or (cmf & 0xF0) > 0x70:
        return stream
    cinfo = cmf >> 4
    half = 1 << (cinfo + 7)
    if data_size > half:
        return stream
    while True:
        half >>= 1
        cinfo -= 1
        if cinfo == 0 or data_size > half:
            break
    cmf = (cmf & 0x0F) | (cinfo << 4)
    flg = stream[1] & 0xE0
    flg += 0x1F - ((cmf << 8) + flg) % 0x1F
    return bytes((cmf, flg)) + stream[2:]


def _filter_rows(rows: np.ndarray, bpp: int) -> np.ndarray:
    """Each row prefixed with its filter type and filtered by libpng's choice (``rows``: the
    image's bytes, one row per line; ``bpp``: bytes per pixel)."""
    height, rowbytes = rows.shape
    cur = rows.astype(np.int16)
    up = np.zeros_like(cur)
    up[1:] = cur[:-1]
    left = np.zeros_like(cur)
    left[:, bpp:] = cur[:, :-bpp]
    upleft = np.zeros_like(cur)
    upleft[:, bpp:] = up[:, :-bpp]
    # Paeth's predictor: a (left), b (up) or c (up-left), whichever is nearest to a + b - c
    pa = np.abs(up - upleft)
    pb = np.abs(left - upleft)
    pc = np.abs(left + up - 2 * upleft)
    paeth = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, up, upleft))
    candidates = np.stack([cur, cur - left, cur - up, cur - ((left + up) >> 1), cur - paeth])
    candidates &= 0xFF
    allowed = np.ones(5, bool)  # None, Sub, Up, Average, Paeth
    if height == 1:
        allowed[[2, 3, 4]] = False
    if rows.shape[1] == bpp:  # one pixel wide
        allowed[[1, 3, 4]] = False
    sums = np.minimum(candidates, 256 - candidates).sum(axis=2)  # (5, height)
    sums[~allowed] = np.iinfo(sums.dtype).max
    choice = np.argmin(sums, axis=0)  # the first of equal sums, as libpng's strict "<"
    out = np.empty((height, rowbytes + 1), np.uint8)
    out[:, 0] = choice
    out[:, 1:] = candidates[choice, np.arange(height)]
    return out


__all__ = ["encode_png"]
