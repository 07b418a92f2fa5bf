"""Decode, centre-crop, resize and re-encode one image the way im2rec does, but faster and safer.

Geometry is MXNet's (``tools/im2rec.py``): ``center_crop`` keeps the centred square of side
``min(h, w)``; ``resize=S`` scales so the shorter side is ``S`` and the longer ``long * S // short``
(integer floor). Pixels differ from MXNet (OpenCV's non-antialiased bilinear); ours are better:
Pillow's antialiased filters, measured against an exact Lanczos downscale.

Speed comes from not decoding pixels that are thrown away: a JPEG is decoded straight to a
reduced scale in the DCT domain (Pillow's ``draft()``: 1/2, 1/4, 1/8; or, when the optional
``simplejpeg`` is installed (``pip install 'recio[fast]'``), libjpeg-turbo's M/8 scales), never
below the target size, and crop + resize are then one resampling step over the reduced image.
Both decoders give the same output sizes.

When OpenCV is importable (``opencv-python-headless``, also in ``recio[fast]``), that final
resize of an RGB or greyscale image is ``cv2.resize`` instead of Pillow's (about half the CPU per
image; the packer limits OpenCV to one internal thread while it runs), and the simplejpeg decode then keeps to the SIMD
scales 1/8, 2/8, 4/8, 8/8; sizes are unchanged. Set the environment variable
``RECIO_RESIZER=pillow`` to force Pillow (``opencv`` to require OpenCV).

Safety: the declared size is checked before any pixel is decoded (decompression bombs), and
every decode failure becomes an :class:`~recio.errors.ImageError` saying why.
"""
from __future__ import annotations

import io
import math
import os
import struct
import threading
from dataclasses import dataclass
from typing import Optional, Tuple

from PIL import Image, ImageOps

from recio.errors import ImageError

#: Pillow's own default decompression-bomb limit (about 89.5 megapixels, a 9459 x 9459 image)
DEFAULT_MAX_PIXELS = 89_478_485
#: im2rec's colour modes: 1 colour (alpha dropped), 0 greyscale, -1 unchanged
COLOR_MODES = (-1, 0, 1)
ENCODINGS = (".jpg", ".png")
_JPEG_SOI = b"\xff\xd8\xff"
_ORIENTATION_TAG = 0x0112

#: the libjpeg-turbo DCT scales (in eighths) the simplejpeg path may decode at: the smallest not
#: below the target size. Measured on the benchmark corpus (CPU ms per image for decode + resize
#: + encode to 256 px, PSNR against an exact Lanczos downscale; OpenCV INTER_LINEAR: 46.9 dB):
#: all of 1-8: 4.1 ms, 47.4 dB; without 7/8 (this): 4.1 ms, 48.1 dB; only the SIMD scales 1, 2,
#: 4, 8: 4.5 ms, 50.3 dB. 3/8, 5/8, 6/8 and 7/8 decode *slower* than 8/8 (no SIMD inverse DCT;
#: 500x397 JPEG: 1.14 ms at 8/8, 1.49 at 5/8, 1.76 at 6/8, 2.16 at 7/8), but the smaller image
#: makes the resize, the largest cost, cheaper; at 7/8 that saving is too small to pay.
_SLOW_SCALES = (7,)
_SCALES = tuple(k for k in range(1, 9) if k not in _SLOW_SCALES)

#: the antialiased resampling filter. Against an exact float Lanczos downscale (PSNR, 120
#: corpus images to 256 px) bicubic scores 50.4 dB, OpenCV's INTER_LINEAR (MXNet) 46.9,
#: Pillow's bilinear only 43.4 (too soft); see benchmarks/bench_im2rec.py. The resize is the
#: largest cost (about half the CPU per image), but the cheaper filters all score below OpenCV
#: after the DCT-scaled decode (bilinear 42.9, hamming 42.7, 90 images) for ~20% less CPU.
RESAMPLE = Image.Resampling.BICUBIC
#: shrink by an integer factor first when the ratio is at least this (PNG and other non-JPEG
#: sources; JPEGs are already reduced in the DCT domain); costs < 0.1 dB
REDUCING_GAP = 3.0

