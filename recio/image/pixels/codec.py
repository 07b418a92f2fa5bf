"""The one image decoder: image bytes to pixels by OpenCV's ``cv2.imdecode``, as MXNet decodes
them; its other half, ``encode``, is ``recio.image.pixels.encoding``.

Every reader of image records decodes through :func:`decode` (``unpack_img``, ``recio.mx``,
``ImageBatchIter``, the torch datasets, ``recio show``, ``recio verify --images``) and im2rec
through ``recio.image.pixels.transform``, which adds its crop and resize. So one set of rules holds
everywhere:

* **OpenCV's pixels.** MXNet decodes with OpenCV, and so does recio: the flags ``color`` 1
  (colour), 0 (greyscale: libjpeg's own luma for a JPEG, libpng's conversion for a PNG) and -1
  (as stored: 16-bit PNG samples, alpha). The arrays are RGB unless ``bgr=True`` asks for
  OpenCV's own order. One exception, where OpenCV 5 no longer gives MXNet's pixels: the
  greyscale of a PNG with a known sRGB ICC profile (``recio.image.pixels.png_srgb``).
* **Damaged JPEGs decode as libjpeg recovers them.** A JPEG with stray bytes or a corrupt
  stretch of scan data decodes with libjpeg's warning, as in MXNet. A truncated one (its end
  lost: a partial download, a full disk) gets the end marker libjpeg's own file reader inserts
  when a file ends early, so it decodes to what ``cv2.imread`` of that file gives, and so to
  what MXNet's ``tools/im2rec.py`` packs (the rows that arrived, then grey). Only bytes that
  nothing can decode raise :class:`~recio.errors.ImageError`.
* **DCT-scaled decoding.** Given ``min_side``, a JPEG is decoded at 1/2, 1/4 or 1/8 of its size
  in the DCT domain (OpenCV's ``IMREAD_REDUCED_*``) when the result still covers the image
  scaled so that its shorter side is ``min_side``: much cheaper for photos about to be shrunk.
* **One faster road for JPEGs.** A JPEG decoded at full size goes to libjpeg-turbo through
  simplejpeg, which gives the same pixels as OpenCV's (the tests hold both to MXNet's) with
  about 10% less CPU, and can decode into a buffer the calling thread reuses (``scratch``):
  ``benchmarks/bench_dali.py`` and ``bench_im2rec.py`` show the difference. A JPEG simplejpeg
  refuses (a damaged one, CMYK) or one whose EXIF orientation is to be applied goes to OpenCV.
* **Decompression bombs.** The size an image declares is read from its header and checked
  against ``max_pixels`` before any pixel is allocated.
* **EXIF orientation** is applied only when asked (``exif_transpose``): MXNet's own decoder
  (OpenCV 3.4.2) ignores it, while ``cv2.imread`` (and so MXNet's ``im2rec.py``) applies it for
  colour and greyscale.
"""
from __future__ import annotations

import io
import re
import struct
import threading
from typing import Any, Optional, Tuple, Union

import cv2
import numpy as np
from PIL import Image

from recio.errors import ImageError
from recio.image.pixels.png_srgb import srgb_grey
from recio.optional import optional

#: Pillow's own default decompression-bomb limit (about 89.5 megapixels, a 9459 x 9459 image)
DEFAULT_MAX_PIXELS = 89_478_485
#: colour flags, as OpenCV's and MXNet's: 1 colour (alpha dropped), 0 greyscale, -1 as stored
COLOR_MODES = (-1, 0, 1)
#: the DCT scales (in eighths) a reduced decode may use: OpenCV's IMREAD_REDUCED_* (1/8, 1/4,
#: 1/2) and the full size
_POWER_OF_TWO_SCALES = (1, 2, 4, 8)

