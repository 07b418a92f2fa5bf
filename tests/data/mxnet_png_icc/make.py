"""Make the MXNet reference data of this folder: run once with the real MXNet, never edit.

    /work/mxvenv/bin/python tests/data/mxnet_png_icc/make.py PROFILE_SOURCE.png

MXNet 1.9.1's OpenCV 3.4 decodes a colour PNG to greyscale with libpng's ``png_set_rgb_to_gray``,
which works in linear light when the file has a gamma; libpng gives a file sRGB's gamma for an
sRGB chunk and also for an iCCP chunk holding one of the ICC profiles it knows as sRGB (its
``png_sRGB_checks``), e.g. HP/Microsoft's "sRGB IEC61966-2.1", 3144 bytes, in countless PNGs
(OpenCV 5's libpng ignores the profile). PROFILE_SOURCE.png: a PNG carrying that profile
(scikit-image's ``data/astronaut.png`` does). Writes, from a synthetic 29x23 colour image:

- ``hp_srgb.png`` (RGB + that iCCP), ``hp_srgb_gama22.png`` (plus a gAMA of 1/4.4: the sRGB
  profile wins), ``hp_srgb_palette.png`` (palette), ``hp_srgb_rgba.png`` (RGBA) and
  ``lcms_srgb.png`` (Pillow's own sRGB profile, which libpng does not know: no gamma);
- ``expected.npz``: ``NAME|0`` = ``mx.image.imdecode(bytes, flag=0)`` and ``NAME|1`` = flag 1.
"""
import io
import os
import struct
import sys
import zlib

import mxnet as mx
import numpy as np
from PIL import Image, ImageCms

HERE = os.path.dirname(os.path.abspath(__file__))
W, H = 29, 23


def source():
    y, x = np.mgrid[0:H, 0:W].astype(float)
    a = np.stack([x * 255 / (W - 1), y * 255 / (H - 1), 128 + 100 * np.sin(x / 3.0 + y / 5.0)], -1)
    a[4:9, 3:11] = [200, 30, 60]
    a[12:15, 15:20] = [90, 90, 90]  # grey pixels pass libpng's conversion unchanged
    return np.clip(a, 0, 255).astype(np.uint8)


def png(img, **kw):
    buf = io.BytesIO()
    img.save(buf, format="PNG", **kw)
    return buf.getvalue()


def with_gama(data, gamma):
    payload = struct.pack(">I", gamma)
    chunk = struct.pack(">I", 4) + b"gAMA" + payload + struct.pack(
        ">I", zlib.crc32(b"gAMA" + payload) & 0xFFFFFFFF)
    return data[:33] + chunk + data[33:]  # after IHDR


def main():
    hp = Image.open(sys.argv[1]).info["icc_profile"]
    assert len(hp) == 3144, "the HP/Microsoft sRGB profile is 3144 bytes"
    lcms = ImageCms.ImageCmsProfile(ImageCms.createProfile("sRGB")).tobytes()
    rgb = Image.fromarray(source())
    files = {
        "hp_srgb.png": png(rgb, icc_profile=hp),
        "hp_srgb_gama22.png": with_gama(png(rgb, icc_profile=hp), 22727),
        "hp_srgb_palette.png": png(rgb.quantize(23), icc_profile=hp),
        "hp_srgb_rgba.png": png(Image.fromarray(np.dstack([source(), np.full((H, W), 200, np.uint8)])),
                                icc_profile=hp),
        "lcms_srgb.png": png(rgb, icc_profile=lcms),
    }
    expected = {}
    for name, data in files.items():
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        for flag in (0, 1):
            expected[f"{name}|{flag}"] = mx.image.imdecode(data, flag=flag).asnumpy()
    np.savez_compressed(os.path.join(HERE, "expected.npz"), **expected)


if __name__ == "__main__":
    main()