#: the OpenCV resize of the DCT-reduced image (remaining factor below 2). PSNR against an exact
#: float Lanczos downscale (150 corpus images to 256 px; OpenCV INTER_LINEAR from full
#: resolution, i.e. MXNet: 46.18 dB; Pillow BICUBIC: 49.9 dB) and CPU ms per image for decode
#: + resize + encode (simplejpeg; Pillow BICUBIC 4.1): INTER_CUBIC 47.9 dB, 2.3 ms; INTER_LINEAR
#: 45.7 dB; INTER_AREA 44.1 dB; with exact fractional geometry (see _cv2_resize; cv2.resize's
#: dsize form instead: 46.7 dB) and simplejpeg kept to the SIMD scales (all of 1/8-8/8: 47.1 dB,
#: 3/8-6/8 decode slower than 8/8 anyway), hence _CV2_SCALES.
CV2_INTERPOLATION = "INTER_CUBIC"
#: from this remaining factor on (PNG and other non-JPEG sources) OpenCV's antialiasing
#: INTER_AREA is used instead: a plain cubic would alias
CV2_AREA_FACTOR = 2.0
_CV2_SCALES = (1, 2, 4, 8)
#: the environment variable choosing the resizer: "auto" (OpenCV when installed) or "pillow"
RESIZER_ENV = "RECIO_RESIZER"
#: module-level switch: None = decide once from RECIO_RESIZER and whether cv2 imports;
#: True/False force OpenCV or Pillow (tests set it)
USE_OPENCV: Optional[bool] = None

#: what Pillow and the decoders raise on bad data; all of it becomes ImageError
_DECODE_ERRORS = (OSError, ValueError, SyntaxError, EOFError, IndexError, KeyError, TypeError,
                  ZeroDivisionError, struct.error, MemoryError, Image.DecompressionBombError)


@dataclass(frozen=True)
class ImageOptions:
    """How to turn a source image into a record image (the im2rec pack options)."""

    color: int = 1
    resize: int = 0
    center_crop: bool = False
    encoding: str = ".jpg"
    quality: int = 95
    exif_transpose: bool = False
    max_pixels: int = DEFAULT_MAX_PIXELS
    #: "auto" (simplejpeg when installed, for JPEG sources), "pillow" or "simplejpeg"
    decoder: str = "auto"

    def __post_init__(self) -> None:
        if self.color not in COLOR_MODES:
            raise ValueError(f"color must be one of -1, 0, 1, got {self.color}")
        if self.encoding not in ENCODINGS:
            raise ValueError(f"encoding must be .jpg or .png, got {self.encoding!r}")
        if self.resize < 0:
            raise ValueError(f"resize must be 0 (keep size) or a positive side, got {self.resize}")
        if self.encoding == ".jpg" and not 1 <= self.quality <= 100:
            raise ValueError(f"JPEG quality must be 1-100, got {self.quality}")
        if self.decoder not in ("auto", "pillow", "simplejpeg"):
            raise ValueError(f"decoder must be auto, pillow or simplejpeg, got {self.decoder!r}")
        if self.decoder == "simplejpeg" and _simplejpeg() is None:
            raise ImportError("decoder='simplejpeg' needs simplejpeg: pip install 'recio[fast]'")


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


_SJ = None


def _simplejpeg():
    """The simplejpeg module, or None when it is not installed (checked once)."""
    global _SJ
    if _SJ is None:
        try:
            import simplejpeg
            _SJ = simplejpeg
        except ImportError:
            _SJ = False
    return _SJ or None


_CV2 = None
_CV2_LOCK = threading.Lock()


def _cv2():
    """The cv2 module when the OpenCV resizer is to be used, else None (decided once, under a
    lock so that worker threads starting together all decide the same)."""
    global _CV2, USE_OPENCV
    if USE_OPENCV is False:
        return None
    if _CV2 is None or (USE_OPENCV and _CV2 is False):
        with _CV2_LOCK:
            if _CV2 is None or (USE_OPENCV and _CV2 is False):
                _CV2 = _load_cv2(USE_OPENCV)
    if USE_OPENCV is None:
        USE_OPENCV = bool(_CV2)
    return (_CV2 or None) if USE_OPENCV else None


