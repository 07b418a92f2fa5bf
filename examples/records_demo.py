"""Write, index, read back and check a small image record file with recio's Python API.

Usage: python examples/records_demo.py OUT_PREFIX   (writes OUT_PREFIX.rec and OUT_PREFIX.idx)
"""
import sys

import numpy as np

import recio
from recio import mx


def main(prefix: str) -> None:
    rng = np.random.default_rng(0)
    # 1. write 64 image records (a smooth random picture each, label = i % 4) with an index
    with recio.IndexedRecordWriter(prefix + ".rec", prefix + ".idx") as writer:
        for i in range(64):
            h, w = rng.integers(24, 64, size=2)
            yy, xx = np.mgrid[0:h, 0:w]
            img = np.stack([(xx * 255 // w), (yy * 255 // h), np.full((h, w), i * 4)], -1)
            header = recio.IRHeader(0, float(i % 4), i, 0)
            writer.write(i, recio.pack_img(header, img.astype(np.uint8), quality=90))
    # 2. read back sequentially
    count = sum(1 for _ in recio.RecordReader(prefix + ".rec"))
    # 3. by key, as a mapping (the .idx beside the .rec is found automatically)
    records = recio.IndexedRecordReader(prefix + ".rec")
    header, img = recio.unpack_img(records[10])
    # 4. rebuild the index by scanning and compare
    assert recio.build_index(prefix + ".rec") == [records.offsets[k] for k in records]
    # 5. the same file through the mxnet.recordio drop-in (BGR arrays, like OpenCV)
    legacy = mx.MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "r")
    legacy_header, bgr = mx.unpack_img(legacy.read_idx(10))
    assert legacy_header.id == header.id and np.array_equal(bgr[:, :, ::-1], img)
    print(f"wrote and read back {count} records; key 10: label {header.label}, "
          f"image {img.shape[1]}x{img.shape[0]}; index rebuilt by scan matches the .idx")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo")
