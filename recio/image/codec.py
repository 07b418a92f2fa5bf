"""The one image codec: ``decode`` image bytes to pixels, as MXNet (OpenCV) does; its other
half, ``encode``, is ``recio.image.encoding``.

Every reader of image records decodes through :func:`decode` (``unpack_img``, ``recio.mx``,
``ImageRecordIter``, the torch datasets, ``recio verify --images``) and im2rec through
``recio.image.transform.render_image``, which adds its crop and resize; every writer encodes
through ``recio.image.encoding.encode``. So one set of rules holds everywhere:

* **Pixels as MXNet gives them.** MXNet decodes with OpenCV (``cv2.imdecode``), and so do the
  arrays recio returns, exactly, for the flags ``color`` 1 (colour), 0 (greyscale) and -1 (as
  stored). OpenCV's greyscale is not Pillow's ``convert("L")``: a JPEG is decoded by libjpeg
  straight to its luma channel; a PNG goes through libpng's RGB-to-grey (weights 0.299/0.587 in
  15-bit fixed point, truncated, in linear light when the file declares a gamma); other formats
  use OpenCV's ``cvtColor`` weights. CMYK JPEGs use OpenCV's CMYK formulas; 16-bit samples keep
  their high byte (the greyscale of 16-bit colour is computed on 16 bits, ``recio.image.png16``).
* **Backends.** JPEGs are decoded by simplejpeg (libjpeg-turbo, releasing the GIL; a core
  dependency, looked up so that a platform without it falls back), everything else by Pillow;
  both give the same pixels. ``decoder="pillow"`` or ``"simplejpeg"`` forces one.
* **DCT-scaled decoding.** Given ``min_side``, a JPEG is decoded at 1/2, 1/4 or 1/8 of its size
  in the DCT domain when the result still covers the image scaled so that its shorter side is
  ``min_side`` (much cheaper for photos about to be shrunk). Both backends pick the same scale.
* **Decompression bombs.** The size an image declares is checked against ``max_pixels`` before
  any pixel is allocated, and every decode failure is an :class:`~recio.errors.ImageError`.

OpenCV's colour rules that the pixels follow (greyscale weights, PNG gamma, CMYK, 16-bit
samples) are ``recio.image.opencv_colour``; im2rec's crop and resize are
``recio.image.transform``.
"""
from __future__ import annotations

import io
import re
import struct
import threading
import zlib
from typing import Any, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image

from recio.errors import ImageError
from recio.image.opencv_colour import opencv_pixels, png16_pixels, png_gamma
from recio.image.png16 import png16_layout
from recio.optional import optional, require

#: Pillow's own default decompression-bomb limit (about 89.5 megapixels, a 9459 x 9459 image)
DEFAULT_MAX_PIXELS = 89_478_485
#: colour flags, as OpenCV's and MXNet's: 1 colour (alpha dropped), 0 greyscale, -1 as stored
COLOR_MODES = (-1, 0, 1)
DECODERS = ("auto", "pillow", "simplejpeg")
_JPEG_SOI = b"\xff\xd8\xff"
#: a JPEG's EXIF data is an APP1 segment starting with this, within its first 64 KiB
_EXIF_HEADER = b"Exif\x00\x00"
_EXIF_SEARCH = 65_560
_ORIENTATION_TAG = 0x0112

#: the DCT scales (in eighths) ``decode`` may use: the ones Pillow's ``draft()`` has too, so
#: both backends give the same pixels
POWER_OF_TWO_SCALES = (1, 2, 4, 8)

#: what Pillow and the decoders raise on bad data; all of it becomes ImageError
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, IndexError, KeyError, TypeError,
                  ZeroDivisionError, struct.error, zlib.error, MemoryError,
                  Image.DecompressionBombError)
#: what decode accepts: the encoded image (a NumPy uint8 array as MXNet's imdecode takes one)
ImageBytes = Union[bytes, bytearray, memoryview, np.ndarray]


# -- backends -----------------------------------------------------------------------------------
def check_decoder(decoder: str) -> None:
    """Validate a ``decoder`` choice: ``ValueError`` for an unknown name, ``ImportError`` (what
    to install) for ``"simplejpeg"`` without simplejpeg."""
    if decoder not in DECODERS:
        raise ValueError(f"decoder must be 'auto', 'pillow' or 'simplejpeg', got {decoder!r}")
    if decoder == "simplejpeg":
        require("simplejpeg", feature="decoder='simplejpeg'")


def have_fast_decoder() -> bool:
    """True when the optional simplejpeg fast JPEG decoder (``recio[fast]``) is installed."""
    return optional("simplejpeg") is not None