def _load_cv2(force: Optional[bool]):
    choice = os.environ.get(RESIZER_ENV, "auto").strip().lower()
    if choice not in ("auto", "opencv", "pillow"):
        raise ValueError(f"{RESIZER_ENV} must be auto, opencv or pillow, got {choice!r}")
    if choice == "pillow" and not force:
        return False
    try:
        import cv2
    except ImportError:
        if choice == "opencv" or force:
            raise ImportError(f"{RESIZER_ENV}=opencv needs OpenCV: pip install 'recio[fast]' "
                              "(or opencv-python-headless)") from None
        return False
    return cv2


def set_opencv_threads(n: int) -> Optional[int]:
    """Set OpenCV's internal thread count when OpenCV does the resizes; returns the previous count
    (None when OpenCV is not in use), so a caller can restore it.

    OpenCV's own thread pool splits each small resize and spins between calls: about one more
    CPU ms per image for no speed-up, fighting the packer's workers; the packer sets 1 while it
    runs.
    """
    cv2 = _cv2()
    if cv2 is None:
        return None
    previous = cv2.getNumThreads()
    cv2.setNumThreads(n)
    return previous


def resizer_name() -> str:
    """Which library does the final resize: ``"opencv"`` or ``"pillow"``."""
    return "opencv" if _cv2() is not None else "pillow"


def have_fast_decoder() -> bool:
    """True when the optional simplejpeg fast JPEG decoder (``recio[fast]``) is installed."""
    return _simplejpeg() is not None


def transform_image(data: bytes, options: ImageOptions, name: Optional[str] = None) -> bytes:
    """Decode ``data``, crop/resize/convert per ``options`` and encode; returns the new bytes.

    Raises :class:`ImageError` (with ``name`` as the path) for anything that cannot be decoded,
    is larger than ``options.max_pixels`` or cannot be encoded.
    """
    img = render_image(data, options, name)
    try:
        return encode_image(img, options.encoding, options.quality)
    except _DECODE_ERRORS as exc:
        raise ImageError(f"cannot encode image: {_describe(exc)}", path=name) from None


def render_image(data: bytes, options: ImageOptions, name: Optional[str] = None) -> Image.Image:
    """The decoded, colour-converted, cropped and resized Pillow image (before encoding)."""
    try:
        img = None
        if (options.decoder != "pillow" and not options.exif_transpose
                and data[:3] == _JPEG_SOI and _simplejpeg() is not None):
            img = _decode_simplejpeg(data, options, name)
        if img is None:
            img = _decode_pillow(data, options, name)
        return img
    except ImageError:
        raise
    except _DECODE_ERRORS as exc:
        raise ImageError(f"cannot decode image: {_describe(exc)}", path=name) from None


def _describe(exc: BaseException) -> str:
    text = str(exc).strip() or type(exc).__name__
    if type(exc).__name__ not in text:
        text = f"{type(exc).__name__}: {text}"
    return " ".join(text.split())[:200]


def _check_pixels(width: int, height: int, options: ImageOptions, name: Optional[str]) -> None:
    if width <= 0 or height <= 0:
        raise ImageError(f"image declares an empty size {width}x{height}", path=name)
    if width * height > options.max_pixels:
        raise ImageError(f"image declares {width}x{height} = {width * height} pixels, above the "
                         f"limit of {options.max_pixels} (decompression-bomb guard); raise "
                         "--max-pixels if the image is genuine", path=name)


