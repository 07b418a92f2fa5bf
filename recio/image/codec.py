"""The one image codec: ``decode`` image bytes to pixels, ``encode`` pixels to image bytes, as
MXNet (OpenCV) does.

Every reader of image records decodes through :func:`decode` (``unpack_img``, ``recio.mx``,
``ImageRecordIter``, the torch datasets, ``recio verify --images``) and im2rec through
:func:`render_image`, which adds its crop and resize; every writer encodes through
:func:`encode`. So one set of rules holds everywhere:

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
* **Bytes as MXNet's ``pack_img``** (``cv2.imencode``), by default: JPEGs through OpenCV when
  it is installed, else Pillow (libjpeg-turbo with the same settings: the same bytes); PNGs
  through OpenCV, else ``recio.image.pngenc`` (libpng's and zlib's choices, repeated).
  ``quality`` is the JPEG quality (clamped to 0-100) for ``.jpg`` and the PNG compression level
  (clamped to 0-9, OpenCV's ``IMWRITE_PNG_COMPRESSION``) for ``.png``. ``encoder="fast"``
  encodes JPEGs with simplejpeg instead (see :func:`encode`).

im2rec (:func:`transform_image`) has two modes (``ImageOptions.resize_mode``):

* ``"mxnet"`` (the default): what MXNet's ``tools/im2rec.py`` does, pixel for pixel:
  ``cv2.imread`` (full size; the EXIF orientation applied for colour and greyscale, as OpenCV
  does), the centre square of side ``min(h, w)`` with ``center_crop``, and with ``resize=S``
  ``cv2.resize`` (bilinear, not antialiased) to shorter side ``S`` and longer side
  ``long * S // short`` (integer floor): OpenCV itself when it is installed, else
  ``recio.image.linear``'s bit-exact copy. With the exact encoder the bytes are MXNet's.
* ``"antialias"``: JPEGs decoded at a reduced DCT scale when the target allows, then an
  antialiased resize, closer to an exact downscale and faster on large photos (measurements in
  ``benchmarks/README.md``); pixels differ from MXNet's. The resize is the first of
  ``RESIZERS`` installed: ``cv2.resize`` (``recio[fast]``), cykooz.resizer's Catmull-Rom (a core
  dependency where it has wheels; Pillow's bicubic kernel in SIMD), else Pillow's bicubic.

The environment variable ``RECIO_RESIZER`` (``auto``, ``opencv``, ``cykooz``, ``pillow``)
chooses the resizer; in the "mxnet" mode anything but OpenCV means recio's copy of OpenCV's.
"""
from __future__ import annotations

import io
import math
import os
import re
import struct
import threading
import warnings
import zlib
from dataclasses import dataclass
from typing import Any, Dict, Optional, Sequence, Tuple, Union

import numpy as np
from PIL import Image

from recio.errors import ImageError
from recio.image.linear import resize_linear
from recio.image.png16 import png16_layout, read_png16
from recio.image.pngenc import encode_png
from recio.optional import optional, require

#: Pillow's own default decompression-bomb limit (about 89.5 megapixels, a 9459 x 9459 image)
DEFAULT_MAX_PIXELS = 89_478_485
#: colour flags, as OpenCV's and MXNet's: 1 colour (alpha dropped), 0 greyscale, -1 as stored
COLOR_MODES = (-1, 0, 1)
ENCODINGS = (".jpg", ".png")
DECODERS = ("auto", "pillow", "simplejpeg")
#: JPEG encoders: "exact" (MXNet's bytes: OpenCV's imencode, else Pillow's save) and "fast"
#: (simplejpeg; see ``encode``)
ENCODERS = ("exact", "fast")
#: how im2rec resizes: "mxnet" (OpenCV's bilinear from the full-size image, as MXNet's
#: tools/im2rec.py: its bytes) and "antialias" (DCT-scaled decode, antialiased bicubic)
RESIZE_MODES = ("mxnet", "antialias")
_JPEG_SOI = b"\xff\xd8\xff"
#: a JPEG's EXIF data is an APP1 segment starting with this, within its first 64 KiB
_EXIF_HEADER = b"Exif\x00\x00"
_EXIF_SEARCH = 65_560
_ORIENTATION_TAG = 0x0112

#: the DCT scales (in eighths) ``decode`` may use: the ones Pillow's ``draft()`` has too, so
#: both backends give the same pixels
POWER_OF_TWO_SCALES = (1, 2, 4, 8)
#: the scales im2rec's simplejpeg decode may use before a Pillow resize: every libjpeg-turbo
#: scale but 7/8, which decodes slower than 8/8 and saves too little of the resize to pay
_SCALES = (1, 2, 3, 4, 5, 6, 8)