def _jpeg_backend(decoder: str, data: Any, exif_transpose: bool) -> Any:
    """simplejpeg when it should decode ``data``, else None (Pillow, which also reads the EXIF
    orientation when it is to be applied and the file may have one)."""
    if decoder == "pillow" or bytes(data[:3]) != _JPEG_SOI:
        return None
    if exif_transpose and bytes(data[:_EXIF_SEARCH]).find(_EXIF_HEADER) != -1:
        return None
    return optional("simplejpeg")


# -- decode -------------------------------------------------------------------------------------
def decode(data: ImageBytes, color: int = 1, *, bgr: bool = False, min_side: int = 0,
           max_pixels: int = DEFAULT_MAX_PIXELS, exif_transpose: bool = False,
           decoder: str = "auto", name: Optional[str] = None,
           scratch: bool = False) -> np.ndarray:
    """Decode image bytes to a uint8 array with OpenCV's (and so MXNet's) pixels.

    ``color`` as OpenCV's imdecode flag: 1 -> ``(H, W, 3)`` RGB (``bgr=True``: BGR, as OpenCV),
    0 -> ``(H, W)`` greyscale, -1 -> as stored: ``(H, W)`` for grey (uint16 for a 16-bit grey
    PNG), 3 channels for colour, 4 with alpha (also a grey PNG with alpha or a palette with
    transparency, as OpenCV expands them). ``min_side > 0`` lets a JPEG decode smaller (see the
    module docstring). ``exif_transpose`` applies the EXIF orientation (as OpenCV 4's imdecode
    does for flags 0 and 1; MXNet's own C++ decoder does not). An image declaring more than
    ``max_pixels`` pixels, or that cannot be decoded, raises :class:`ImageError` (``name`` is
    its path in the message).

    ``scratch=True`` lets the result live in a buffer of the calling thread that its next
    ``scratch`` decode overwrites (JPEGs through simplejpeg): for callers that copy the pixels
    they keep (a crop into a batch) before decoding again. A fresh array per image costs a
    quarter of a small JPEG's decode (its pages are zero-filled by the kernel each time).
    """
    return decode_scaled(data, color, bgr=bgr, min_side=min_side, max_pixels=max_pixels,
                         exif_transpose=exif_transpose, decoder=decoder, name=name,
                         scratch=scratch)[0]


