"""MXNet's greyscale of a colour PNG that carries a known sRGB ICC profile: the one decode rule
where today's OpenCV differs from MXNet's and recio keeps a reproduction.

libpng 1.6 takes the HP/Microsoft "sRGB IEC61966-2.1" ICC profile (in countless PNGs) and a few
others for sRGB, so OpenCV 3.4 and 4 (MXNet's ``imdecode``, and ``cv2.imread`` in MXNet's
``im2rec.py``) convert such a PNG to grey in linear light: up to 63 levels off the plain
weighted sum. OpenCV 5 ignores the profile. The golden arrays of ``tests/data/mxnet_png_icc``
(made by the real MXNet 1.9.1) show the difference (``tests/image/pixels/test_image_codec.py``,
``test_png_with_a_known_srgb_profile_greys_as_mxnet``); every other PNG greyscale is
``cv2.imdecode``'s own.
"""
from __future__ import annotations

import io
import math
import struct
import zlib
from typing import Optional

import cv2
import numpy as np
from PIL import Image

#: libpng's png_set_rgb_to_gray(0.299, 0.587) as OpenCV calls it: 15-bit fixed point
_PNG_WEIGHTS = (9797, 19234, 3737)
#: libpng's sRGB gamma, in its fixed point (x 100000)
_SRGB_GAMMA = 45455
#: libpng 1.6's png_sRGB_checks (png.c): the ICC profiles it takes for sRGB: (ICC profile ID,
#: length, rendering intent, adler32, crc32)
_SRGB_PROFILES = (
    ("29f83ddeaff255ae7842fae4ca83390d", 3048, 0, 0x0A3FD9F6, 0x3B8772B9),
    ("c95bd637e95d8a3b0df38f99c1320389", 3052, 1, 0x4909E5E1, 0x427EBB21),
    ("fc66337837e2886bfd72e9838228f1b8", 60988, 0, 0xFD2144A1, 0x306FD8AE),
    ("34562abf994ccd066d2c5721d0d68c5d", 60960, 0, 0x209C35D2, 0xBBEF7812),
    ("00000000000000000000000000000000", 3024, 1, 0xA054D762, 0x5D5129CE),
    ("00000000000000000000000000000000", 3144, 0, 0xF784F3FB, 0x182EA552),
    ("00000000000000000000000000000000", 3144, 1, 0x0398F3FC, 0xF29E526D),
)
#: PNG colour types with colour samples (RGB, palette, RGBA)
_COLOUR_TYPES = (2, 3, 6)


def srgb_grey(buf: np.ndarray) -> Optional[np.ndarray]:
    """MXNet's ``(H, W)`` greyscale of the PNG ``buf`` when it is a colour PNG whose iCCP chunk
    is one of libpng's known sRGB profiles, else None (``cv2.imdecode`` then gives MXNet's
    pixels itself)."""
    if len(buf) < 26 or buf[25] not in _COLOUR_TYPES or not _has_iccp(buf):
        return None
    try:
        with Image.open(io.BytesIO(buf.tobytes())) as img:
            profile = img.info.get("icc_profile")
    except Exception:  # an unreadable chunk: OpenCV says what is wrong
        return None
    if not is_known_srgb_profile(profile):
        return None
    rgb = cv2.imdecode(buf, cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION)
    return None if rgb is None else _linear_light_grey(rgb)


def _has_iccp(buf: np.ndarray) -> bool:
    """Whether the PNG has an iCCP chunk (before its image data, where the chunk must be)."""
    head = buf[:1 << 20].tobytes()
    end = head.find(b"IDAT")
    return head.find(b"iCCP", 0, end if end != -1 else len(head)) != -1


def is_known_srgb_profile(profile: Optional[bytes]) -> bool:
    """libpng 1.6's ``png_compare_ICC_profile_with_sRGB`` (its default check level): the first
    entry whose profile ID matches decides, when its length and intent match too, by adler32
    and crc32 (an edited known profile is not taken)."""
    if not profile or len(profile) < 100:
        return False
    ident = bytes(profile[84:100]).hex()
    length, intent = struct.unpack(">I", profile[:4])[0], struct.unpack(">I", profile[64:68])[0]
    for md5, known_length, known_intent, adler, crc in _SRGB_PROFILES:
        if ident != md5 or length != known_length or intent != known_intent:
            continue
        body = bytes(profile[:length])
        return zlib.adler32(body) == adler and zlib.crc32(body) == crc
    return False


def _linear_light_grey(rgb: np.ndarray) -> np.ndarray:
    """libpng's ``png_do_rgb_to_gray`` of 8-bit samples with sRGB's file gamma: to linear light
    through its 8-bit tables, the weighted sum rounded, back; grey pixels pass unchanged."""
    to_linear = _gamma_table(_reciprocal(_SRGB_GAMMA))
    from_linear = _gamma_table(_SRGB_GAMMA)  # libpng assumes the display matches the file
    linear = to_linear[rgb].astype(np.uint32)
    total = (linear[:, :, 0] * _PNG_WEIGHTS[0] + linear[:, :, 1] * _PNG_WEIGHTS[1]
             + linear[:, :, 2] * _PNG_WEIGHTS[2] + (1 << 14)) >> 15
    grey = from_linear[total.astype(np.uint8)]
    r, g, b = rgb[:, :, 0], rgb[:, :, 1], rgb[:, :, 2]
    return np.where((r == g) & (g == b), r, grey).astype(np.uint8)


def _reciprocal(fixed: int) -> int:
    return int(math.floor(1e10 / fixed + 0.5))


def _gamma_table(fixed: int) -> np.ndarray:
    """libpng's ``png_build_8bit_table``: ``floor(255 * (i/255) ** gamma + 0.5)``."""
    exponent = fixed * 1e-5
    table = [0] + [int(math.floor(255 * math.pow(i / 255.0, exponent) + 0.5))
                   for i in range(1, 255)] + [255]
    return np.asarray(table, dtype=np.uint8)