#: im2rec's antialiased resampling filter (chosen against an exact Lanczos downscale; Pillow's
#: bilinear is too soft, see benchmarks/README.md)
RESAMPLE = Image.Resampling.BICUBIC
#: shrink by an integer factor first when the ratio is at least this (PNG and other non-JPEG
#: sources; JPEGs are already reduced in the DCT domain); a negligible loss in quality
REDUCING_GAP = 3.0
#: the OpenCV resize of the DCT-reduced image (remaining factor below 2); with OpenCV the
#: simplejpeg decode keeps to the SIMD scales 1/8, 2/8, 4/8, 8/8, which resize better
CV2_INTERPOLATION = "INTER_CUBIC"
#: from this remaining factor on (PNG and other non-JPEG sources) OpenCV's INTER_AREA first
#: averages blocks of the integer part of the factor: a plain cubic would alias
CV2_AREA_FACTOR = 2.0
_CV2_SCALES = POWER_OF_TWO_SCALES
#: the resizers im2rec can use, fastest first: OpenCV (the ``fast`` extra), cykooz.resizer (a
#: core dependency where it has wheels: SIMD convolution, the same Catmull-Rom kernel as Pillow's
#: antialiased bicubic), Pillow (always there)
RESIZERS = ("opencv", "cykooz", "pillow")
#: the module each resizer needs (cykooz.resizer before 4.0, the last for Python 3.9, is
#: imported as ``cykooz.resizer``)
_RESIZER_MODULES = {"opencv": ("cv2",), "cykooz": ("cykooz_resizer", "cykooz.resizer")}
#: the environment variable choosing the resizer: "auto" (the first of RESIZERS installed) or
#: one of RESIZERS (an error if it is not installed)
RESIZER_ENV = "RECIO_RESIZER"
#: module-level switch: None = decide once from RECIO_RESIZER and what imports; a name from
#: RESIZERS forces that resizer (tests set it; so do im2rec's worker processes, to the choice of
#: the process that started them)
RESIZER: Optional[str] = None

#: what Pillow and the decoders raise on bad data; all of it becomes ImageError
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, IndexError, KeyError, TypeError,
                  ZeroDivisionError, struct.error, zlib.error, MemoryError,
                  Image.DecompressionBombError)

# -- the colour rules of OpenCV's decoders ------------------------------------------------------
#: OpenCV's cvtColor RGB -> grey, 14-bit fixed point, rounded (BMP, TIFF, WebP, CMYK JPEGs)
_CV_WEIGHTS = (4899, 9617, 1868)
#: libpng's png_set_rgb_to_gray(0.299, 0.587) as OpenCV calls it: 15-bit fixed point, truncated
_PNG_WEIGHTS = (9797, 19234, 3737)
#: libpng's sRGB gamma (a file with an sRGB chunk), in its fixed point (x 100000)
_PNG_SRGB_GAMMA = 45455
_PNG_UNITY = 100_000
#: libpng treats a gamma within 5% of 1 as linear (PNG_GAMMA_THRESHOLD_FIXED)
_PNG_GAMMA_THRESHOLD = 5_000
_SIXTEEN_BIT_MODES = ("I;16", "I;16L", "I;16B", "I;16N", "I")
#: libpng 1.6's png_sRGB_checks (png.c): the ICC profiles it takes for sRGB, as an sRGB chunk,
#: so their iCCP gives the file sRGB's gamma: (ICC profile ID, length, rendering intent,
#: adler32, crc32). Among them the HP/Microsoft "sRGB IEC61966-2.1" of countless PNGs.
_PNG_SRGB_PROFILES = (
    ("29f83ddeaff255ae7842fae4ca83390d", 3048, 0, 0x0A3FD9F6, 0x3B8772B9),
    ("c95bd637e95d8a3b0df38f99c1320389", 3052, 1, 0x4909E5E1, 0x427EBB21),
    ("fc66337837e2886bfd72e9838228f1b8", 60988, 0, 0xFD2144A1, 0x306FD8AE),
    ("34562abf994ccd066d2c5721d0d68c5d", 60960, 0, 0x209C35D2, 0xBBEF7812),
    ("00000000000000000000000000000000", 3024, 1, 0xA054D762, 0x5D5129CE),
    ("00000000000000000000000000000000", 3144, 0, 0xF784F3FB, 0x182EA552),
    ("00000000000000000000000000000000", 3144, 1, 0x0398F3FC, 0xF29E526D),
)

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
        raise ImageError(f"cannot decode image: {_describe(exc)}", path=name) from None


_OBJECT_REPR = re.compile(r"<[\w.]+ object at 0x[0-9a-fA-F]+>")


def _describe(exc: BaseException) -> str:
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
            array = _png16_pixels(bytes(data), layout, color, _png_gamma(img.info))
    if array is None:
        array = _opencv_pixels(img, color)
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


def _opencv_pixels(img: Image.Image, color: int) -> np.ndarray:
    """A decoded Pillow image as the array OpenCV's imdecode gives for flag ``color`` (RGB
    order)."""
    mode, is_png = img.mode, img.format == "PNG"
    if mode == "CMYK":
        return _cmyk(np.asarray(img), color)
    if mode in _SIXTEEN_BIT_MODES:
        deep = np.clip(np.asarray(img), 0, 0xFFFF).astype(np.uint16)
        if color == -1:
            return deep
        grey = (deep >> 8).astype(np.uint8)  # OpenCV keeps the high byte
        return grey if color == 0 else np.repeat(grey[:, :, None], 3, axis=2)
    if mode == "F":
        img = Image.fromarray(np.clip(np.asarray(img), 0, 255).astype(np.uint8))
    elif mode in ("P", "PA"):
        alpha = mode == "PA" or "transparency" in img.info
        img = img.convert("RGBA" if alpha and color == -1 else "RGB")
    elif mode == "LA":
        img = img.convert("RGBA" if color == -1 else "L")  # OpenCV: grey + alpha -> BGRA
    elif mode == "RGB" and color == -1 and "transparency" in img.info:
        img = img.convert("RGBA")  # a tRNS colour key becomes alpha, as libpng's tRNS_to_alpha
    elif mode not in ("L", "RGB", "RGBA"):
        img = img.convert("RGBA" if "A" in mode or "a" in mode else ("L" if mode == "1"
                                                                     else "RGB"))
    array = np.asarray(img)
    if color == 1:
        if array.ndim == 2:
            return np.repeat(array[:, :, None], 3, axis=2)
        return array[:, :, :3]
    if color == 0 and array.ndim == 3:
        if is_png:
            return _png_grey(array, _png_gamma(img.info))
        return cv_grey(array)
    return array


