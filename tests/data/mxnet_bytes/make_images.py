"""Write the sources of this folder (``images/`` and ``arrays.npz``): run once with the project's
Python; ``make.py`` then records what the real MXNet writes for them.

    python tests/data/mxnet_bytes/make_images.py

``images/``: photo-like pictures large enough for im2rec's ``--resize`` to shrink them (by 1.3x
to 5x, halving exactly once, and to odd sizes), in the layouts whose encoding path differs:
JPEG 4:2:0 landscape and portrait, progressive, greyscale, with an EXIF orientation, a 3x2
one; PNG RGB, RGBA, palette and 16-bit grey. The small images of every decoding rule in
``../mxnet_pixels/images`` are packed beside them.

``arrays.npz``: the arrays ``make.py`` gives to ``mxnet.recordio.pack_img`` (BGR, as cv2 holds
them): colour at odd sizes (1x1, 7x13, 101x77), greyscale (2-D), BGRA, a 112x112 face crop, and
16-bit grey.
"""
import os

import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "images")


def photo(w, h, seed, noise=6.0):
    """Smooth shading, a few hard-edged shapes and mild noise: what JPEG sees in photographs
    (PNG sources get less noise, to stay small)."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w].astype(float)
    base = np.stack([128 + 90 * np.sin(x / (w / 3.1) + seed),
                     128 + 80 * np.cos(y / (h / 2.3) - seed),
                     128 + 70 * np.sin((x + y) / (w / 5.0))], -1)
    for _ in range(6):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(w / 12, w / 4)
        inside = (x - cx) ** 2 + (y - cy) ** 2 < r ** 2
        base[inside] = rng.uniform(0, 255, 3)
    base[h // 5:h // 5 + 3, :] = 250  # a thin line: aliasing shows in a resize
    base += rng.normal(0, noise, base.shape)
    return np.clip(base, 0, 255).astype(np.uint8)


def save(img, name, **kwargs):
    img.save(os.path.join(OUT, name), **kwargs)


def images():
    os.makedirs(OUT, exist_ok=True)
    save(Image.fromarray(photo(300, 220, 1)), "photo_300x220.jpg", quality=92)
    save(Image.fromarray(photo(211, 317, 2)), "portrait_211x317.jpg", quality=88)
    save(Image.fromarray(photo(256, 96, 3)), "halves_256x96.jpg", quality=90)  # 96 -> 48: 1/2
    save(Image.fromarray(photo(180, 135, 4)), "progressive_180x135.jpg", quality=90,
         progressive=True)
    save(Image.fromarray(photo(173, 131, 5)[:, :, 1]), "grey_173x131.jpg", quality=90)
    exif = Image.Exif()
    exif[0x0112] = 6  # shown rotated by 90 degrees: cv2.imread turns it, for colour and grey
    save(Image.fromarray(photo(120, 80, 6)), "exif6_120x80.jpg", quality=90,
         exif=exif.tobytes())
    save(Image.fromarray(photo(3, 2, 7)), "tiny_3x2.jpg", quality=95)
    save(Image.fromarray(photo(331, 83, 8, noise=0)), "wide_331x83.png")
    rgba = np.dstack([photo(150, 90, 9, noise=0), np.linspace(0, 255, 150 * 90).reshape(90, 150)])
    save(Image.fromarray(rgba.astype(np.uint8), "RGBA"), "rgba_150x90.png")
    save(Image.fromarray(photo(97, 61, 10)).convert("P", palette=Image.Palette.ADAPTIVE,
                                                     colors=64), "palette_97x61.png")
    deep = (photo(60, 44, 11)[:, :, 0].astype(np.uint16) * 257
            + np.arange(60, dtype=np.uint16)[None, :])
    save(Image.fromarray(deep), "grey16_60x44.png")


def arrays():
    """The pack_img inputs, BGR as cv2 gives them."""
    face = np.asarray(Image.open(os.path.join(HERE, "..", "mxnet_pixels", "images",
                                              "face_0.jpg")).convert("RGB"))
    face = np.asarray(Image.fromarray(face).resize((112, 112), Image.Resampling.BICUBIC))
    bgra = np.dstack([photo(29, 31, 20), np.linspace(0, 255, 29 * 31).reshape(31, 29)])
    out = {
        "bgr_1x1": photo(1, 1, 21)[:, :, ::-1],
        "bgr_7x13": photo(7, 13, 22)[:, :, ::-1],
        "bgr_101x77": photo(101, 77, 23)[:, :, ::-1],
        "grey_33x47": photo(33, 47, 24)[:, :, 2],
        "bgra_29x31": bgra.astype(np.uint8)[:, :, [2, 1, 0, 3]],
        "face_112x112": face[:, :, ::-1],
        "grey16_20x15": (photo(20, 15, 25)[:, :, 0].astype(np.uint16) * 251),
    }
    np.savez_compressed(os.path.join(HERE, "arrays.npz"),
                        **{k: np.ascontiguousarray(v) for k, v in out.items()})


if __name__ == "__main__":
    images()
    arrays()
