"""im2rec's image transform: decode, centre crop, resize and encode one source image into a
record image (:class:`ImageOptions`, :func:`transform_image`).

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

Apart from the codec (``recio.image.codec``, ``recio.image.encoding``), which every reader and
writer shares, because this is only the packer's job: its options, its crop and resize rules
and the choice of resizer.
"""
from __future__ import annotations

import math
import os
import threading
from dataclasses import dataclass
from typing import Any, Dict, Optional, Tuple, Union

import numpy as np
from PIL import Image

from recio.errors import ImageError
from recio.image.codec import (
    COLOR_MODES,
    DEFAULT_MAX_PIXELS,
    POWER_OF_TWO_SCALES,
    check_decoder,
    decode,
    decode_scaled,
    have_fast_decoder,
)
from recio.image.encoding import ENCODINGS, check_encoder, encode
from recio.image.linear import resize_linear
from recio.optional import optional, require

#: how im2rec resizes: "mxnet" (OpenCV's bilinear from the full-size image, as MXNet's
#: tools/im2rec.py: its bytes) and "antialias" (DCT-scaled decode, antialiased bicubic)
RESIZE_MODES = ("mxnet", "antialias")
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


__all__ = ["RESIZE_MODES", "RESIZERS", "RESIZER_ENV", "ImageOptions", "target_size",
           "center_crop_box", "output_geometry", "resizer_name", "codec_names",
           "set_opencv_threads", "transform_image", "render_image", "render_pixels",
           "resize_like_opencv"]