def cv_grey(rgb: np.ndarray) -> np.ndarray:
    """``cvtColor(rgb, COLOR_RGB2GRAY)`` of a uint8 ``(H, W, 3+)`` image as MXNet's OpenCV 3.4.2
    computes it (14-bit weights 0.299, 0.587, 0.114 on channels 0, 1, 2, rounded): ``(H, W)``."""
    return _weighted_grey(rgb, _CV_WEIGHTS, 14, rounding=True)


def _weighted_grey(rgb: np.ndarray, weights: Tuple[int, int, int], bits: int,
                   rounding: bool) -> np.ndarray:
    total = rgb[:, :, 0].astype(np.uint32)
    total *= weights[0]
    for k in (1, 2):  # in place: no temporaries beyond one channel
        part = rgb[:, :, k].astype(np.uint32)
        part *= weights[k]
        total += part
    if rounding:
        total += 1 << (bits - 1)
    total >>= bits
    return total.astype(np.uint8)


def _png_gamma(info: dict) -> int:
    """The file gamma libpng works with (x 100000): sRGB's for an sRGB chunk or an iCCP chunk
    holding one of libpng's known sRGB profiles (either overrides a gAMA chunk), else the gAMA
    chunk's when valid, else 1.0."""
    if "srgb" in info or _is_known_srgb_profile(info.get("icc_profile")):
        return _PNG_SRGB_GAMMA
    gamma = info.get("gamma")
    if gamma is None:
        return _PNG_UNITY
    fixed = int(round(float(gamma) * _PNG_UNITY))
    return fixed if 16 <= fixed <= 625_000_000 else _PNG_UNITY


def _is_known_srgb_profile(profile: Optional[bytes]) -> bool:
    """libpng 1.6's ``png_compare_ICC_profile_with_sRGB`` (checks level 2, its default): the
    first entry whose profile ID matches decides, when its length and intent match too, by
    adler32 and crc32 (an edited known profile is not taken)."""
    if not profile or len(profile) < 100:
        return False
    ident = bytes(profile[84:100]).hex()
    length, intent = struct.unpack(">I", profile[:4])[0], struct.unpack(">I", profile[64:68])[0]
    for md5, known_length, known_intent, adler, crc in _PNG_SRGB_PROFILES:
        if ident != md5 or length != known_length or intent != known_intent:
            continue
        body = bytes(profile[:length])
        return zlib.adler32(body) == adler and zlib.crc32(body) == crc
    return False


def _png_grey(rgb: np.ndarray, gamma: int) -> np.ndarray:
    """libpng's ``png_do_rgb_to_gray`` for 8-bit samples (grey pixels pass unchanged).

    Without a significant file gamma: the weighted sum, truncated. With one, libpng converts
    to linear light through 8-bit tables, sums with rounding and converts back."""
    if abs(gamma - _PNG_UNITY) <= _PNG_GAMMA_THRESHOLD:
        return _weighted_grey(rgb, _PNG_WEIGHTS, 15, rounding=False)
    to_linear = _png_gamma_table(_png_reciprocal(gamma))
    screen = _png_reciprocal(gamma)  # libpng assumes the display matches the file
    from_linear = _png_gamma_table(_png_reciprocal(screen))
    linear = to_linear[rgb[:, :, :3]]
    grey = from_linear[_weighted_grey(linear, _PNG_WEIGHTS, 15, rounding=True)]
    r, g, b = rgb[:, :, 0], rgb[:, :, 1], rgb[:, :, 2]
    return np.where((r == g) & (g == b), r, grey).astype(np.uint8)


def _png16_pixels(data: bytes, color_type: int, color: int, gamma: int) -> Optional[np.ndarray]:
    """OpenCV's pixels of a 16-bit PNG with colour or alpha for flags -1 and 0 (RGB order): the
    uint16 samples (alpha from a tRNS colour key, grey + alpha as RGBA), or libpng's greyscale
    on 16 bits (rounded) kept to its high byte. None (use the 8-bit samples) for the
    greyscale of a file with a gamma: libpng's 16-bit gamma tables are not reproduced."""
    samples, key = read_png16(data)
    if color == -1:
        if color_type == 4:
            grey, alpha = samples[:, :, 0], samples[:, :, 1]
            return np.stack([grey, grey, grey, alpha], axis=2)
        if key is not None:
            alpha = np.where((samples == np.asarray(key, np.uint16)).all(axis=2), 0, 0xFFFF)
            return np.concatenate([samples, alpha[:, :, None].astype(np.uint16)], axis=2)
        return samples
    if color_type == 4:
        return (samples[:, :, 0] >> 8).astype(np.uint8)
    if abs(gamma - _PNG_UNITY) > _PNG_GAMMA_THRESHOLD:
        return None
    r, g, b = (samples[:, :, i].astype(np.uint64) for i in range(3))
    grey = (r * _PNG_WEIGHTS[0] + g * _PNG_WEIGHTS[1] + b * _PNG_WEIGHTS[2] + (1 << 14)) >> 15
    grey = np.where((r == g) & (g == b), r, grey)
    return (grey >> 8).astype(np.uint8)


