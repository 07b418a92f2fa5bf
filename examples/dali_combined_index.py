"""Check that NVIDIA DALI reads a recio shard set through its combined index, record for record.

DALI's ``fn.readers.mxnet`` takes several ``.rec`` paths but one index whose offsets run
across them (``recio index --combined``). This writes a shard set of image records (random
bytes behind real IRHeaders), its combined index, reads everything back with DALI's reader on
the CPU (no GPU needed) and compares every payload and label with what was written.

Needs DALI (``pip install nvidia-dali-cuda120``; a large wheel, not a recio dependency).
Usage: ``python examples/dali_combined_index.py [FOLDER]`` (default: a temporary folder).
"""
from __future__ import annotations

import os
import sys
import tempfile

import numpy as np

import recio
from recio.image.header import IRHeader, pack


def main(folder: str) -> int:
    try:
        from nvidia.dali import fn, pipeline_def
    except ImportError:
        print("this check needs NVIDIA DALI: pip install nvidia-dali-cuda120", file=sys.stderr)
        return 2
    rng = np.random.default_rng(0)
    prefix = os.path.join(folder, "set")
    written = []
    with recio.ShardWriter(prefix, max_records=37) as writer:
        for key in range(100):
            body = rng.bytes(int(rng.integers(1, 3000)))
            label = float(key % 7)
            written.append((body, label))
            writer.write(key, pack(IRHeader(0, label, key, 0), body))
    index = os.path.join(folder, "set-all.idx")
    recio.combined_index(writer.manifest, index)
    recs = writer.manifest.rec_paths()

    @pipeline_def(batch_size=10, num_threads=1, device_id=None)  # CPU only
    def pipe():
        data, labels = fn.readers.mxnet(path=recs, index_path=[index], random_shuffle=False,
                                        name="reader")
        return data, labels

    pipeline = pipe()
    pipeline.build()
    read = []
    while len(read) < len(written):
        data, labels = pipeline.run()
        read += [(bytes(np.array(data.at(i))), float(np.array(labels.at(i)).reshape(-1)[0]))
                 for i in range(len(data))]
    same = read[:len(written)] == written
    print(f"DALI read {len(written)} records from {len(recs)} shards through {index}: "
          f"{'identical' if same else 'DIFFERENT'}")
    return 0 if same else 1


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(main(sys.argv[1]))
    with tempfile.TemporaryDirectory() as tmp:
        sys.exit(main(tmp))
