"""Make the MXNet reference pixels of this folder: run once with the real MXNet, never edit.

    python tests/data/mxnet_pixels/make_images.py                # the images (project Python)
    PYTHONPATH=/path/to/opencv-python-headless-4.x \\
        /work/mxenv/bin/python tests/data/mxnet_pixels/make.py   # MXNet 1.9.1, Python 3.9

Writes, with nothing but ``mxnet`` (and ``cv2``, which ``mxnet.recordio.unpack_img`` calls):

- ``pixels.rec`` / ``pixels.idx``: every ``images/*`` except the faces, packed by MXNet's
  ``MXIndexedRecordIO`` in name order (key i, ``IRHeader(0, i, i, 0)``, the file's bytes).
- ``face.rec`` / ``face.idx``: a face-recognition dataset in InsightFace's layout, as
  arcface_torch's ``MXFaceDataset`` reads it: key 0 is a header-only record with
  ``label = [7, 10]``; keys 1-6 are ``face_0.jpg`` .. ``face_5.jpg`` with ``label = [identity,
  0]`` (identities 0, 0, 1, 1, 1, 2); keys 7-9 are one header-only record per identity with its
  key range.
- ``expected.npz`` (the arrays MXNet returned; ``names`` lists the pixel records in key order):
  ``imdecode|NAME|FLAG|TO_RGB`` = ``mx.image.imdecode(bytes, flag, to_rgb).asnumpy()`` for
  (1, 1), (1, 0) and (0, 0) (MXNet's own C++ decoder: the OpenCV 3.4.2 built into MXNet);
  ``unpack_img|NAME|ISCOLOR`` = ``mx.recordio.unpack_img(record, iscolor)[1]`` for -1, 0, 1
  (``cv2.imdecode`` of the cv2 on the path; absent where it returned None); ``face|KEY`` =
  ``mx.image.imdecode(img).asnumpy()`` of each face record, as ``MXFaceDataset`` decodes it;
  ``meta`` = a JSON string with the versions used.
"""
import glob
import json
import os

import mxnet as mx
import numpy as np

try:
    import cv2
except ImportError:  # mx.recordio.unpack_img needs it; only those arrays are then missing
    cv2 = None

HERE = os.path.dirname(os.path.abspath(__file__))
FACE_IDENTITIES = [0, 0, 1, 1, 1, 2]


def write_pixels():
    names = sorted(os.path.basename(p) for p in glob.glob(os.path.join(HERE, "images", "*"))
                   if not os.path.basename(p).startswith("face_"))
    writer = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "pixels.idx"),
                                           os.path.join(HERE, "pixels.rec"), "w")
    for key, name in enumerate(names):
        with open(os.path.join(HERE, "images", name), "rb") as f:
            writer.write_idx(key, mx.recordio.pack(mx.recordio.IRHeader(0, float(key), key, 0),
                                                   f.read()))
    writer.close()
    return names


def write_faces():
    writer = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "face.idx"),
                                           os.path.join(HERE, "face.rec"), "w")
    n, ids = len(FACE_IDENTITIES), max(FACE_IDENTITIES) + 1
    header = mx.recordio.IRHeader
    writer.write_idx(0, mx.recordio.pack(header(0, [n + 1, n + 1 + ids], 0, 0), b""))
    for i, identity in enumerate(FACE_IDENTITIES):
        with open(os.path.join(HERE, "images", f"face_{i}.jpg"), "rb") as f:
            writer.write_idx(i + 1, mx.recordio.pack(header(0, [identity, 0], i + 1, 0),
                                                     f.read()))
    for identity in range(ids):
        keys = [i + 1 for i, x in enumerate(FACE_IDENTITIES) if x == identity]
        writer.write_idx(n + 1 + identity, mx.recordio.pack(
            header(0, [keys[0], keys[-1] + 1], 0, 0), b""))
    writer.close()


def main():
    names = write_pixels()
    write_faces()
    out = {"names": np.array(names)}
    reader = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "pixels.idx"),
                                           os.path.join(HERE, "pixels.rec"), "r")
    for key, name in enumerate(names):
        record = reader.read_idx(key)
        _, img = mx.recordio.unpack(record)
        for flag, to_rgb in ((1, 1), (1, 0), (0, 0)):
            out[f"imdecode|{name}|{flag}|{to_rgb}"] = mx.image.imdecode(
                img, flag=flag, to_rgb=to_rgb).asnumpy()
        if cv2 is not None:
            for iscolor in (-1, 0, 1):
                pixels = mx.recordio.unpack_img(record, iscolor)[1]
                if pixels is not None:
                    out[f"unpack_img|{name}|{iscolor}"] = pixels
    reader.close()
    faces = mx.recordio.MXIndexedRecordIO(os.path.join(HERE, "face.idx"),
                                          os.path.join(HERE, "face.rec"), "r")
    for key in range(1, len(FACE_IDENTITIES) + 1):
        _, img = mx.recordio.unpack(faces.read_idx(key))
        out[f"face|{key}"] = mx.image.imdecode(img).asnumpy()
    faces.close()
    out["meta"] = np.array(json.dumps({
        "mxnet": mx.__version__, "numpy": np.__version__,
        "cv2": None if cv2 is None else cv2.__version__,
        "imdecode": "OpenCV 3.4.2 built into MXNet (libjpeg-turbo 2.0.2)"}))
    np.savez_compressed(os.path.join(HERE, "expected.npz"), **out)


if __name__ == "__main__":
    main()