def _png_reciprocal(fixed: int) -> int:
    return int(math.floor(1e10 / fixed + 0.5))


def _png_gamma_table(fixed: int) -> np.ndarray:
    """libpng's ``png_build_8bit_table``: ``floor(255 * (i/255) ** gamma + 0.5)``."""
    if abs(fixed - _PNG_UNITY) <= _PNG_GAMMA_THRESHOLD:
        return np.arange(256, dtype=np.uint8)
    exponent = fixed * 1e-5
    table = [0] + [int(math.floor(255 * math.pow(i / 255.0, exponent) + 0.5))
                   for i in range(1, 255)] + [255]
    return np.asarray(table, dtype=np.uint8)


def _cmyk(cmyk: np.ndarray, color: int) -> np.ndarray:
    """OpenCV's CMYK (Adobe, stored inverted) to RGB or grey; Pillow gives the inverted values."""
    raw = 255 - cmyk.astype(np.int32)
    k = raw[:, :, 3]
    c, m, y = (k - (((255 - raw[:, :, i]) * k) >> 8) for i in range(3))
    if color == 0:
        total = c * _CV_WEIGHTS[0] + m * _CV_WEIGHTS[1] + y * _CV_WEIGHTS[2] + (1 << 13)
        return (total >> 14).astype(np.uint8)
    return np.stack([c, m, y], axis=2).astype(np.uint8)


# -- encode -------------------------------------------------------------------------------------
def check_encoder(encoder: str) -> None:
    """Validate an ``encoder`` choice (``ValueError`` naming the choices)."""
    if encoder not in ENCODERS:
        raise ValueError(f"encoder must be 'exact' or 'fast', got {encoder!r}")


def encode(image: Union[np.ndarray, Image.Image], encoding: str = ".jpg", quality: int = 95, *,
           bgr: bool = False, encoder: str = "exact") -> bytes:
    """Encode pixels to the bytes MXNet's ``pack_img`` writes (``cv2.imencode``): ``.jpg`` at
    JPEG ``quality`` (clamped to 0-100), ``.png`` at compression level ``quality`` (clamped to
    0-9, OpenCV's ``IMWRITE_PNG_COMPRESSION``: the default 95 means 9); with OpenCV installed,
    any other format it writes (``.bmp``, ``.tif``, ``.webp``, ...) with its defaults, as
    MXNet's ``pack_img`` passes no parameter for them.

    ``image``: a uint8 array ``(H, W)``, ``(H, W, 1)``, ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA
    (``bgr=True``: BGR/BGRA, as OpenCV), a uint16 one (PNG keeps 16 bits; JPEG saturates to
    255, as OpenCV), or a Pillow image. JPEG has no alpha: a fourth channel is dropped, as
    OpenCV does.

    **Exact bytes.** JPEGs are libjpeg's with its accurate integer DCT, through OpenCV when it
    is installed (MXNet's own call) or else Pillow (the same library and settings: the same
    bytes); PNGs through OpenCV, or else :func:`recio.image.pngenc.encode_png` (libpng's
    choices, repeated). ``encoder="fast"`` encodes JPEGs with simplejpeg instead: libjpeg-turbo's
    TurboJPEG API, which takes the fast integer DCT below quality 96 (a simplejpeg call cannot
    ask for the accurate one): a little faster, bytes that differ from MXNet's, and a lower
    PSNR (measured by ``benchmarks/bench_im2rec.py``; see ``benchmarks/README.md``).
    """
    fmt = encoding.lower()
    check_encoder(encoder)
    png = fmt == ".png"
    if fmt not in (".jpg", ".jpeg", ".png") and (
            not re.fullmatch(r"\.[a-z0-9]{1,5}", fmt) or optional("cv2") is None):
        raise ImageError(f"unsupported image format {encoding!r}: use '.jpg' or '.png' (other "
                         "formats OpenCV writes need OpenCV: pip install 'recio[fast]')")
    if isinstance(image, Image.Image):
        pixels, bgr = _pillow_pixels(image), False
    else:
        pixels = _checked_array(image)
    try:
        if png:
            return _encode_png(pixels, bgr, min(max(int(quality), 0), 9))
        if fmt not in (".jpg", ".jpeg"):  # as MXNet's pack_img: OpenCV's defaults
            return _encode_opencv(fmt, pixels, bgr, [])
        return _encode_jpeg(pixels, bgr, min(max(int(quality), 0), 100), encoder)
    except (ValueError, RuntimeError, OSError) as exc:
        raise ImageError(f"cannot encode image: {_describe(exc)}") from None


