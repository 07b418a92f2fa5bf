"""OpenCV's colour rules, repeated in NumPy: how its decoders turn what an image file stores
into the pixels MXNet gets.

OpenCV's greyscale is not Pillow's ``convert("L")``: a PNG goes through libpng's RGB-to-grey
(weights 0.299/0.587 in 15-bit fixed point, truncated, in linear light when the file declares a
gamma, an sRGB chunk or one of the ICC profiles libpng takes for sRGB); other formats use
OpenCV's ``cvtColor`` weights. CMYK JPEGs use OpenCV's CMYK formulas; 16-bit samples keep their
high byte (the greyscale of 16-bit colour is computed on 16 bits, ``recio.image.png16``).

Apart from the decoder (``recio.image.codec``) because these are OpenCV's and libpng's rules,
written to be read beside their source, which the decoder, the encoder (``encode`` of a Pillow
image) and the augmenter (``cv_grey``) apply.
"""
from __future__ import annotations

import math
import struct
import zlib
from typing import Optional, Tuple

import numpy as np
from PIL import Image

from recio.image.png16 import read_png16

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


def opencv_pixels(img: Image.Image, color: int) -> np.ndarray:
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
            return _png_grey(array, png_gamma(img.info))
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


def png_gamma(info: dict) -> int:
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


def png16_pixels(data: bytes, color_type: int, color: int, gamma: int) -> Optional[np.ndarray]:
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


__all__ = ["opencv_pixels", "cv_grey", "png_gamma", "png16_pixels"]
