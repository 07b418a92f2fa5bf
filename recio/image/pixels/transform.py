"""im2rec's image transform: decode, centre crop, resize and encode one source image into a
record image (:class:`ImageOptions`, :func:`transform_image`).

im2rec (:func:`transform_image`) has two modes (``ImageOptions.resize_mode``):

* ``"mxnet"`` (the default): what MXNet's ``tools/im2rec.py`` does, call for call, so the
  bytes are MXNet's: the full-size decode (``cv2.imread``'s pixels, the EXIF orientation
  applied for colour and greyscale, as OpenCV does), the centre square of side ``min(h, w)``
  with ``center_crop``, and with ``resize=S`` ``cv2.resize`` (bilinear, not antialiased) to
  shorter side ``S`` and longer side ``long * S // short`` (integer floor), then
  ``cv2.imencode``.
* ``"antialias"`` (the fast mode): JPEGs decoded at a reduced DCT scale when the target allows,
  then OpenCV's area average and bicubic resize: no aliasing, faster on large photos
  (``benchmarks/README.md``); pixels differ from MXNet's.

Apart from the codec (``recio.image.pixels.codec``, ``recio.image.pixels.encoding``), which every
reader and writer shares, because this is only the packer's job: its options and its crop and resize
rules.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional, Tuple

import cv2
import numpy as np

from recio.errors import ImageError
from recio.image.pixels.codec import COLOR_MODES, DEFAULT_MAX_PIXELS, decode, decode_scaled
from recio.image.pixels.encoding import ENCODINGS, encode

#: how im2rec resizes: "mxnet" (OpenCV's bilinear from the full-size image, as MXNet's
#: tools/im2rec.py: its bytes) and "antialias" (DCT-scaled decode, area average and bicubic)
RESIZE_MODES = ("mxnet", "antialias")
#: the antialias mode's resize of the DCT-reduced image (remaining factor below 2)
_AA_INTERPOLATION = cv2.INTER_CUBIC
#: from this remaining factor on (PNG and other non-JPEG sources) OpenCV's INTER_AREA first
#: averages blocks of the integer part of the factor: a plain cubic would alias
_AA_AREA_FACTOR = 2.0


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
    #: one of RESIZE_MODES: "mxnet" (MXNet's pixels) or "antialias" (the fast mode)
    resize_mode: str = "mxnet"

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


def _output_geometry(width: int, height: int, options: ImageOptions
                    ) -> Tuple[Tuple[int, int, int, int], Optional[Tuple[int, int]]]:
    """Source box to keep and final size (``None``: no resize) for a ``width x height`` image."""
    box = center_crop_box(width, height) if options.center_crop else (0, 0, width, height)
    if not options.resize:
        return box, None
    return box, target_size(box[2] - box[0], box[3] - box[1], options.resize)


def set_opencv_threads(n: int) -> int:
    """Set OpenCV's internal thread count; returns the previous count, so a caller can restore
    it.

    OpenCV's own thread pool splits each small resize and spins between calls: more CPU per
    image for no speed-up, fighting the packer's workers; the packer sets 1 while it runs.
    """
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
        return encode(pixels, options.encoding, options.quality)
    except ImageError as exc:
        raise ImageError(exc.message, path=name) from None


def render_pixels(data: bytes, options: ImageOptions, name: Optional[str] = None) -> np.ndarray:
    """The decoded, colour-converted, cropped and resized image before encoding: ``(H, W)``,
    ``(H, W, 3)`` RGB or ``(H, W, 4)`` RGBA; uint8, or uint16 for a 16-bit PNG packed with
    ``color=-1`` in the "mxnet" mode."""
    if options.resize_mode == "mxnet":
        return _render_as_mxnet(data, options, name)
    array, (width, height), scale = decode_scaled(
        data, options.color, min_side=options.resize, max_pixels=options.max_pixels,
        exif_transpose=options.orient, name=name)
    if array.dtype != np.uint8:  # 16-bit grey kept by color=-1: OpenCV keeps the high byte
        array = (array >> 8).astype(np.uint8)
    if options.encoding == ".jpg" and array.ndim == 3 and array.shape[2] == 4:
        array = array[:, :, :3]  # JPEG cannot hold alpha
    box, size = _output_geometry(width, height, options)
    if size is None:
        left, top, right, bottom = box
        if box != (0, 0, width, height):
            array = array[top:bottom, left:right]
        return np.ascontiguousarray(array)
    scaled = (box[0] * scale, box[1] * scale, box[2] * scale, box[3] * scale)
    return _antialiased_resize(array, scaled, size, box == (0, 0, width, height))


def _render_as_mxnet(data: bytes, options: ImageOptions, name: Optional[str]) -> np.ndarray:
    """MXNet's ``tools/im2rec.py``: ``cv2.imread`` (the full-size image, EXIF orientation as
    OpenCV applies it), the centre crop, ``cv2.resize`` (bilinear); the pixels its
    ``pack_img`` encodes. 16-bit samples stay (PNG keeps them; JPEG saturates, as OpenCV)."""
    array = decode(data, options.color, max_pixels=options.max_pixels,
                   exif_transpose=options.orient, name=name)
    if options.encoding == ".jpg" and array.ndim == 3 and array.shape[2] == 4:
        array = array[:, :, :3]  # JPEG cannot hold alpha (dropped before the resize: the same)
    height, width = array.shape[:2]
    box, size = _output_geometry(width, height, options)
    left, top, right, bottom = box
    if box != (0, 0, width, height):
        array = array[top:bottom, left:right]
    if size is not None and size != (array.shape[1], array.shape[0]):
        return cv2.resize(np.ascontiguousarray(array), size)
    return np.ascontiguousarray(array)


def _antialiased_resize(array: np.ndarray, scaled: Tuple[float, float, float, float],
                        size: Tuple[int, int], whole: bool) -> np.ndarray:
    """The fast mode's resize of the box ``scaled`` (reduced-image coordinates) of the uint8
    ``array`` to ``size`` (width, height)."""
    left, top, right, bottom = scaled
    fx, fy = size[0] / (right - left), size[1] / (bottom - top)
    # cv2.resize takes no fractional box, and a dsize rescales by dsize/source size, which
    # is not the exact factor when the DCT-scaled decode rounded its size up (a shift of up
    # to half a pixel). Given fx/fy and no dsize it maps output pixel x to source
    # (x + 0.5) / fx - 0.5 exactly: start at the box's corner (rounded; fractional only for a
    # centre crop of a reduced decode) and cut the output to ``size``.
    reduce = int(1 / max(fx, fy))
    if reduce >= _AA_AREA_FACTOR:
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
    out = cv2.resize(array, None, fx=fx, fy=fy, interpolation=_AA_INTERPOLATION)
    if out.shape[1] < size[0] or out.shape[0] < size[1]:  # rounding: fall back to dsize
        out = cv2.resize(array, size, interpolation=_AA_INTERPOLATION)
    elif out.shape[1] != size[0] or out.shape[0] != size[1]:
        out = np.ascontiguousarray(out[:size[1], :size[0]])
    return out