def _checked_array(image: np.ndarray) -> np.ndarray:
    """``image`` as a uint8 or uint16 array of a layout an encoder takes, else ImageError."""
    arr = np.asarray(image)
    if arr.ndim == 3 and arr.shape[2] == 1:
        arr = arr[:, :, 0]
    if arr.dtype not in (np.uint8, np.uint16):
        raise ImageError(f"image array must be uint8 or uint16, got {arr.dtype}")
    if arr.ndim not in (2, 3) or (arr.ndim == 3 and arr.shape[2] not in (3, 4)) \
            or 0 in arr.shape:
        raise ImageError(f"image array must be HxW, HxWx3 or HxWx4, got shape {arr.shape}")
    return arr


def _pillow_pixels(img: Image.Image) -> np.ndarray:
    """A Pillow image as the RGB(A) array OpenCV would hold for it (``imread`` with -1)."""
    if img.mode in ("L", "RGB", "RGBA"):
        return np.asarray(img)
    return _checked_array(_opencv_pixels(img, -1))


def _swap_red_blue(pixels: np.ndarray) -> np.ndarray:
    """RGB(A) <-> BGR(A), OpenCV's order, as a new array (grey returned as it is)."""
    if pixels.ndim == 2:
        return pixels
    cv2 = optional("cv2")
    if cv2 is not None:  # a hundred times faster than NumPy's fancy indexing
        return cv2.cvtColor(pixels, cv2.COLOR_RGB2BGR if pixels.shape[2] == 3
                            else cv2.COLOR_RGBA2BGRA)
    planes = [pixels[:, :, 2], pixels[:, :, 1], pixels[:, :, 0]]
    if pixels.shape[2] == 4:
        planes.append(pixels[:, :, 3])
    return np.stack(planes, axis=2)


def _encode_jpeg(pixels: np.ndarray, bgr: bool, quality: int, encoder: str) -> bytes:
    if pixels.dtype != np.uint8:  # OpenCV's imencode converts with saturation
        pixels = np.minimum(pixels, 255).astype(np.uint8)
    if pixels.ndim == 3 and pixels.shape[2] == 4:
        pixels = pixels[:, :, :3]
    cv2 = optional("cv2")
    # from quality 96 on simplejpeg's TurboJPEG call uses the accurate DCT too: libjpeg's bytes
    # (tests/test_mxnet_bytes.py), without the GIL Pillow's encoder holds
    if encoder == "fast" or (cv2 is None and quality >= 96):
        encoded = _encode_simplejpeg(pixels, quality, bgr)
        if encoded is not None:
            return encoded
    if cv2 is not None:
        return _encode_opencv(".jpg", pixels, bgr, [cv2.IMWRITE_JPEG_QUALITY, quality])
    height, width = pixels.shape[:2]
    mode = "L" if pixels.ndim == 2 else "RGB"
    img = Image.frombuffer(mode, (width, height), np.ascontiguousarray(pixels), "raw",
                           "BGR" if bgr and mode == "RGB" else mode, 0, 1)
    out = io.BytesIO()
    img.save(out, "JPEG", quality=quality)
    return out.getvalue()


def _encode_png(pixels: np.ndarray, bgr: bool, level: int) -> bytes:
    cv2 = optional("cv2")
    if cv2 is not None:
        return _encode_opencv(".png", pixels, bgr, [cv2.IMWRITE_PNG_COMPRESSION, level])
    return encode_png(_swap_red_blue(pixels) if bgr else pixels, level)


def _encode_opencv(fmt: str, pixels: np.ndarray, bgr: bool, params: list) -> bytes:
    """``cv2.imencode(fmt, BGR pixels, params)``, MXNet's own call."""
    cv2 = optional("cv2")
    try:
        ok, buf = cv2.imencode(fmt, pixels if bgr else _swap_red_blue(pixels), params)
    except cv2.error as exc:  # e.g. no encoder for that extension
        raise ValueError(" ".join(str(exc).split())[-160:]) from None
    if not ok:
        raise ValueError(f"OpenCV could not encode the image as {fmt}")
    return buf.tobytes()


def _encode_simplejpeg(image: np.ndarray, quality: int, bgr: bool) -> Optional[bytes]:
    """A uint8 grey or 3-channel array as JPEG through simplejpeg (libjpeg-turbo's TurboJPEG,
    without the GIL), with Pillow's and OpenCV's 4:2:0 chroma and headers; None (the exact
    encoder) without simplejpeg or for quality 0."""
    sj = optional("simplejpeg")
    if sj is None or quality < 1:
        return None
    if image.ndim == 2:
        image = image[:, :, None]
    grey = image.shape[2] == 1
    return sj.encode_jpeg(np.ascontiguousarray(image), int(quality),
                          "GRAY" if grey else ("BGR" if bgr else "RGB"),
                          "Gray" if grey else "420")