_JPEG_SOI = b"\xff\xd8\xff"
#: what libjpeg's file reader appends when a file ends before its end-of-image marker
_JPEG_EOI = np.frombuffer(b"\xff\xd9", np.uint8)
_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: a JPEG's EXIF data is an APP1 segment starting with this, within its first 64 KiB
_EXIF_HEADER = b"Exif\x00\x00"
_EXIF_SEARCH = 65_560
_ORIENTATION_TAG = 0x0112
#: JPEG start-of-frame markers (SOF0-SOF15 but DHT, JPG and DAC), which hold the image size
_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}
_SOF = struct.Struct(">HBHH")  # segment length, precision, height, width

#: cv2.imdecode's flag for each ``color`` (RGB output asked for separately)
_IMREAD = {1: cv2.IMREAD_COLOR, 0: cv2.IMREAD_GRAYSCALE, -1: cv2.IMREAD_UNCHANGED}
#: the reduced flags: (colour?, eighths) -> flag; IMREAD_REDUCED_GRAYSCALE_k | IMREAD_COLOR_RGB
#: is the colour one in RGB order
_REDUCED_GREY = {4: cv2.IMREAD_REDUCED_GRAYSCALE_2, 2: cv2.IMREAD_REDUCED_GRAYSCALE_4,
                 1: cv2.IMREAD_REDUCED_GRAYSCALE_8}
_REDUCED_COLOUR = {4: cv2.IMREAD_REDUCED_COLOR_2, 2: cv2.IMREAD_REDUCED_COLOR_4,
                   1: cv2.IMREAD_REDUCED_COLOR_8}

#: what decode accepts: the encoded image (a NumPy uint8 array as MXNet's imdecode takes one)
ImageBytes = Union[bytes, bytearray, memoryview, np.ndarray]


# -- decode -------------------------------------------------------------------------------------
def decode(data: ImageBytes, color: int = 1, *, bgr: bool = False, min_side: int = 0,
           max_pixels: int = DEFAULT_MAX_PIXELS, exif_transpose: bool = False,
           name: Optional[str] = None, scratch: bool = False) -> np.ndarray:
    """Decode image bytes to a uint8 array with OpenCV's (and so MXNet's) pixels.

    ``color`` as OpenCV's imdecode flag: 1 -> ``(H, W, 3)`` RGB (``bgr=True``: BGR, as OpenCV),
    0 -> ``(H, W)`` greyscale, -1 -> as stored: ``(H, W)`` for grey (uint16 for a 16-bit PNG),
    3 channels for colour, 4 with alpha. ``min_side > 0`` lets a JPEG decode smaller (see the
    module docstring). ``exif_transpose`` applies the EXIF orientation. An image declaring more
    than ``max_pixels`` pixels, or that cannot be decoded, raises :class:`ImageError` (``name``
    is its path or record in the message).

    ``scratch=True`` lets the result live in a buffer of the calling thread that its next
    ``scratch`` decode overwrites (a JPEG at full size): for callers that copy the pixels they
    keep (a crop into a batch) before decoding again. A fresh array per image costs a quarter
    of a small JPEG's decode (its pages are zero-filled by the kernel each time).
    """
    return decode_scaled(data, color, bgr=bgr, min_side=min_side, max_pixels=max_pixels,
                         exif_transpose=exif_transpose, name=name, scratch=scratch)[0]


