"""Make the MXNet reference data of this folder: run once with the real MXNet, never edit.

    /work/mxvenv/bin/python tests/data/mxnet_exif/make.py    # MXNet 1.9.1 (+ numpy, Pillow)

MXNet's ``ImageRecordIter`` decodes with ``cv::imdecode`` of its built-in OpenCV 3.4.2, which
applies a JPEG's EXIF orientation for colour and greyscale (``mx.image.imdecode`` does not: it
passes ``IMREAD_IGNORE_ORIENTATION``); a PNG's ``eXIf`` chunk is not read. Writes, with Pillow
(sources) and ``mxnet``:

- ``exif.rec`` / ``.idx``: a 61x43 photo crop as JPEGs with EXIF orientations 2-8 (key = the
  orientation), a greyscale JPEG with orientation 6 (key 9) and PNGs with orientations 6 and 3
  (keys 16 and 13); label = key.
- ``expected.npz``: for each record, ``ImageRecordIter`` over a one-record file of it with
  ``dtype='uint8'``, ``data_shape`` the image's size after MXNet's rotation (43x61 for a quarter
  turn) for 3 channels (``KEY|3``) and 1 channel (``KEY|1``).
"""
import io
import os

import mxnet as mx
import numpy as np
from PIL import Image

HERE = os.path.dirname(os.path.abspath(__file__))
W, H = 61, 43


def source():
    """A smooth, asymmetric image: any flip or turn shows."""
    y, x = np.mgrid[0:H, 0:W].astype(float)
    a = np.stack([x * 255 / (W - 1), y * 255 / (H - 1), 128 + 90 * np.sin(x / 4.0 + y / 7.0)], -1)
    a[5:15, 3:20] = [250, 20, 40]
    return np.clip(a, 0, 255).astype(np.uint8)


def encode(arr, fmt, orientation, **kw):
    exif = Image.Exif()
    exif[0x0112] = orientation
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, format=fmt, exif=exif.tobytes(), **kw)
    return buf.getvalue()


def main():
    rgb = source()
    grey = rgb.mean(axis=2).astype(np.uint8)
    images = {o: encode(rgb, "JPEG", o, quality=92) for o in range(2, 9)}
    images[9] = encode(grey, "JPEG", 6, quality=92)
    images[16] = encode(rgb, "PNG", 6)
    images[13] = encode(rgb, "PNG", 3)
    IR = mx.recordio.IRHeader
    w = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "exif.idx"), os.path.join(HERE, "exif.rec"), "w")
    for key, img in images.items():
        w.write_idx(key, mx.recordio.pack(IR(0, float(key), key, 0), img))
    w.close()
    one = os.path.join(HERE, "one.rec")
    expected = {}
    for key, img in images.items():
        quarter = key in (5, 6, 7, 8, 9)  # the JPEGs turned a quarter; the PNGs are not turned
        shape = (W, H) if quarter else (H, W)
        w = mx.recordio.MXRecordIO(one, "w")
        w.write(mx.recordio.pack(IR(0, float(key), key, 0), img))
        w.close()
        for channels in (3, 1):
            it = mx.io.ImageRecordIter(path_imgrec=one, data_shape=(channels,) + shape,
                                       batch_size=1, dtype="uint8", preprocess_threads=1)
            expected[f"{key}|{channels}"] = it.next().data[0].asnumpy()[0]
    os.remove(one)
    np.savez_compressed(os.path.join(HERE, "expected.npz"), **expected)


if __name__ == "__main__":
    main()