# -- im2rec: decode, crop, resize, encode -------------------------------------------------------
@dataclass(frozen=True)
class ImageOptions:
    """How to turn a source image into a record image (the im2rec pack options).

    The defaults write MXNet's bytes: ``tools/im2rec.py``'s ``cv2.imread`` (which applies the
    EXIF orientation for ``color`` 1 and 0), centre crop, ``cv2.resize`` and ``pack_img``.
    """

    color: int = 1
    resize: int = 0
    center_crop: bool = False
    encoding: str = ".jpg"
    quality: int = 95
    #: apply the EXIF orientation; None: as OpenCV's imread, for ``color`` 1 and 0 only
    exif_transpose: Optional[bool] = None
    max_pixels: int = DEFAULT_MAX_PIXELS
    #: "auto" (simplejpeg when installed, for JPEG sources), "pillow" or "simplejpeg"
    decoder: str = "auto"
    #: one of RESIZE_MODES: "mxnet" (MXNet's pixels) or "antialias"
    resize_mode: str = "mxnet"
    #: one of ENCODERS: "exact" (MXNet's JPEG bytes) or "fast" (simplejpeg)
    encoder: str = "exact"

    def __post_init__(self) -> None:
        if self.color not in COLOR_MODES:
            raise ValueError(f"color must be one of -1, 0, 1, got {self.color}")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be .jpg or .png, got {self.encoding!r}")
        if self.resize < 0:
            raise ValueError(f"resize must be 0 (keep size) or a positive side, got {self.resize}")
        if self.encoding == ".jpg" and not 1 <= self.quality <= 100:
            raise ValueError(f"JPEG quality must be 1-100, got {self.quality}")
        if self.resize_mode not in RESIZE_MODES:
            raise ValueError(f"resize_mode must be 'mxnet' or 'antialias', got "
                             f"{self.resize_mode!r}")
        check_encoder(self.encoder)
        check_decoder(self.decoder)

    @property
    def orient(self) -> bool:
        """Whether the EXIF orientation is applied (``exif_transpose``, or OpenCV's rule)."""
        return self.color != -1 if self.exif_transpose is None else self.exif_transpose


def target_size(width: int, height: int, resize: int) -> Tuple[int, int]:
    """im2rec's output ``(width, height)``: shorter side ``S = resize``, longer
    ``long * S // short``."""
    if height > width:
        return resize, height * resize // width
    return width * resize // height, resize


def center_crop_box(width: int, height: int) -> Tuple[int, int, int, int]:
    """The centred square ``(left, top, right, bottom)`` of side ``min(width, height)``."""
    if height > width:
        margin = (height - width) // 2
        return 0, margin, width, margin + width
    margin = (width - height) // 2
    return margin, 0, margin + height, height


def output_geometry(width: int, height: int, options: ImageOptions
                    ) -> Tuple[Tuple[int, int, int, int], Optional[Tuple[int, int]]]:
    """Source box to keep and final size (``None``: no resize) for a ``width x height`` image."""
    box = center_crop_box(width, height) if options.center_crop else (0, 0, width, height)
    if not options.resize:
        return box, None
    return box, target_size(box[2] - box[0], box[3] - box[1], options.resize)


_RESIZER_LOCK = threading.Lock()
_RESIZER_DECIDED: Optional[str] = None


def resizer_name() -> str:
    """Which library does im2rec's resize: ``"opencv"``, ``"cykooz"`` or ``"pillow"`` (see
    ``RESIZERS``; decided once, under a lock so that worker threads starting together all
    decide the same)."""
    global _RESIZER_DECIDED
    if RESIZER is not None:
        if RESIZER not in RESIZERS:
            raise ValueError(f"RESIZER must be one of {RESIZERS}, got {RESIZER!r}")
        return RESIZER
    if _RESIZER_DECIDED is None:
        with _RESIZER_LOCK:
            if _RESIZER_DECIDED is None:
                _RESIZER_DECIDED = _resizer_from_environment()
    return _RESIZER_DECIDED


def _resizer_from_environment() -> str:
    choice = os.environ.get(RESIZER_ENV, "auto").strip().lower()
    if choice not in ("auto",) + RESIZERS:
        raise ValueError(f"{RESIZER_ENV} must be auto, {', '.join(RESIZERS)}; got {choice!r}")
    if choice != "auto":
        if choice in _RESIZER_MODULES:  # raises, saying what to install, when it is missing
            _resizer_module(choice)
        return choice
    for name in RESIZERS[:-1]:
        if any(optional(module) is not None for module in _RESIZER_MODULES[name]):
            return name
    return "pillow"


def _resizer_module(name: str) -> Any:
    """The module of resizer ``name``; ImportError saying what to install when it is missing."""
    modules = _RESIZER_MODULES[name]
    for module in modules[1:]:
        found = optional(module)
        if found is not None:
            return found
    return require(modules[0], feature=f"{RESIZER_ENV}={name}")


def _cv2() -> Any:
    """The cv2 module when OpenCV is the resizer, else None."""
    if resizer_name() != "opencv":
        return None
    return _resizer_module("opencv")


def codec_names(options: Optional["ImageOptions"] = None) -> Dict[str, str]:
    """What im2rec decodes, resizes and encodes JPEGs with here, for ``options`` (default: the
    default options), for logs and the benchmarks: ``{"decoder": ..., "resizer": ...,
    "encoder": ...}``."""
    options = options or ImageOptions()
    jpeg = "simplejpeg" if have_fast_decoder() else "pillow"
    resizer = resizer_name()
    if options.resize_mode == "mxnet" and resizer != "opencv":
        resizer = "numpy"  # recio.image.linear: OpenCV's bilinear, bit for bit
    exact = "opencv" if optional("cv2") is not None else "pillow"
    fast = options.encoder == "fast" and optional("simplejpeg") is not None
    return {"decoder": jpeg, "resizer": resizer, "encoder": "simplejpeg" if fast else exact}


