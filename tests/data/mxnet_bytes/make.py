"""Record the bytes the real MXNet 1.9.1 writes for this folder's sources: run once, never edit.

    python tests/data/mxnet_bytes/make_images.py                 # the sources (project Python)
    /work/mxvenv/bin/python tests/data/mxnet_bytes/make.py       # MXNet 1.9.1 + its cv2

Writes, with nothing but ``mxnet`` and the ``cv2`` its ``recordio.pack_img`` and
``tools/im2rec.py`` call:

- ``pack_img.rec`` / ``.idx``: ``mx.recordio.pack_img(IRHeader(0, key, key, 0), array, quality,
  img_fmt)`` for every array of ``arrays.npz`` at JPEG qualities 1-100 (``.jpg``, and ``.jpeg``
  once) and PNG compression levels 0-9 (and 95, the default quality, which OpenCV clamps to 9),
  written by ``MXIndexedRecordIO.write_idx``; ``manifest.json["pack_img"]`` lists
  ``[key, array, img_fmt, quality]``.
- ``im2rec/NAME.rec`` / ``.idx``: MXNet's own ``tools/im2rec.py`` (the copy inside the mxnet
  package) run with ROOT ``tests/data`` on the list and with the arguments of
  ``manifest.json["im2rec"][NAME]``: ``im2rec/all.lst`` holds every image of ``images/`` and
  of ``../mxnet_pixels/images`` (each decoding rule of OpenCV), ``small.lst`` those of
  ``../mxnet_pixels/images`` and the PNGs of ``images/`` (for the runs that keep whole images).
  None of the runs resizes a 16-bit image kept by ``--color -1`` (OpenCV's pip builds hand
  that resize to Intel IPP, whose results depend on the CPU).
- ``manifest.json["versions"]``: mxnet, cv2 and numpy versions used, and how many records each
  run wrote.
"""
import glob
import json
import os
import shutil
import subprocess
import sys

import cv2
import mxnet as mx
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
DATA = os.path.dirname(HERE)
JPEG_QUALITIES = (1, 10, 50, 75, 90, 95, 100)
PNG_LEVELS = (0, 1, 3, 6, 9, 95)
#: the im2rec runs: name -> (list, arguments after PREFIX ROOT); "small" lists the PNGs of
#: images/ and ../mxnet_pixels/images only (whole images re-encoded without a resize)
IM2REC = {
    "resize32_q90": ("all", ["--resize", "32", "--quality", "90"]),
    "resize64_crop_q75": ("all", ["--resize", "64", "--center-crop", "--quality", "75"]),
    "grey_resize48": ("all", ["--color", "0", "--resize", "48"]),
    "grey_crop_resize100_q50": ("all", ["--color", "0", "--resize", "100", "--center-crop",
                                        "--quality", "50"]),
    "unchanged_q85": ("all", ["--color", "-1", "--quality", "85"]),
    "q100": ("small", ["--quality", "100"]),
    "png_resize40": ("all", ["--encoding", ".png", "--resize", "40", "--quality", "9"]),
    "png_unchanged_level3": ("small", ["--color", "-1", "--encoding", ".png", "--quality",
                                       "3"]),
}


def write_pack_img(manifest):
    arrays = np.load(os.path.join(HERE, "arrays.npz"))
    writer = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "pack_img.idx"),
                                           os.path.join(HERE, "pack_img.rec"), "w")
    entries = []
    for name in sorted(arrays.files):
        calls = [(".jpg", q) for q in JPEG_QUALITIES] + [(".jpeg", 80)]
        calls += [(".png", level) for level in PNG_LEVELS]
        for img_fmt, quality in calls:
            key = len(entries)
            header = mx.recordio.IRHeader(0, float(key), key, 0)
            writer.write_idx(key, mx.recordio.pack_img(header, arrays[name], quality, img_fmt))
            entries.append([key, name, img_fmt, quality])
    writer.close()
    manifest["pack_img"] = entries


def write_lists():
    """``all.lst`` and ``small.lst`` (see ``IM2REC``); returns how many lines each has."""
    names = sorted(glob.glob(os.path.join(HERE, "images", "*")))
    names += sorted(glob.glob(os.path.join(DATA, "mxnet_pixels", "images", "*")))
    small = [n for n in names if "mxnet_pixels" in n or n.endswith(".png")]
    os.makedirs(os.path.join(HERE, "im2rec"), exist_ok=True)
    for name, paths in (("all", names), ("small", small)):
        with open(os.path.join(HERE, "im2rec", f"{name}.lst"), "w") as f:
            for i, path in enumerate(paths):
                f.write(f"{i}\t{i % 5}\t{os.path.relpath(path, DATA)}\n")
    return {"all": len(names), "small": len(small)}


def write_im2rec(manifest):
    script = os.path.join(os.path.dirname(mx.__file__), "tools", "im2rec.py")
    counts = {}
    for name, (listed, args) in IM2REC.items():
        prefix = os.path.join(HERE, "im2rec", name)
        shutil.copy(os.path.join(HERE, "im2rec", f"{listed}.lst"), prefix + ".lst")
        subprocess.run([sys.executable, script, prefix, DATA, *args], check=True,
                       stdout=subprocess.DEVNULL)
        os.unlink(prefix + ".lst")
        reader = mx.recordio.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "r")
        counts[name] = len(reader.keys)
        reader.close()
    manifest["im2rec"] = {name: {"list": f"{listed}.lst", "args": args}
                          for name, (listed, args) in IM2REC.items()}
    return counts


def main():
    manifest = {}
    write_pack_img(manifest)
    listed = write_lists()
    counts = write_im2rec(manifest)
    manifest["versions"] = {"mxnet": mx.__version__, "cv2": cv2.__version__,
                            "numpy": np.__version__, "listed": listed, "packed": counts}
    with open(os.path.join(HERE, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1)
        f.write("\n")


if __name__ == "__main__":
    main()