def _decode_simplejpeg(data: bytes, options: ImageOptions, name: Optional[str]):
    """Decode a JPEG with libjpeg-turbo at the smallest M/8 scale not below the target size."""
    sj = _simplejpeg()
    height, width, colorspace, _ = sj.decode_jpeg_header(data)
    if colorspace not in ("Gray", "YCbCr", "RGB"):
        return None  # CMYK/YCCK: let Pillow handle the colour conversion
    _check_pixels(width, height, options, name)
    gray = options.color == 0 or (options.color == -1 and colorspace == "Gray")
    box, size = output_geometry(width, height, options)
    m = 8
    if size is not None:
        need = max(size[0] / (box[2] - box[0]), size[1] / (box[3] - box[1]))
        scales = _CV2_SCALES if _cv2() is not None else _SCALES
        m = next(k for k in scales if k >= 8 or k / 8 >= need)
    if m == 8:
        array = sj.decode_jpeg(data, "GRAY" if gray else "RGB")
    else:
        array = sj.decode_jpeg(data, "GRAY" if gray else "RGB",
                               min_width=-(-width * m // 8), min_height=-(-height * m // 8))
    if array.ndim == 3 and array.shape[2] == 1:
        array = array[:, :, 0]
    # libjpeg scales by exactly m/8 and rounds the output size up: use m/8, not the size ratio
    scale = m / 8 if array.shape[1] == -(-width * m // 8) else array.shape[1] / width
    cv2 = _cv2()
    if cv2 is not None and size is not None:  # no round trip through a Pillow image
        scaled = (box[0] * scale, box[1] * scale, box[2] * scale, box[3] * scale)
        return Image.fromarray(_cv2_resize(cv2, array, scaled, size,
                                           box == (0, 0, width, height)))
    return _crop_resize(Image.fromarray(array), width, height, scale, scale, box, size)


def _decode_pillow(data: bytes, options: ImageOptions, name: Optional[str]):
    """Decode any format Pillow knows; JPEGs in draft mode (DCT-domain 1/2, 1/4, 1/8)."""
    # (Pillow may warn about a large image here; the packer silences that warning once, as
    # catch_warnings() is not thread-safe, and _check_pixels rejects it just below)
    img = Image.open(io.BytesIO(data))
    stored_w, stored_h = img.size
    _check_pixels(stored_w, stored_h, options, name)
    orientation = 1
    if options.exif_transpose:
        orientation = img.getexif().get(_ORIENTATION_TAG, 1)
    swap = orientation in (5, 6, 7, 8)
    width, height = (stored_h, stored_w) if swap else (stored_w, stored_h)
    box, size = output_geometry(width, height, options)
    if size is not None and img.format == "JPEG":
        need = max(size[0] / (box[2] - box[0]), size[1] / (box[3] - box[1]))
        mode = "L" if options.color == 0 else ("RGB" if options.color == 1 else None)
        request = (max(1, math.ceil(stored_w * need)), max(1, math.ceil(stored_h * need)))
        img.draft(mode, request)
    img.load()
    if orientation != 1:
        img = ImageOps.exif_transpose(img)
    img = convert_mode(img, options.color, options.encoding)
    # the draft may have shrunk the image by 1/2, 1/4 or 1/8 (sizes rounded up)
    scale = _draft_scale(stored_w, img.width if not swap else img.height)
    return _crop_resize(img, width, height, scale, scale, box, size)


def _draft_scale(original: int, decoded: int) -> float:
    for s in (1, 2, 4, 8):
        if (original + s - 1) // s == decoded:
            return 1.0 / s
    return decoded / original


def _crop_resize(img, width: int, height: int, sx: float, sy: float,
                 box: Tuple[int, int, int, int], size: Optional[Tuple[int, int]]):
    """Crop ``box`` (source coordinates) and resize to ``size`` in one resampling step."""
    if size is None:
        if box != (0, 0, width, height):
            img = img.crop(box)
        return img
    scaled = (box[0] * sx, box[1] * sy, box[2] * sx, box[3] * sy)
    cv2 = _cv2()
    if cv2 is not None and img.mode in ("RGB", "L"):
        import numpy as np

        return Image.fromarray(_cv2_resize(cv2, np.asarray(img), scaled, size,
                                           box == (0, 0, width, height)))
    return img.resize(size, RESAMPLE, box=scaled, reducing_gap=REDUCING_GAP)


def _cv2_resize(cv2, array, scaled: Tuple[float, float, float, float], size: Tuple[int, int],
                whole: bool):
    """OpenCV resize of the box ``scaled`` (reduced-image coordinates) of the uint8 ``array``
    to ``size`` (width, height)."""
    import numpy as np

    left, top, right, bottom = scaled
    fx, fy = size[0] / (right - left), size[1] / (bottom - top)
    # cv2.resize takes no fractional box, and a dsize rescales by dsize/source size, which
    # is not the exact factor when the DCT-scaled decode rounded its size up (a shift of up
    # to half a pixel: -2 dB on the benchmark). Given fx/fy and no dsize it maps output pixel
    # x to source (x + 0.5) / fx - 0.5 exactly, as Pillow's resize(box=...): start at the
    # box's corner (rounded; fractional only for a centre crop of a reduced decode) and cut
    # the output to ``size``.
    left, top = int(left + 0.5), int(top + 0.5)
    if not whole:
        array = array[top:min(array.shape[0], math.ceil(bottom) + 1),
                      left:min(array.shape[1], math.ceil(right) + 1)]
    interpolation = (cv2.INTER_AREA if 1 / max(fx, fy) >= CV2_AREA_FACTOR
                     else getattr(cv2, CV2_INTERPOLATION))
    out = cv2.resize(array, None, fx=fx, fy=fy, interpolation=interpolation)
    if out.shape[1] < size[0] or out.shape[0] < size[1]:  # rounding: fall back to dsize
        out = cv2.resize(array, size, interpolation=interpolation)
    elif out.shape[1] != size[0] or out.shape[0] != size[1]:
        out = np.ascontiguousarray(out[:size[1], :size[0]])
    return out


def convert_mode(img, color: int, encoding: str = ".jpg"):
    """Apply im2rec's colour mode: 1 RGB (alpha dropped), 0 greyscale, -1 as stored.

    With -1 the image keeps its channels unless the encoding cannot store them (JPEG has no
    alpha, so RGBA becomes RGB as OpenCV does). 16-bit images are scaled to 8 bits like OpenCV.
    """
    mode = img.mode
    if mode in ("I;16", "I;16L", "I;16B", "I;16N", "I", "F"):
        img = _to_8bit(img)
        mode = img.mode
    if color == 1:
        return img if mode == "RGB" else img.convert("RGB")
    if color == 0:
        return img if mode == "L" else img.convert("L")
    if mode == "P":
        img = img.convert("RGBA" if "transparency" in img.info else "RGB")
    elif mode == "1":
        img = img.convert("L")
    elif mode == "PA":
        img = img.convert("RGBA")
    elif mode not in ("L", "LA", "RGB", "RGBA"):
        img = img.convert("RGB")
    if encoding == ".jpg" and img.mode in ("LA", "RGBA"):
        img = img.convert(img.mode[:-1])
    return img


def _to_8bit(img):
    import numpy as np

    array = np.asarray(img)
    if img.mode == "F":
        array = np.clip(array, 0, 255)
    else:
        array = array.astype(np.uint32) >> 8  # OpenCV keeps the high byte of 16-bit samples
    return Image.fromarray(array.astype(np.uint8), "L")


def encode_image(img, encoding: str = ".jpg", quality: int = 95) -> bytes:
    """Encode a Pillow image: JPEG at ``quality`` (1-100) or PNG at compression ``quality``
    clamped to 0-9 (im2rec passes 95 to OpenCV, which clamps it the same way)."""
    out = io.BytesIO()
    if encoding == ".png":
        img.save(out, "PNG", compress_level=min(max(quality, 0), 9))
    else:
        img.save(out, "JPEG", quality=quality)
    return out.getvalue()


__all__ = ["DEFAULT_MAX_PIXELS", "ImageOptions", "target_size", "center_crop_box",
           "output_geometry", "have_fast_decoder", "resizer_name", "set_opencv_threads",
           "transform_image",
           "render_image", "convert_mode", "encode_image"]