def set_opencv_threads(n: int) -> Optional[int]:
    """Set OpenCV's internal thread count when OpenCV does the resizes; returns the previous count
    (None when OpenCV is not in use), so a caller can restore it.

    OpenCV's own thread pool splits each small resize and spins between calls: more CPU per
    image for no speed-up, fighting the packer's workers; the packer sets 1 while it runs.
    """
    cv2 = _cv2()
    if cv2 is None:
        return None
    previous = cv2.getNumThreads()
    cv2.setNumThreads(n)
    return previous


def transform_image(data: bytes, options: ImageOptions, name: Optional[str] = None) -> bytes:
    """Decode ``data``, crop/resize/convert per ``options`` and encode; returns the new bytes
    (with the default options, the bytes MXNet's ``tools/im2rec.py`` writes).

    Raises :class:`ImageError` (with ``name`` as the path) for anything that cannot be decoded,
    is larger than ``options.max_pixels`` or cannot be encoded.
    """
    pixels = render_pixels(data, options, name)
    try:
        return encode(pixels, options.encoding, options.quality, encoder=options.encoder)
    except ImageError as exc:
        raise ImageError(exc.message, path=name) from None


def render_image(data: bytes, options: ImageOptions, name: Optional[str] = None) -> Image.Image:
    """The decoded, colour-converted, cropped and resized image (before encoding), as a Pillow
    image. (16-bit samples, kept by ``color=-1`` in the "mxnet" mode: a grey image is a 16-bit
    Pillow image; colour ones have no Pillow mode, so :func:`render_pixels` gives them.)"""
    pixels = render_pixels(data, options, name)
    if isinstance(pixels, Image.Image):
        return pixels
    if pixels.dtype != np.uint8 and pixels.ndim == 3:
        raise ImageError("16-bit colour samples have no Pillow image mode: use render_pixels",
                         path=name)
    return Image.fromarray(pixels)


def render_pixels(data: bytes, options: ImageOptions, name: Optional[str] = None
                  ) -> Union[np.ndarray, Image.Image]:
    """:func:`render_image` without the conversion: an array (``(H, W)``, ``(H, W, 3)`` RGB or
    ``(H, W, 4)`` RGBA; uint8, or uint16 for a 16-bit PNG packed with ``color=-1`` in the
    "mxnet" mode) or, when Pillow did the resize, the Pillow image; either goes straight to
    :func:`encode`."""
    if options.resize_mode == "mxnet":
        return _render_as_mxnet(data, options, name)
    resizer = resizer_name()
    array, (width, height), scale = decode_scaled(
        data, options.color, min_side=options.resize, max_pixels=options.max_pixels,
        exif_transpose=options.orient, decoder=options.decoder, name=name,
        scales=_SCALES if resizer == "pillow" else _CV2_SCALES)
    if array.dtype != np.uint8:  # 16-bit grey kept by color=-1: OpenCV keeps the high byte
        array = (array >> 8).astype(np.uint8)
    if options.encoding == ".jpg" and array.ndim == 3 and array.shape[2] == 4:
        array = array[:, :, :3]  # JPEG cannot hold alpha
    box, size = output_geometry(width, height, options)
    if size is None:
        left, top, right, bottom = box
        if box != (0, 0, width, height):
            array = array[top:bottom, left:right]
        return np.ascontiguousarray(array)
    scaled = (box[0] * scale, box[1] * scale, box[2] * scale, box[3] * scale)
    if array.ndim == 3 and array.shape[2] == 4:
        resizer = "pillow"  # alpha: Pillow resamples it as it always did
    if resizer == "opencv":
        return _cv2_resize(_cv2(), array, scaled, size, box == (0, 0, width, height))
    if resizer == "cykooz":
        return _cykooz_resize(array, scaled, size)
    return Image.fromarray(array).resize(size, RESAMPLE, box=scaled, reducing_gap=REDUCING_GAP)


def _render_as_mxnet(data: bytes, options: ImageOptions, name: Optional[str]) -> np.ndarray:
    """MXNet's ``tools/im2rec.py``: ``cv2.imread`` (the full-size image, EXIF orientation as
    OpenCV applies it), the centre crop, ``cv2.resize`` (bilinear); the pixels its
    ``pack_img`` encodes. 16-bit samples stay (PNG keeps them; JPEG saturates, as OpenCV)."""
    array = decode(data, options.color, max_pixels=options.max_pixels,
                   exif_transpose=options.orient, decoder=options.decoder, name=name)
    if options.encoding == ".jpg" and array.ndim == 3 and array.shape[2] == 4:
        array = array[:, :, :3]  # JPEG cannot hold alpha (dropped before the resize: the same)
    height, width = array.shape[:2]
    box, size = output_geometry(width, height, options)
    left, top, right, bottom = box
    if box != (0, 0, width, height):
        array = array[top:bottom, left:right]
    if size is not None:
        return resize_like_opencv(array, size)
    return np.ascontiguousarray(array)