def decode_scaled(data: ImageBytes, color: int = 1, *, bgr: bool = False, min_side: int = 0,
                  max_pixels: int = DEFAULT_MAX_PIXELS, exif_transpose: bool = False,
                  name: Optional[str] = None, scratch: bool = False
                  ) -> Tuple[np.ndarray, Tuple[int, int], float]:
    """:func:`decode`, also returning the image's own ``(width, height)`` (after the EXIF
    orientation when it is applied) and the DCT scale it was decoded at (1.0, 0.5, 0.25 or
    0.125), for callers that map source coordinates onto the pixels."""
    if color not in COLOR_MODES:
        raise ValueError(f"color must be 1 (colour), 0 (greyscale) or -1 (as stored), got {color}")
    buf = _as_buffer(data)
    size = image_size(buf)
    if size is not None:
        _check_pixels(size[0], size[1], max_pixels, name)
    jpeg = bytes(buf[:3]) == _JPEG_SOI
    eighths = dct_eighths(size[0], size[1], min_side) if jpeg and size and color != -1 else 8
    array = srgb_grey(buf) if color == 0 and not jpeg else None  # MXNet's rule, not OpenCV 5's
    if array is not None and exif_transpose:
        array = _orient(array, _exif_orientation(buf))
    if array is None and jpeg and eighths == 8:
        array = _decode_simplejpeg(buf, color, bgr, exif_transpose, scratch)
        if array is not None:
            return array, (array.shape[1], array.shape[0]), 1.0
    if array is None:
        array = _imdecode(buf, _flag(color, eighths, bgr, exif_transpose), jpeg)
    if array is None:
        raise ImageError(_undecodable(buf), path=name)
    if size is None:  # a format whose header recio does not read: OpenCV's own limit held
        _check_pixels(array.shape[1], array.shape[0], max_pixels, name)
    if color == -1:
        if exif_transpose:  # OpenCV leaves IMREAD_UNCHANGED as stored
            array = _orient(array, _exif_orientation(buf))
        if not bgr and array.ndim == 3:
            swap = cv2.COLOR_BGR2RGB if array.shape[2] == 3 else cv2.COLOR_BGRA2RGBA
            array = cv2.cvtColor(array, swap, dst=array)  # in place: no second image in memory
    height, width = array.shape[:2]
    if eighths == 8:
        return array, (width, height), 1.0
    own = size if size is not None else (width, height)
    if exif_transpose and _exif_orientation(buf) in (5, 6, 7, 8):
        own = (own[1], own[0])  # OpenCV turned it by the EXIF orientation
    return array, own, eighths / 8


def _as_buffer(data: ImageBytes) -> np.ndarray:
    """The encoded bytes as the 1-D uint8 array cv2.imdecode takes (no copy for bytes)."""
    if isinstance(data, np.ndarray):
        return np.ascontiguousarray(data, dtype=np.uint8).reshape(-1)
    return np.frombuffer(data, np.uint8)


_SCRATCH = threading.local()


def _scratch(nbytes: int) -> np.ndarray:
    """This thread's decode buffer, at least ``nbytes`` long (grown by half again when short)."""
    buffer = getattr(_SCRATCH, "buffer", None)
    if buffer is None or buffer.size < nbytes:
        grown = max(nbytes, int(1.5 * (0 if buffer is None else buffer.size)))
        buffer = _SCRATCH.buffer = np.empty(grown, np.uint8)
    return buffer


def _decode_simplejpeg(buf: np.ndarray, color: int, bgr: bool, exif_transpose: bool,
                       scratch: bool) -> Optional[np.ndarray]:
    """A full-size JPEG through simplejpeg (libjpeg-turbo's TurboJPEG: OpenCV's pixels, less
    CPU); None where OpenCV decodes it instead: simplejpeg missing (a platform without its
    wheel), a colour space it does not convert as OpenCV does (CMYK, YCCK), an EXIF
    orientation to apply, or any complaint (a damaged JPEG: OpenCV recovers what libjpeg can)."""
    sj: Any = optional("simplejpeg")
    if sj is None or (exif_transpose and buf[:_EXIF_SEARCH].tobytes().find(_EXIF_HEADER) != -1):
        return None
    try:
        height, width, colorspace, _ = sj.decode_jpeg_header(buf)
        if colorspace not in ("Gray", "YCbCr", "RGB"):
            return None
        grey = color == 0 or (color == -1 and colorspace == "Gray")
        out = "GRAY" if grey else ("BGR" if bgr else "RGB")
        target = _scratch(width * height * (1 if grey else 3)) if scratch else None
        array = sj.decode_jpeg(buf, out, buffer=target)
    except (ValueError, RuntimeError):
        return None
    return array[:, :, 0] if grey else array