def decode_scaled(data: ImageBytes, color: int = 1, *, bgr: bool = False, min_side: int = 0,
                  max_pixels: int = DEFAULT_MAX_PIXELS, exif_transpose: bool = False,
                  decoder: str = "auto", name: Optional[str] = None,
                  scales: Sequence[int] = POWER_OF_TWO_SCALES, scratch: bool = False
                  ) -> Tuple[np.ndarray, Tuple[int, int], float]:
    """:func:`decode`, also returning the image's own ``(width, height)`` (after the EXIF
    orientation) and the DCT scale it was decoded at (1.0, 0.5, ...), for callers that map
    source coordinates onto the pixels. ``scales``: the eighths the simplejpeg backend may use
    (Pillow's are always 1/8, 1/4, 1/2, 1)."""
    if color not in COLOR_MODES:
        raise ValueError(f"color must be 1 (colour), 0 (greyscale) or -1 (as stored), got {color}")
    if decoder not in DECODERS:
        check_decoder(decoder)
    if isinstance(data, np.ndarray):
        data = np.ascontiguousarray(data, dtype=np.uint8).tobytes()
    try:
        result = None
        sj = _jpeg_backend(decoder, data, exif_transpose)
        if sj is not None:
            result = _decode_simplejpeg(sj, data, color, bgr, min_side, scales, max_pixels, name,
                                        scratch)
        if result is None and decoder != "pillow":
            result = _decode_png_opencv(data, color, bgr, max_pixels, exif_transpose, name)
        if result is None:
            result = _decode_pillow(data, color, bgr, min_side, max_pixels, exif_transpose, name)
        return result
    except ImageError:
        raise
    except Image.UnidentifiedImageError:
        raise ImageError(f"its {len(data)} image bytes are not in a format Pillow can read",
                         path=name) from None
    except _DECODE_ERRORS as exc:
        raise ImageError(f"cannot decode image: {describe_error(exc)}", path=name) from None


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def describe_error(exc: BaseException) -> str:
    """One line for a decoder's exception, without the in-memory buffer's ``repr`` some of
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
    if head.startswith(b"\x89PNG\r\n\x1a\n") and len(head) > 25:
        return head[25] in (4, 6) or b"tRNS" in head.split(b"IDAT", 1)[0]
    if head.startswith((b"GIF87a", b"GIF89a")):
        return b"\x21\xf9\x04" in head  # a graphic control extension: transparency possible
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return head[12:16] == b"VP8L" or (head[12:16] == b"VP8X" and bool(head[20] & 0x10))
    return False


def check_pixels(width: int, height: int, max_pixels: int = DEFAULT_MAX_PIXELS,
                 name: Optional[str] = None) -> None:
    """The decompression-bomb guard: ``ImageError`` for an empty size or one above
    ``max_pixels`` (checked from the header, before any pixel is allocated)."""
    if width <= 0 or height <= 0:
        raise ImageError(f"image declares an empty size {width}x{height}", path=name)
    if width * height > max_pixels:
        raise ImageError(f"image declares {width}x{height} = {width * height} pixels, above the "
                         f"limit of {max_pixels} (decompression-bomb guard; raise max_pixels if "
                         "the image is genuine)", path=name)


def jpeg_size(data: ImageBytes) -> Optional[Tuple[int, int]]:
    """``(width, height)`` a JPEG declares, read from its header (by simplejpeg, without
    decoding); None for other formats, an unreadable header, or without simplejpeg. Lets a
    caller choose what to decode (a crop's DCT scale) before decoding."""
    sj = optional("simplejpeg")
    if sj is None or bytes(data[:3]) != _JPEG_SOI:
        return None
    try:
        height, width = sj.decode_jpeg_header(data)[:2]
    except (ValueError, RuntimeError):
        return None  # decode() says what is wrong with it
    return (width, height) if width > 0 and height > 0 else None


def dct_eighths(width: int, height: int, min_side: int,
                scales: Sequence[int] = POWER_OF_TWO_SCALES) -> int:
    """The DCT scale ``m`` (decode at ``m/8``) for a ``width x height`` JPEG: the smallest of
    ``scales`` whose image still covers the one scaled to shorter side ``min_side`` (as Pillow's
    ``draft()`` decides: ``m/8 >= ceil(side * min_side / short) / side`` on both sides), 8 when
    none does or ``min_side`` is 0.

    A scale whose output size equals that of ``(m-1)/8`` is passed over: libjpeg-turbo (through
    simplejpeg) would pick the smaller scale for it, and the backends would disagree.
    """
    short = min(width, height)
    if min_side <= 0 or min_side >= short:
        return 8
    need_w = -(-width * min_side // short)
    need_h = -(-height * min_side // short)
    for m in sorted(scales):
        if m >= 8:
            break
        if m * width < 8 * need_w or m * height < 8 * need_h:
            continue
        if m == 1 or (-(-width * (m - 1) // 8) < -(-width * m // 8)
                      or -(-height * (m - 1) // 8) < -(-height * m // 8)):
            return m
    return 8


def _decode_simplejpeg(sj: Any, data: Any, color: int, bgr: bool, min_side: int,
                       scales: Sequence[int], max_pixels: int, name: Optional[str],
                       scratch: bool = False
                       ) -> Optional[Tuple[np.ndarray, Tuple[int, int], float]]:
    """libjpeg-turbo through simplejpeg; None for CMYK/YCCK JPEGs (Pillow applies OpenCV's CMYK
    formulas to them)."""
    height, width, colorspace, _ = sj.decode_jpeg_header(data)
    if colorspace not in ("Gray", "YCbCr", "RGB"):
        return None
    check_pixels(width, height, max_pixels, name)
    grey = color == 0 or (color == -1 and colorspace == "Gray")
    out = "GRAY" if grey else ("BGR" if bgr else "RGB")
    m = dct_eighths(width, height, min_side, scales)
    buffer = _scratch(width * height * (1 if grey else 3)) if scratch else None
    if m == 8:
        array = sj.decode_jpeg(data, out, buffer=buffer)
    else:
        array = sj.decode_jpeg(data, out, min_width=-(-width * m // 8),
                               min_height=-(-height * m // 8), buffer=buffer)
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    # libjpeg scales by exactly m/8, rounding the size up; trust the size if it disagrees
    scale = m / 8 if array.shape[1] == -(-width * m // 8) else array.shape[1] / width
    return array, (width, height), scale


_SCRATCH = threading.local()


def _scratch(nbytes: int) -> np.ndarray:
    """This thread's decode buffer, at least ``nbytes`` long (grown by half again when short)."""
    buf = getattr(_SCRATCH, "buffer", None)
    if buf is None or buf.size < nbytes:
        buf = _SCRATCH.buffer = np.empty(max(nbytes, int(1.5 * (0 if buf is None else buf.size))),
                                         np.uint8)
    return buf


_PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _has_iccp(data: Any) -> bool:
    """Whether a PNG has an iCCP chunk (before its image data, where the chunk must be)."""
    raw = bytes(data[:1 << 20]) if not isinstance(data, bytes) else data
    end = raw.find(b"IDAT")
    return raw.find(b"iCCP", 0, end if end != -1 else len(raw)) != -1


def _decode_png_opencv(data: Any, color: int, bgr: bool, max_pixels: int, exif_transpose: bool,
                       name: Optional[str]
                       ) -> Optional[Tuple[np.ndarray, Tuple[int, int], float]]:
    """A PNG through OpenCV's own ``imdecode`` when OpenCV is installed (``recio[fast]``), for
    every ``color`` flag: its pixels by definition (the Pillow path reproduces them, and
    tests/test_image_codec.py holds both to MXNet's arrays), decoded without the GIL and with
    libpng's own greyscale, so faster than Pillow plus recio's conversions (figures:
    benchmarks/bench_png.py). None when OpenCV is missing, for other formats, for a PNG whose
    EXIF orientation is to be applied (Pillow reads it), or when OpenCV cannot decode the file
    (Pillow then says why)."""
    head = bytes(data[:24])
    if not head.startswith(_PNG_SIGNATURE) or head[12:16] != b"IHDR":
        return None
    width, height = struct.unpack(">II", head[16:24])
    check_pixels(width, height, max_pixels, name)  # before anything is imported or allocated
    cv2 = optional("cv2")
    if cv2 is None or (exif_transpose and bytes(data).find(b"eXIf") != -1):
        return None
    if color == 0 and bytes(data[25:26]) in (b"\x02", b"\x03", b"\x06") and _has_iccp(data):
        return None  # libpng's greyscale then depends on the profile, which OpenCV >= 5 ignores
    rgb_flag = getattr(cv2, "IMREAD_COLOR_RGB", None)  # OpenCV >= 4.11 swaps while decoding
    if color == 1:
        flag = cv2.IMREAD_COLOR if bgr or rgb_flag is None else rgb_flag
    else:
        flag = cv2.IMREAD_GRAYSCALE if color == 0 else cv2.IMREAD_UNCHANGED
    array = cv2.imdecode(np.frombuffer(data, np.uint8), flag | cv2.IMREAD_IGNORE_ORIENTATION)
    if array is None or array.shape[:2] != (height, width):
        return None
    if not bgr and array.ndim == 3 and (color == -1 or flag == cv2.IMREAD_COLOR):
        swap = cv2.COLOR_BGR2RGB if array.shape[2] == 3 else cv2.COLOR_BGRA2RGBA
        array = cv2.cvtColor(array, swap, dst=array)  # in place: no second image in memory
    return array, (width, height), 1.0


def _decode_pillow(data: Any, color: int, bgr: bool, min_side: int, max_pixels: int,
                   exif_transpose: bool, name: Optional[str]
                   ) -> Tuple[np.ndarray, Tuple[int, int], float]:
    """Any format Pillow reads; JPEGs through ``draft()`` (libjpeg's greyscale output, and the
    DCT scale)."""
    # (Pillow may warn about a large image here; check_pixels rejects it just below)
    img = Image.open(io.BytesIO(data))
    width, height = img.size
    check_pixels(width, height, max_pixels, name)
    scale = 1.0
    if img.format in ("JPEG", "MPO"):
        m = dct_eighths(width, height, min_side)
        s = 8 // m
        # "L" makes libjpeg output luma itself (OpenCV's IMREAD_GRAYSCALE), not RGB -> grey
        img.draft("L" if color == 0 else None, (width // s, height // s) if s > 1 else None)
        img.load()
        scale = 1 / s if img.size == (-(-width // s), -(-height // s)) else img.width / width
    orientation = img.getexif().get(_ORIENTATION_TAG, 1) if exif_transpose else 1
    array = None
    if img.format == "PNG" and color != 1:
        layout = png16_layout(data)
        if layout is not None:  # 16-bit colour: Pillow would keep only the high bytes
            array = png16_pixels(bytes(data), layout, color, png_gamma(img.info))
    if array is None:
        array = opencv_pixels(img, color)
    if bgr and array.ndim == 3:
        array = array[:, :, [2, 1, 0, 3][:array.shape[2]]]
    if orientation in (5, 6, 7, 8):
        width, height = height, width
    return np.ascontiguousarray(_orient(array, orientation)), (width, height), scale


def _orient(array: np.ndarray, orientation: int) -> np.ndarray:
    """Apply an EXIF orientation (2-8) as OpenCV's ``ApplyExifOrientation`` does."""
    if orientation in (5, 6, 7, 8):
        array = array.swapaxes(0, 1)
    if orientation in (2, 3, 6, 7):
        array = array[:, ::-1]
    if orientation in (3, 4, 7, 8):
        array = array[::-1]
    return array


__all__ = ["has_alpha", "DEFAULT_MAX_PIXELS", "COLOR_MODES", "DECODERS", "POWER_OF_TWO_SCALES",
           "ImageBytes", "decode", "decode_scaled", "check_decoder", "check_pixels", "dct_eighths",
           "have_fast_decoder", "jpeg_size", "describe_error"]