def resize_like_opencv(array: np.ndarray, size: Tuple[int, int]) -> np.ndarray:
    """``cv2.resize(array, size)`` (bilinear; ``size`` is ``(width, height)``): OpenCV itself
    when it is the resizer (see ``RESIZERS``), else recio's bit-exact copy of it
    (:func:`recio.image.linear.resize_linear`). The copy matches OpenCV's own code; for 16-bit
    images OpenCV's pip builds call Intel IPP instead, whose results differ in the last bit in
    places (and between CPUs)."""
    if size == (array.shape[1], array.shape[0]):
        return np.ascontiguousarray(array)
    if resizer_name() == "opencv":
        return _cv2().resize(np.ascontiguousarray(array), size)
    return resize_linear(array, size)


_CYKOOZ = threading.local()


def _cykooz_resize(array: np.ndarray, scaled: Tuple[float, float, float, float],
                   size: Tuple[int, int]) -> Image.Image:
    """cykooz.resizer's Catmull-Rom convolution (Pillow's antialiased bicubic, in SIMD) of the
    box ``scaled`` (reduced-image coordinates) of the uint8 ``array`` to ``size``."""
    cykooz = _resizer_module("cykooz")
    resizer = getattr(_CYKOOZ, "resizer", None)
    if resizer is None:  # one per thread: it keeps scratch buffers
        resizer = _CYKOOZ.resizer = cykooz.Resizer()
    left, top, right, bottom = scaled
    right, bottom = min(right, array.shape[1]), min(bottom, array.shape[0])
    options = cykooz.ResizeOptions(
        cykooz.ResizeAlg.convolution(cykooz.FilterType.catmull_rom),
        crop_box=cykooz.CropBox(left, top, right - left, bottom - top))
    out = Image.new("L" if array.ndim == 2 else "RGB", size)
    resizer.resize_pil(Image.fromarray(array), out, options)
    return out


def _cv2_resize(cv2: Any, array: np.ndarray, scaled: Tuple[float, float, float, float],
                size: Tuple[int, int], whole: bool) -> np.ndarray:
    """OpenCV resize of the box ``scaled`` (reduced-image coordinates) of the uint8 ``array``
    to ``size`` (width, height)."""
    left, top, right, bottom = scaled
    fx, fy = size[0] / (right - left), size[1] / (bottom - top)
    # cv2.resize takes no fractional box, and a dsize rescales by dsize/source size, which
    # is not the exact factor when the DCT-scaled decode rounded its size up (a shift of up
    # to half a pixel). Given fx/fy and no dsize it maps output pixel x to source
    # (x + 0.5) / fx - 0.5 exactly, as Pillow's resize(box=...): start at the box's corner
    # (rounded; fractional only for a centre crop of a reduced decode) and cut the output to
    # ``size``.
    reduce = int(1 / max(fx, fy))
    if reduce >= CV2_AREA_FACTOR:
        # a large reduction (PNG and other non-JPEG sources): average k x k blocks first,
        # OpenCV's fast integer INTER_AREA (a plain INTER_AREA by a fractional factor costs
        # about twice as much), then the fractional rest; block i's centre is source pixel
        # (i + 0.5) k - 0.5, so the box simply scales by 1/k
        height, width = array.shape[0] // reduce, array.shape[1] // reduce
        array = cv2.resize(array[:height * reduce, :width * reduce], (width, height),
                           interpolation=cv2.INTER_AREA)
        left, top, right, bottom = (v / reduce for v in (left, top, right, bottom))
        fx, fy = fx * reduce, fy * reduce
        whole = False
    left, top = int(left + 0.5), int(top + 0.5)
    if not whole:
        array = array[top:min(array.shape[0], math.ceil(bottom) + 1),
                      left:min(array.shape[1], math.ceil(right) + 1)]
    interpolation = getattr(cv2, CV2_INTERPOLATION)
    out = cv2.resize(array, None, fx=fx, fy=fy, interpolation=interpolation)
    if out.shape[1] < size[0] or out.shape[0] < size[1]:  # rounding: fall back to dsize
        out = cv2.resize(array, size, interpolation=interpolation)
    elif out.shape[1] != size[0] or out.shape[0] != size[1]:
        out = np.ascontiguousarray(out[:size[1], :size[0]])
    return out


def encode_image(img: Image.Image, encoding: str = ".jpg", quality: int = 95) -> bytes:
    """Deprecated: use :func:`encode` (same parameter order)."""
    warnings.warn("recio.image.codec.encode_image is deprecated: use recio.image.codec.encode",
                  DeprecationWarning, stacklevel=2)
    return encode(img, encoding, quality)


__all__ = ["has_alpha", "DEFAULT_MAX_PIXELS", "COLOR_MODES", "DECODERS", "ENCODERS",
           "RESIZE_MODES", "RESIZERS", "decode", "decode_scaled", "encode", "check_decoder",
           "check_encoder", "check_pixels", "dct_eighths", "resize_like_opencv",
           "have_fast_decoder", "jpeg_size", "ImageOptions", "target_size", "center_crop_box",
           "output_geometry", "resizer_name", "codec_names", "set_opencv_threads",
           "transform_image", "render_image", "render_pixels"]