def _flag(color: int, eighths: int, bgr: bool, exif_transpose: bool) -> int:
    """cv2.imdecode's flags for ``color`` at DCT scale ``eighths``/8."""
    if eighths < 8:
        flag = _REDUCED_GREY[eighths] if color == 0 else (
            _REDUCED_COLOUR[eighths] if bgr else _REDUCED_GREY[eighths] | cv2.IMREAD_COLOR_RGB)
    elif color == 1 and not bgr:
        flag = cv2.IMREAD_COLOR_RGB
    else:
        flag = _IMREAD[color]
    if not exif_transpose and color != -1:
        flag |= cv2.IMREAD_IGNORE_ORIENTATION
    return flag


def _imdecode(buf: np.ndarray, flag: int, jpeg: bool) -> Optional[np.ndarray]:
    """cv2.imdecode, and for a JPEG it refuses, the same bytes with the end marker libjpeg's
    file reader inserts at a premature end (so a truncated JPEG decodes as ``cv2.imread`` of
    the file does); None when neither decodes."""
    try:
        array = cv2.imdecode(buf, flag)
        if array is None and jpeg:
            array = cv2.imdecode(np.concatenate((buf, _JPEG_EOI)), flag)
    except cv2.error:  # OpenCV's own size limit, or a decoder that gave up with an exception
        return None
    return array


def decodes_as_stored(data: ImageBytes) -> bool:
    """Whether OpenCV decodes ``data`` as it is, without the end marker :func:`decode` gives a
    JPEG that lacks one (a checker's question: such a JPEG was cut short)."""
    try:
        return cv2.imdecode(_as_buffer(data), cv2.IMREAD_UNCHANGED) is not None
    except cv2.error:
        return False


def _undecodable(buf: np.ndarray) -> str:
    """Why ``buf`` did not decode, in one line, from what its first bytes are."""
    head = bytes(buf[:16])
    if not len(buf):
        return "the image is empty (0 bytes)"
    if head.startswith(_JPEG_SOI[:2]):
        return f"cannot decode its {len(buf)} bytes of JPEG: the data is damaged beyond repair"
    if head.startswith(_PNG_SIGNATURE):
        return f"cannot decode its {len(buf)} bytes of PNG: the data is damaged"
    return (f"its {len(buf)} bytes are not an image OpenCV can decode (first bytes "
            f"{head[:8].hex(' ')})")


# -- headers ------------------------------------------------------------------------------------
def image_size(data: ImageBytes) -> Optional[Tuple[int, int]]:
    """``(width, height)`` an image declares in its header, before any EXIF orientation: read
    from a JPEG's frame header or a PNG's IHDR directly, other formats through Pillow (which
    opens them lazily, without decoding). None when the header cannot be read (the decoder
    then says what is wrong)."""
    head = bytes(data[:24])
    if head.startswith(_JPEG_SOI):
        return _jpeg_frame_size(data)
    if head.startswith(_PNG_SIGNATURE) and head[12:16] == b"IHDR":
        width, height = struct.unpack(">II", head[16:24])
        return width, height
    try:
        with Image.open(io.BytesIO(bytes(data))) as img:
            return img.size
    except Exception:  # any header Pillow cannot read: OpenCV may still decode it
        return None


