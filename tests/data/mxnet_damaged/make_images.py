"""Write this folder's damaged JPEGs (and a few intact images beside them): run once, never edit.

    python tests/data/mxnet_damaged/make_images.py        # the sources (project Python)
    /work/mxvenv/bin/python tests/data/mxnet_damaged/make.py    # what MXNet 1.9.1 makes of them

``images/`` holds photo-like JPEGs (noise over gradients, 4:2:0, quality 90) whose bytes were
then damaged the ways real folders are: cut short (a partial download or a full disk) at 40%,
75% and 98% of their length and just before the end-of-image marker; 50 stray bytes before the
end marker; a scan whose data holds a reserved marker; and, for the images nothing decodes, the
headers alone, text named ``.jpg``, an empty file and a PNG cut in its image data. The intact
images keep their names (``ok_*``); each damaged one is named for its damage. ``damaged.lst``
lists every image, ``recoverable.lst`` all but those nothing decodes (MXNet's iterator stops at
an image its decoder refuses, so its counts are taken on the recoverable ones).
"""
import os

import cv2
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
IMAGES = os.path.join(HERE, "images")


def photo(seed, width, height):
    rng = np.random.default_rng(seed)
    x = np.linspace(0, 1, width)[None, :]
    y = np.linspace(0, 1, height)[:, None]
    base = np.stack([255 * x * y, 255 * (1 - y) * x, 255 * y * (1 - x)], axis=2)
    noisy = base + rng.normal(0, 18, (height, width, 3))
    return np.clip(noisy, 0, 255).astype(np.uint8)


def jpeg(seed, width, height):
    ok, buf = cv2.imencode(".jpg", photo(seed, width, height), [cv2.IMWRITE_JPEG_QUALITY, 90])
    assert ok
    return buf.tobytes()


def reserved_marker(data):
    """A reserved marker (FF 02) written over two bytes in the middle of the scan data."""
    sos = data.index(b"\xff\xda")
    middle = (sos + len(data)) // 2
    return data[:middle] + b"\xff\x02" + data[middle + 2:]


def main():
    os.makedirs(IMAGES, exist_ok=True)
    files = {}
    for k, (w, h) in enumerate([(160, 120), (120, 160), (200, 150), (96, 96), (150, 100)]):
        files[f"ok_{k}.jpg"] = jpeg(k, w, h)
    source = jpeg(10, 176, 144)
    files["cut_40.jpg"] = source[:len(source) * 40 // 100]
    files["cut_75.jpg"] = source[:len(source) * 75 // 100]
    source = jpeg(11, 144, 176)
    files["cut_98.jpg"] = source[:len(source) * 98 // 100]
    files["no_end_marker.jpg"] = source[:-2]
    source = jpeg(12, 160, 128)
    files["stray_bytes.jpg"] = source[:-2] + bytes(range(50)) + source[-2:]
    files["reserved_marker.jpg"] = reserved_marker(jpeg(13, 128, 160))
    files["headers_only.jpg"] = source[:source.index(b"\xff\xda")]
    files["text.jpg"] = b"this is not an image, only named like one\n"
    files["empty.jpg"] = b""
    ok, png = cv2.imencode(".png", photo(14, 64, 48))
    files["cut.png"] = png.tobytes()[:len(png) // 2]
    for name, data in files.items():
        with open(os.path.join(IMAGES, name), "wb") as f:
            f.write(data)
    unrecoverable = {"headers_only.jpg", "text.jpg", "empty.jpg", "cut.png"}
    names = sorted(files)
    with open(os.path.join(HERE, "damaged.lst"), "w") as f:
        for i, name in enumerate(names):
            f.write(f"{i}\t{float(i % 3)}\timages/{name}\n")
    with open(os.path.join(HERE, "recoverable.lst"), "w") as f:
        for i, name in enumerate(names):
            if name not in unrecoverable:
                f.write(f"{i}\t{float(i % 3)}\timages/{name}\n")


if __name__ == "__main__":
    main()
