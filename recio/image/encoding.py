"""The one image encoder: pixels to the JPEG or PNG bytes MXNet's ``pack_img`` writes; every
writer of image records encodes through :func:`encode`.

By default the bytes are MXNet's (``cv2.imencode``): JPEGs through OpenCV when it is
installed, else Pillow (libjpeg-turbo with the same settings: the same bytes); PNGs through
OpenCV, else ``recio.image.pngenc`` (libpng's and zlib's choices, repeated). ``quality`` is the
JPEG quality (clamped to 0-100) for ``.jpg`` and the PNG compression level (clamped to 0-9,
OpenCV's ``IMWRITE_PNG_COMPRESSION``) for ``.png``. ``encoder="fast"`` encodes JPEGs with
simplejpeg instead (see :func:`encode`).

Apart from the decoder (``recio.image.codec``): a reader needs only decoding, and the
encoder's exactness (OpenCV, else Pillow or ``recio.image.pngenc`` giving the same bytes) is a
job of its own. Both follow OpenCV's colour rules (``recio.image.opencv_colour``).
"""
from __future__ import annotations

import io
import re
from typing import Optional, Union

import numpy as np
from PIL import Image

from recio.errors import ImageError
from recio.image.codec import describe_error
from recio.image.opencv_colour import opencv_pixels
from recio.image.pngenc import encode_png
from recio.optional import optional, require

#: the formats im2rec writes
ENCODINGS = (".jpg", ".png")
#: JPEG encoders: "exact" (MXNet's bytes: OpenCV's imencode, else Pillow's save) and "fast"
#: (simplejpeg; see ``encode``)
ENCODERS = ("exact", "fast")


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
        raise ImageError(f"cannot encode image: {describe_error(exc)}") from None


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
    return _checked_array(opencv_pixels(img, -1))


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
    """``cv2.imencode(fmt, BGR pixels, params)``, MXNet's own call (its callers have checked
    that OpenCV is installed)."""
    cv2 = require("cv2", feature=f"encoding {fmt} with OpenCV")
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


__all__ = ["ENCODINGS", "ENCODERS", "encode", "check_encoder"]