def _jpeg_frame_size(data: ImageBytes) -> Optional[Tuple[int, int]]:
    """The size in a JPEG's start-of-frame segment, found by walking the marker segments
    before it (each ``FF xx`` followed by a two-byte length)."""
    view = data.reshape(-1).data if isinstance(data, np.ndarray) else memoryview(data)
    pos, end = 2, len(view)
    while pos + 4 <= end:
        if view[pos] != 0xFF:
            return None
        marker = view[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        if marker in _SOF_MARKERS:
            if pos + 2 + _SOF.size > end:
                return None
            _, _, height, width = _SOF.unpack_from(view, pos + 2)
            return (width, height) if width and height else None
        if marker == 0xD9 or marker == 0xDA:  # end of image or start of scan: no frame found
            return None
        pos += 2 + (view[pos + 2] << 8 | view[pos + 3])
    return None


def jpeg_size(data: ImageBytes) -> Optional[Tuple[int, int]]:
    """``(width, height)`` a JPEG declares, without decoding it; None for other formats or an
    unreadable header. Lets a caller choose what to decode (a crop's DCT scale) first."""
    return _jpeg_frame_size(data) if bytes(data[:3]) == _JPEG_SOI else None


def _exif_orientation(data: ImageBytes) -> int:
    """The EXIF orientation (1-8) an image declares, 1 when it has none."""
    if bytes(data[:3]) == _JPEG_SOI and bytes(data[:_EXIF_SEARCH]).find(_EXIF_HEADER) == -1:
        return 1
    try:
        with Image.open(io.BytesIO(bytes(data))) as img:
            value = img.getexif().get(_ORIENTATION_TAG, 1)
    except Exception:  # unreadable EXIF data: as OpenCV, no orientation
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _orient(array: np.ndarray, orientation: int) -> np.ndarray:
    """Apply an EXIF orientation (2-8) as OpenCV's ``ApplyExifOrientation`` does."""
    if orientation in (5, 6, 7, 8):
        array = array.swapaxes(0, 1)
    if orientation in (2, 3, 6, 7):
        array = array[:, ::-1]
    if orientation in (3, 4, 7, 8):
        array = array[::-1]
    return np.ascontiguousarray(array)


def _check_pixels(width: int, height: int, max_pixels: int = DEFAULT_MAX_PIXELS,
                 name: Optional[str] = None) -> None:
    """The decompression-bomb guard: ``ImageError`` for an empty size or one above
    ``max_pixels`` (checked from the header, before any pixel is allocated)."""
    if width <= 0 or height <= 0:
        raise ImageError(f"image declares an empty size {width}x{height}", path=name)
    if width * height > max_pixels:
        raise ImageError(f"image declares {width}x{height} = {width * height} pixels, above the "
                         f"limit of {max_pixels} (decompression-bomb guard; raise max_pixels if "
                         "the image is genuine)", path=name)


def dct_eighths(width: int, height: int, min_side: int) -> int:
    """The DCT scale ``m`` (decode at ``m/8``, one of ``_POWER_OF_TWO_SCALES``) for a ``width x
    height`` JPEG: the smallest whose image still covers the one scaled to shorter side
    ``min_side`` (``m/8 >= ceil(side * min_side / short) / side`` on both sides), 8 when none
    does or ``min_side`` is 0."""
    short = min(width, height)
    if min_side <= 0 or min_side >= short:
        return 8
    need_w = -(-width * min_side // short)
    need_h = -(-height * min_side // short)
    for m in _POWER_OF_TWO_SCALES[:-1]:
        if m * width >= 8 * need_w and m * height >= 8 * need_h:
            return m
    return 8


# -- other facts about encoded images -----------------------------------------------------------
_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def _describe_error(exc: BaseException) -> str:
    """One line for a codec's exception, without the in-memory buffer's ``repr`` some of
    Pillow's messages carry (``<_io.BytesIO object at 0x...>``; the file is named by the
    caller)."""
    text = _OBJECT_REPR.sub("the image", str(exc)).strip() or type(exc).__name__
    if type(exc).__name__ not in text:
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())[:200]


def has_alpha(data: ImageBytes) -> bool:
    """True when encoded image bytes declare transparency (a PNG with an alpha channel or a
    tRNS chunk, a GIF, a WebP with alpha), read from the first bytes only: what packing as JPEG
    drops."""
    head = bytes(data[:4096])
    if head.startswith(_PNG_SIGNATURE) and len(head) > 25:
        return head[25] in (4, 6) or b"tRNS" in head.split(b"IDAT", 1)[0]
    if head.startswith((b"GIF87a", b"GIF89a")):
        return b"\x21\xf9\x04" in head  # a graphic control extension: transparency possible
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return head[12:16] == b"VP8L" or (head[12:16] == b"VP8X" and bool(head[20] & 0x10))
    return False
