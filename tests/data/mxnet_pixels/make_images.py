"""Write the source images of this folder (``images/``): run once with the project's Python.

    python tests/data/mxnet_pixels/make_images.py

Small images (at most 37 x 33) in every layout whose decoding has its own rule in OpenCV, and so
in MXNet: JPEG colour (4:2:0, 4:2:2, 4:4:4, odd sizes), greyscale, progressive, CMYK (Adobe),
with an EXIF orientation; PNG RGB, RGBA, grey, grey + alpha, palette (with and without
transparency), 1-bit, 16-bit grey, 16-bit RGB / RGBA (every filter type, Adam7) / grey + alpha,
a tRNS colour key (8 and 16 bits), and a declared gamma (gAMA, sRGB chunk), which makes
libpng's greyscale work in linear light; BMP and TIFF. ``face_*.jpg``
are the images of the face-recognition dataset ``make.py`` packs. The content is smooth ramps
plus noise plus a flat block, so that chroma upsampling and rounding both show.
"""
import os
import struct
import zlib

import numpy as np
from PIL import Image, PngImagePlugin

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "images")


def content(w, h, seed):
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:h, 0:w]
    a = np.stack([x * 255 // max(w - 1, 1), y * 255 // max(h - 1, 1), ((x + y) * 7) % 256],
                 -1).astype(float)
    a += rng.normal(0, 40, a.shape)
    a[h // 3:h // 2, w // 4:w // 2] = [250, 10, 30]
    return np.clip(a, 0, 255).astype(np.uint8)


def png_chunk(kind, body):
    return (struct.pack(">I", len(body)) + kind + body
            + struct.pack(">I", zlib.crc32(kind + body) & 0xFFFFFFFF))


ADAM7 = ((0, 0, 8, 8), (4, 0, 8, 8), (0, 4, 4, 8), (2, 0, 4, 4), (0, 2, 2, 4), (1, 0, 2, 2),
         (0, 1, 1, 2))


def filtered(rows, bpp):
    """PNG-filter byte rows, cycling through the five filter types row by row."""
    out, prior = [], np.zeros(rows.shape[1], np.int64)
    for y, row in enumerate(rows.astype(np.int64)):
        kind = y % 5
        left = np.concatenate([np.zeros(bpp, np.int64), row[:-bpp]])
        up_left = np.concatenate([np.zeros(bpp, np.int64), prior[:-bpp]])
        if kind == 0:
            predicted = np.zeros_like(row)
        elif kind == 1:
            predicted = left
        elif kind == 2:
            predicted = prior
        elif kind == 3:
            predicted = (left + prior) >> 1
        else:
            p = left + prior - up_left
            pa, pb, pc = abs(p - left), abs(p - prior), abs(p - up_left)
            predicted = np.where((pa <= pb) & (pa <= pc), left, np.where(pb <= pc, prior, up_left))
        out.append(bytes([kind]) + ((row - predicted) & 0xFF).astype(np.uint8).tobytes())
        prior = row
    return b"".join(out)


def png16(samples, color_type, interlace=False, trns=None):
    """A 16-bit PNG written by hand (Pillow cannot write 16-bit colour), every filter type used,
    optionally Adam7-interlaced, optionally with a tRNS colour key."""
    h, w, c = samples.shape
    data = samples.astype(">u2").view(np.uint8).reshape(h, w, 2 * c)
    if interlace:
        passes = [data[y0::dy, x0::dx] for x0, y0, dx, dy in ADAM7 if x0 < w and y0 < h]
        raw = b"".join(filtered(p.reshape(p.shape[0], -1), 2 * c) for p in passes)
    else:
        raw = filtered(data.reshape(h, w * 2 * c), 2 * c)
    ihdr = struct.pack(">IIBBBBB", w, h, 16, color_type, 0, 0, int(interlace))
    extra = png_chunk(b"tRNS", struct.pack(">HHH", *trns)) if trns else b""
    return (b"\x89PNG\r\n\x1a\n" + png_chunk(b"IHDR", ihdr) + extra
            + png_chunk(b"IDAT", zlib.compress(raw)) + png_chunk(b"IEND", b""))


def chunk_info(kind, body):
    info = PngImagePlugin.PngInfo()
    info.add(kind, body)
    return info


def main():
    os.makedirs(OUT, exist_ok=True)

    def save(name, img, fmt, **kw):
        img.save(os.path.join(OUT, name), fmt, **kw)

    rgb = lambda w, h, seed: Image.fromarray(content(w, h, seed))  # noqa: E731
    save("c420.jpg", rgb(37, 23, 1), "JPEG", quality=90)
    save("c444.jpg", rgb(27, 33, 2), "JPEG", quality=92, subsampling=0)
    save("c422.jpg", rgb(34, 23, 3), "JPEG", quality=85, subsampling=1)
    save("grey.jpg", rgb(29, 35, 4).convert("L"), "JPEG", quality=90)
    save("progressive.jpg", rgb(32, 24, 5), "JPEG", quality=88, progressive=True)
    save("cmyk.jpg", rgb(31, 27, 6).convert("CMYK"), "JPEG", quality=90)
    exif = Image.Exif()
    exif[0x0112] = 6  # displayed rotated by 90 degrees
    save("exif6.jpg", rgb(40, 20, 14), "JPEG", quality=90, exif=exif.tobytes())
    save("rgb.png", rgb(27, 17, 7), "PNG")
    save("grey.png", rgb(21, 19, 8).convert("L"), "PNG")
    alpha = np.random.default_rng(9).integers(0, 256, (17, 25), dtype=np.uint8)
    save("rgba.png", Image.fromarray(np.dstack([content(25, 17, 9), alpha])), "PNG")
    save("grey_alpha.png", Image.fromarray(np.dstack([content(25, 17, 9)[..., 1], alpha]), "LA"),
         "PNG")
    palette = rgb(23, 21, 10).convert("P", palette=Image.Palette.ADAPTIVE, colors=50)
    save("palette.png", palette, "PNG")
    save("palette_transparent.png", palette, "PNG", transparency=3)
    save("bilevel.png", rgb(30, 20, 13).convert("1"), "PNG")
    deep = content(19, 13, 11)[..., 0].astype(np.uint16) * 257
    deep += np.random.default_rng(1).integers(0, 256, (13, 19)).astype(np.uint16)
    save("grey16.png", Image.fromarray(deep), "PNG")
    sixteen = {
        "rgb16.png": png16(np.random.default_rng(3).integers(0, 65536, (13, 17, 3)), 2),
        "rgba16_interlaced.png": png16(np.random.default_rng(4).integers(0, 65536, (11, 13, 4)),
                                       6, interlace=True),
        "grey_alpha16.png": png16(np.random.default_rng(5).integers(0, 65536, (9, 10, 2)), 4),
    }
    keyed16 = np.random.default_rng(6).integers(0, 65536, (7, 9, 3))
    keyed16[0, :3] = (1000, 2000, 3000)
    sixteen["rgb16_key.png"] = png16(keyed16, 2, trns=(1000, 2000, 3000))
    for name, data in sixteen.items():
        with open(os.path.join(OUT, name), "wb") as f:
            f.write(data)
    for name, gamma in (("gamma_045.png", 45455), ("gamma_080.png", 80000)):
        save(name, rgb(19, 13, 7), "PNG", pnginfo=chunk_info(b"gAMA", struct.pack(">I", gamma)))
    save("srgb.png", rgb(19, 13, 7), "PNG", pnginfo=chunk_info(b"sRGB", b"\x00"))
    save("palette_gamma.png", rgb(23, 21, 20).convert("P", palette=Image.Palette.ADAPTIVE,
                                                      colors=40),
         "PNG", pnginfo=chunk_info(b"gAMA", struct.pack(">I", 45455)))
    alpha2 = np.random.default_rng(2).integers(0, 256, (17, 19), dtype=np.uint8)
    save("rgba_srgb.png", Image.fromarray(np.dstack([content(19, 17, 21), alpha2])), "PNG",
         pnginfo=chunk_info(b"sRGB", b"\x00"))
    keyed = content(21, 13, 22)
    keyed[0:3, 0:3] = (10, 20, 30)
    save("colour_key.png", Image.fromarray(keyed), "PNG", transparency=(10, 20, 30))
    grey_keyed = rgb(15, 11, 23).convert("L")
    save("grey_key.png", grey_keyed, "PNG", transparency=int(np.asarray(grey_keyed)[0, 0]))
    save("rgb.bmp", rgb(13, 11, 15), "BMP")
    save("rgb.tif", rgb(17, 15, 25), "TIFF")
    for i in range(6):
        save(f"face_{i}.jpg", rgb(20, 24, 100 + i), "JPEG", quality=90)


if __name__ == "__main__":
    main()
